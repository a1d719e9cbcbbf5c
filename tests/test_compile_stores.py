"""The stores that spare every start work it did before (regex matcher code, dataclass
methods) give exactly what the standard library gives."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import field

import pytest

from ncclsleuth.util import rxstore
from ncclsleuth.util.classes import NamedTuple, dataclass

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


class _Kept(NamedTuple):
    n: int
    s: str


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


def test_namedtuple_from_the_code_store_is_typings(monkeypatch):
    """A ``util.classes.NamedTuple`` class is what ``typing.NamedTuple`` makes of the same body
    (fields, defaults, annotations as ForwardRefs, methods, docstring, pickling), its annotations'
    and ``__new__``'s code taken from the code store, and the swap ends with the class."""
    import collections
    import pickle
    import typing

    from ncclsleuth.util import cache

    asked: list[tuple[str, str]] = []
    real = cache.CODE.compile
    monkeypatch.setattr(cache.CODE, "compile", lambda src, name, mode="exec": asked.append((mode, src))
                        or real(src, name, mode))

    body = {"__annotations__": {"a": "int", "b": "str | None"}, "b": None, "__doc__": "Doc.",
            "twice": lambda self: self.a * 2, "__module__": __name__}
    ours = type(NamedTuple)("Ours", (NamedTuple,), dict(body))
    std = typing.NamedTupleMeta("Std", (typing._NamedTuple,), dict(body))  # type: ignore[attr-defined]
    o, s = ours(3), std(3)
    assert tuple(o) == tuple(s) == (3, None) and o.twice() == 6 and ours.__doc__ == "Doc."
    assert ours._fields == std._fields and ours._field_defaults == std._field_defaults == {"b": None}
    assert ours.__annotations__ == std.__annotations__ and ours.__mro__[1:] == (tuple, object)
    assert ours.__new__.__code__.co_code == std.__new__.__code__.co_code
    assert ("eval", "int") in asked and ("eval", "str | None") in asked
    assert any(mode == "eval" and src.startswith("lambda _cls, a, b") for mode, src in asked)
    assert "compile" not in vars(typing) and "eval" not in vars(collections)
    assert pickle.loads(pickle.dumps(_Kept(1, "x"))) == _Kept(1, "x")


def test_an_expression_and_a_statement_of_one_text_are_kept_apart():
    """The code store keeps an expression under its own key: the same text compiled as statements
    is another code object (``x`` as a module returns nothing; as an expression, x)."""
    from ncclsleuth.util import cache

    store = cache.CodeStore()
    as_module, as_expr = store.compile("x", "<t>"), store.compile("x", "<t>", "eval")
    store.save()
    again = cache.CodeStore()
    assert eval(again.compile("x", "<t>", "eval"), {"x": 5}) == 5  # noqa: S307 - our test text
    assert eval(as_expr, {"x": 5}) == 5 and eval(as_module, {"x": 5}) is None  # noqa: S307
    assert again._used == {cache.code_key(cache.EVAL_MARK + "x")}
