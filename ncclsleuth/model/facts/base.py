"""The fact registry: named, tested questions the rules ask of the job model.

A fact is a function ``JobModel -> list[record]``, registered with the record type it
returns: a ``TypedDict`` for type checkers (a subclass of :class:`Record`), a plain class of
annotations at run time, that declares every field a rule
may filter on (``where:``) or put in its message (``{field}``), plus ``evidence`` (the
events that prove it).  Rules refer to facts by name (``fact: bad_interface``); the rule
schema checks the name, the ``where:`` keys and the placeholders against the
declaration when the rule file is loaded.  The YAML stays data and the reasoning that
needs code lives in this package, where it is unit-tested.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict, TypeVar

from ... import events as E
from ..job import JobModel
from ..stats import median, ranges

__all__ = ["FACTS", "LIVE", "SPECS", "Fact", "FactFn", "FactSpec", "Record", "fact", "median", "ranges"]


if TYPE_CHECKING:
    class Record(TypedDict):
        """What every fact record carries: the lines that prove it (a finding's evidence)."""

        evidence: list[E.Event]
else:
    class Record:
        """At run time only a declaration (records are plain dicts): subclassing
        ``typing.TypedDict`` compiles every field's annotation when the class is made, ~4 ms
        of every start for the facts' records; type checkers see the TypedDict above."""

        evidence: list[E.Event]


def record_fields(record: type) -> frozenset[str]:
    """The fields a record declares (its annotations and its bases')."""
    return frozenset(k for c in record.__mro__ for k in vars(c).get("__annotations__", {}))


Fact = Mapping[str, Any]
FactFn = Callable[[JobModel], Sequence[Fact]]
R = TypeVar("R", bound=Callable[[JobModel], Sequence[Any]])


class FactSpec(NamedTuple):
    """A registered fact: its name, the fields of its records, whether only ``watch`` has it."""

    name: str
    fn: FactFn
    fields: frozenset[str]
    live: bool = False


#: name -> function (what rules evaluate)
FACTS: dict[str, FactFn] = {}
#: name -> declaration (what the rule schema checks against)
SPECS: dict[str, FactSpec] = {}
#: facts of a job watched live: they read ``JobModel.live`` and are empty without it
LIVE: set[str] = set()


def fact(record: type, *, live: bool = False) -> Callable[[R], R]:
    """Register a fact under its function name, with the ``TypedDict`` of its records.

    ``live``: a fact of ``watch``'s view of the processes (``JobModel.live``), empty elsewhere.
    """
    fields = record_fields(record)
    if "evidence" not in fields:
        raise TypeError(f"{record.__name__}: a fact record is a Record (it carries its evidence)")

    def deco(fn: R) -> R:
        name = fn.__name__
        FACTS[name] = fn
        SPECS[name] = FactSpec(name, fn, fields, live)
        if live:
            LIVE.add(name)
        return fn

    return deco
