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

from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from ... import events as E
from ...util.classes import NamedTuple
from ..job import JobModel
from ..stats import TEXT_MOST, median, ranges

__all__ = ["FACTS", "LIVE", "PER_LINE", "SPECS", "TEXT_MOST", "Fact", "FactFn", "FactSpec", "LazyRecord", "Record",
           "fact", "median", "ranges"]


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


class LazyRecord(Mapping[str, Any]):
    """A record whose fields are read when asked from the few objects it is made of (its
    ``__slots__``), not a dict of them: for the records made by the thousand, one per line
    (a dict of 21 fields and an evidence list are ~530 bytes; such a record is ~70).  A subclass
    names its fields in ``_KEYS`` and reads them in ``__getitem__``; rules read it as a dict
    (``rules.match``)."""

    __slots__ = ()
    _KEYS: tuple[str, ...] = ()
    _KEYSET: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._KEYSET = frozenset(cls._KEYS)

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # dict.get, without Mapping's try/except
        return self[key] if key in self._KEYSET else default

    def __contains__(self, key: object) -> bool:
        return key in self._KEYSET

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)

    def __repr__(self) -> str:
        return repr(dict(self))


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
#: facts with one record per problem line, read only by fallback rules (which see only the lines
#: no finding explains): name -> the function that leaves out the lines already explained
PER_LINE: dict[str, Callable[[JobModel, Container[tuple[str, int]]], Sequence[Fact]]] = {}


def fact(record: type, *, live: bool = False, per_line: bool = False) -> Callable[[R], R]:
    """Register a fact under its function name, with the ``TypedDict`` of its records.

    ``live``: a fact of ``watch``'s view of the processes (``JobModel.live``), empty elsewhere.
    ``per_line``: one record per problem line, each with that line as its only evidence, for the
    fallback rules; the function takes ``skip`` as well, the (file, line)s findings already
    explain, and makes no record of those (a fallback rule would drop it unread: on a 4,096-rank
    desync those were 28,672 records, 24 MB).
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
        if per_line:
            PER_LINE[name] = fn  # type: ignore[assignment]  # R: a fact function that also takes skip
        return fn

    return deco
