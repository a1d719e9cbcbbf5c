"""The event base: slotted kinds with the constructor a dataclass would have, that type
checkers see as dataclasses, and no field that hides an attribute of the base."""
from __future__ import annotations

import dataclasses
import inspect
import textwrap
from typing import Any

import pytest

from ncclsleuth import events as E
from ncclsleuth.events.base import Event, ev


@pytest.mark.parametrize("name", ["is_problem", "wraps_message", "to_dict", "kind"])
def test_a_field_that_shadows_a_base_attribute_is_refused(name: str) -> None:
    with pytest.raises(TypeError, match="may not shadow the base attribute"):
        type("Bad", (Event,), {"__annotations__": {name: "str"}, name: ""})


def test_a_field_without_default_after_one_with_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows one with a default"):
        type("Bad", (Event,), {"__annotations__": {"extra": "str"}})


def test_every_kind_has_the_constructor_a_dataclass_would_have() -> None:
    """The generated ``__init__`` takes the fields in order, positional or keyword, with the
    declared defaults: what ``dataclass_transform`` tells mypy it is."""
    for kind, cls in E.REGISTRY.items():
        cls("f.log", 1, "t")  # compiles the real __init__
        got = inspect.signature(cls.__init__)
        fields = [dataclasses.field(default=cls._DEFAULTS[n]) if n in cls._DEFAULTS else dataclasses.field()
                  for n in cls.FIELDS]
        twin: Any = dataclasses.make_dataclass(cls.__name__, [(n, Any, f) for n, f in zip(cls.FIELDS, fields)])
        want = inspect.signature(twin.__init__)
        assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == \
               [(p.name, p.kind, p.default) for p in want.parameters.values()], kind
        assert not hasattr(cls("f.log", 1, "t"), "__dict__"), kind  # slotted


def test_kinds_register_once_and_say_if_they_are_problems() -> None:
    assert E.REGISTRY["ibv_error"] is E.IbvError and "ibv_error" in E.ERROR_KINDS
    line = E.IbvError("f.log", 3, "t", error="")  # an empty error text is still a problem line
    assert line.is_problem and E.Text("f.log", 1, "t").is_problem is False
    assert E.Text("f.log", 1, "t", level="WARN").is_problem


def test_a_new_kind_is_a_class_and_a_decorator() -> None:
    @ev("test_only_kind")
    class TestOnly(Event):
        what: str = ""

    try:
        e = TestOnly("f.log", 2, "t", what="x")
        assert e.to_dict() == {"kind": "test_only_kind", "source": "f.log", "line": 2, "text": "t", "what": "x"}
    finally:
        del E.REGISTRY["test_only_kind"]


def test_type_checkers_check_event_constructors(tmp_path) -> None:
    """mypy sees the kinds as dataclasses (typing.dataclass_transform on the metaclass)."""
    api = pytest.importorskip("mypy.api")
    src = tmp_path / "calls.py"
    src.write_text(textwrap.dedent("""
        from ncclsleuth import events as E
        E.WarnText(source="a", line=1, text="t", message="ok")
        E.WarnText(source="a", line=1, text="t", mesage="typo")
        E.CommInit("a", "not a line number", "t")
    """))
    out, _, code = api.run([str(src), "--no-incremental", "--follow-imports=silent"])
    assert code == 1
    assert 'Unexpected keyword argument "mesage" for "WarnText"' in out
    assert 'Argument 2 to "CommInit" has incompatible type "str"; expected "int"' in out
    assert out.count("error:") == 2, out
