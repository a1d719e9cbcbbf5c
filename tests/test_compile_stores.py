"""The stores that spare every start work it did before (regex matcher code, dataclass
methods) give exactly what the standard library gives."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import field

import pytest

from ncclsleuth.util import rxstore
from ncclsleuth.util.classes import dataclass

PATTERNS = [(r"(?P<host>[\w.-]+):(\d+):(\d+) \[(\d+)\] NCCL (INFO|WARN) (.*)", 0),
            (r"^gid\[\s*(\d+)\]$", re.I), (r"(?m)^\s*#", 0), (rb"\A\s*\{\s*\"(a|b)\"", 0),
            (r"\bTimed out\b|(?:Watchdog caught)", re.IGNORECASE | re.MULTILINE)]


@pytest.mark.parametrize("pattern,flags", PATTERNS)
def test_regex_from_the_store_equals_re_compile(pattern, flags):
    fresh = rxstore.RegexStore()
    made = fresh.compile(pattern, flags)
    fresh.save()
    again = rxstore.RegexStore()  # another process: the kept code, no parse
    parsed = []
    real = rxstore._parser.parse
    try:
        rxstore._parser.parse = lambda *a: parsed.append(a) or real(*a)  # type: ignore[assignment]
        kept = again.compile(pattern, flags)
    finally:
        rxstore._parser.parse = real  # type: ignore[assignment]
    expected = re.compile(pattern, flags)
    assert parsed == []
    for p in (made, kept):
        assert p == expected and p.flags == expected.flags and p.groupindex == expected.groupindex
        assert p.groups == expected.groups and p.pattern == expected.pattern


def test_a_damaged_store_entry_falls_back_to_re_compile():
    import marshal

    path = rxstore._path()
    assert path is not None
    key = (r"NCCL (\w+)", 0)
    with open(path, "wb") as f:
        f.write(marshal.dumps({key: (32, [999999, 1, 2], 0, {}, (None,))}))  # code _sre refuses
    store = rxstore.RegexStore()
    p = store.compile(*key)
    assert p == re.compile(*key) and p.match("NCCL INFO").group(1) == "INFO"
    with open(path, "wb") as f:
        f.write(b"not marshal")
    assert rxstore.RegexStore().compile(*key) == re.compile(*key)


def test_entry_not_kept_when_it_does_not_rebuild_the_pattern(monkeypatch):
    """What is kept is checked against re.compile's pattern when it is made."""
    expected = re.compile("abc")
    real = rxstore._compiler._code
    other = rxstore._parser.parse("abd", 0)  # valid matcher code, of another pattern
    monkeypatch.setattr(rxstore._compiler, "_code", lambda p, flags: real(other, flags))
    assert rxstore._entry("abc", 0, expected) is None
    monkeypatch.setattr(rxstore._compiler, "_code", real)
    assert rxstore._entry("abc", 0, expected) is not None


@dataclass(frozen=True)
class _Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()


@dataclass
class _Bag:
    name: str
    items: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Slotted:
    a: str
    b: int | None = None


def test_dataclass_from_the_code_store_is_a_dataclass():
    p = _Point(1)
    assert p == _Point(1, 0, ()) and p != _Point(2) and hash(p) == hash(_Point(1))
    assert repr(p) == "_Point(x=1, y=0, tags=())"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(_Bag)] == ["name", "items"]
    a, b = _Bag("a"), _Bag("b")
    a.items.append(1)
    assert b.items == [] and dataclasses.asdict(a) == {"name": "a", "items": [1]}
    s = _Slotted("x")
    assert not hasattr(s, "__dict__") and s.__slots__ == ("a", "b") and s == _Slotted("x", None)
    assert "exec" not in vars(dataclasses)  # the swap ends with the class


def test_dataclass_methods_come_from_the_code_store(monkeypatch):
    from ncclsleuth.util import cache

    sources: list[str] = []
    real = cache.CODE.compile
    monkeypatch.setattr(cache.CODE, "compile", lambda src, name: sources.append(src) or real(src, name))

    @dataclass(frozen=True)
    class Local:
        v: int

    assert Local(3) == Local(3) and Local(3).v == 3
    assert any("def __init__(self" in s and "v" in s for s in sources)
    assert any("def __eq__" in s for s in sources)


def test_dataclass_same_as_the_standard_one():
    """Same generated methods, compiled by dataclasses itself or taken from the store."""
    ours = dataclass(frozen=True)(type("Ours", (), {"__annotations__": {"x": int, "y": str}, "y": "a"}))
    std = dataclasses.dataclass(frozen=True)(type("Std", (), {"__annotations__": {"x": int, "y": str}, "y": "a"}))
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        assert getattr(ours, name).__code__.co_code == getattr(std, name).__code__.co_code, name
