"""Typed events: what one log line (or one multi-line block) means.

Every event carries its origin (file, line) so a finding can quote it as evidence,
plus whatever the line's envelope told us (host, pid, tid, device, launcher rank,
timestamp).  The typed fields come from the grammar (``ncclsleuth/parse/grammar``).

Events are slotted classes: a 10,000-rank job produces millions of them and they
must be cheap.  They are immutable by convention, not at run time: nothing changes an
event after the parser builds it, and a frozen dataclass's ``__init__`` (one
``object.__setattr__`` per field) cost 1.66 us an event against 0.47 us.  They are
not dataclasses either: ``@dataclass(slots=True)`` on the 71 kinds took 37 ms of every
start-up (one compile per generated method and a second class per kind), against ~10 ms
for the whole module as it is.  :class:`_EventMeta` builds the same slotted class with
the ``__init__`` a dataclass would have (positional or keyword, defaults as declared),
compiled the first time a kind is built (a run meets a few dozen kinds) and kept in
the code store.  The metaclass is declared with ``typing.dataclass_transform``, so type
checkers see each kind as the dataclass it behaves as and check every constructor call
(``tests/test_events.py`` checks the runtime signature against that view).

A field may not shadow an attribute of the base (``is_problem``, ``to_dict``, ...): the
class is refused when it is created.  Value types (interfaces, IB devices, tree edges)
stay frozen dataclasses: they compare and hash by value.  ``to_dict()`` returns builtins
only, so JSON output and the per-file results shipped between processes never depend on
these classes.
"""
from __future__ import annotations

import dataclasses
import sys
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar

from ..util import bounded_put
from ..util.cache import CODE
from ..util.reread import line as _read_again

if TYPE_CHECKING:  # typing's own from Python 3.11; type checkers know it for 3.10 too
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: the decorator only informs type checkers
    def dataclass_transform(**_: Any) -> Any:
        return lambda obj: obj

#: Event kinds that represent a problem line: each must be explained or listed.
ERROR_KINDS: set[str] = set()
#: kind name -> event class
REGISTRY: dict[str, type[Event]] = {}


def _lazy_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """First construction of a class: compile its real ``__init__``, then use it."""
    _compile_init(type(self))(self, *args, **kwargs)


#: equal values of event fields, one object each (see :func:`share`)
_SHARED: dict[Any, Any] = {}
#: values kept in ``_SHARED`` at most: when full it starts again (values that repeat are
#: soon back), so that a log of distinct values (a hostile one: 10^6 host names) costs at
#: most ~1 MB here
MAX_SHARED = 1 << 13
#: strings longer than this are not shared (whole lines, messages: rarely equal)
SHARE_LEN = 96
#: field annotations whose values are shared: text, and tuples of value records or pairs
#: (a host's interface and device lists, an init's phase names and times) that most
#: processes of a job print alike
_SHARED_STR = frozenset({"str", "str | None"})
#: ... but not the line itself, nor its time stamp: (nearly) every one is different
_UNSHARED = frozenset({"text", "ts"})
_SHARED_TUPLE = frozenset({"tuple[Iface, ...]", "tuple[IbDev, ...]", "tuple[tuple[str, float], ...]",
                           "tuple[tuple[str, str], ...]", "tuple[str, ...]", "Iface | None"})


#: equal integers of event fields, one object each (see :func:`share_int`): apart from
#: ``_SHARED``, where ``1``, ``1.0`` and ``True`` would be one key
_SHARED_INT: dict[int, int] = {}
#: integers kept in ``_SHARED_INT`` at most (~2 MB when full), then it starts again: a job's
#: pids, thread ids and ranks repeat on every line of their process, most within a few lines
MAX_SHARED_INT = 1 << 15
#: integer fields not shared: the line number (every one is different)
_UNSHARED_INT = frozenset({"line"})
_SHARED_INT_ANN = frozenset({"int", "int | None"})
#: ``share_int``'s hit, without its call (a zero, and a miss, go the call's way)
shared_int_get = _SHARED_INT.get


def _one_of(table: dict[Any, Any], bound: int, value: Any) -> Any:
    """The object ``table`` keeps for the values equal to ``value`` (``value`` itself when it is
    the first); at ``bound`` values the table starts again (values that repeat are soon back)."""
    got = table.get(value)
    return bounded_put(table, bound, value, value) if got is None else got


def share_int(value: int) -> int:
    """The one object of the integers equal to ``value`` this process keeps.

    Integers past 256 are an object each (28-32 bytes): the 8,000-rank file's events held
    457,000 of them (pids, thread ids, ranks, sequence numbers, sizes, timeouts) for 66,000
    distinct values, 13% of what the model retained.  Bounded as :func:`share`."""
    return _one_of(_SHARED_INT, MAX_SHARED_INT, value)


#: ``share``'s hit, without its call: ``shared_get(v) or share(v)`` is ``share(v)`` (a miss, and an
#: empty value, go the call's way; ``clear`` keeps the dict, so the bound method stays right)
shared_get = _SHARED.get


def share(value: Any) -> Any:
    """The one object of the values equal to ``value`` (hashable) this process keeps.

    Events of a 2,048-rank job held 12,288 copies of the same host names, communicator
    ids, phase names and levels, each a string of its own sliced from its line (~30% of
    the bytes the model retains per rank); one object per distinct value makes those a
    pointer each.  Bounded: at ``MAX_SHARED`` distinct values the table starts again."""
    return _one_of(_SHARED, MAX_SHARED, value)


def shared_as(name: str, ann: str) -> str:
    """How an event's ``__init__`` stores field ``name`` of annotation ``ann``: ``"str"`` (through
    :func:`share` when a string of at most ``SHARE_LEN`` characters), ``"tuple"`` (through it when
    not empty) or ``""`` (as given).  Code that builds events by their slots (the learned makers:
    ``ncclsleuth.parse.learned.compiled``) asks this, so both share the same values."""
    if name not in _UNSHARED and ann in _SHARED_STR:
        return "str"
    if ann in _SHARED_TUPLE:
        return "tuple"
    if ann in _SHARED_INT_ANN and name not in _UNSHARED_INT:
        return "int"
    return ""


def _assign(name: str, ann: str) -> str:
    """The generated ``__init__``'s line for one field: short strings and value tuples shared;
    the line's text into its slot (a string, or where it is kept by reference: ``Event.text``)."""
    if name == "text":
        return "\n    self._text = text"
    how = shared_as(name, ann)
    if how == "str":
        short = f"{name}.__class__ is str and len({name}) <= {SHARE_LEN}"
        return f"\n    self.{name} = (S({name}) or share({name})) if {short} else {name}"
    if how == "tuple":
        return f"\n    self.{name} = share({name}) if {name} else {name}"
    if how == "int":  # not a bool (an int too), nor None
        return f"\n    self.{name} = (I({name}) or share_int({name})) if {name}.__class__ is int else {name}"
    return f"\n    self.{name} = {name}"


def _compile_init(cls: type) -> Any:
    """``def __init__(self, source, line, text, host=None, ...)``: one assignment per
    field (repeated values shared), defaults as declared, the signature a dataclass would have."""
    names = cls.FIELDS  # type: ignore[attr-defined]
    defaults = cls._DEFAULTS  # type: ignore[attr-defined]
    types = cls.FIELD_TYPES  # type: ignore[attr-defined]
    body = "".join(_assign(n, types[n]) for n in names) or "\n    pass"
    ns: dict[str, Any] = {"share": share, "S": shared_get, "share_int": share_int, "I": shared_int_get}
    exec(CODE.compile(f"def __init__(self, {', '.join(names)}):{body}", "<event-init>"), ns)  # noqa: S102 - our field names
    init = ns["__init__"]
    init.__defaults__ = tuple(defaults[n] for n in names[len(names) - len(defaults):])
    init.__qualname__ = f"{cls.__name__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
    return init


@dataclass_transform(eq_default=False)
class _EventMeta(type):
    """Builds each event class with ``__slots__`` for its own annotated fields (ClassVars
    excepted), at class creation: one class per event kind, not a class and a slotted copy.

    ``FIELDS`` lists every field in order (inherited first), ``FIELD_TYPES`` their
    annotation strings and ``_DEFAULTS`` their defaults; as with a dataclass, a field
    without a default may not follow one that has a default.
    """

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _EventMeta:
        types: dict[str, str] = {}
        defaults: dict[str, Any] = {}
        for base in bases:
            types.update(getattr(base, "FIELD_TYPES", {}))
            defaults.update(getattr(base, "_DEFAULTS", {}))
        own = []
        for field, ann in ns.get("__annotations__", {}).items():
            if str(ann).startswith(("ClassVar", "typing.ClassVar")):
                continue
            if field not in types and any(hasattr(b, field) for b in bases):
                raise TypeError(f"{name}.{field}: a field may not shadow the base attribute {field!r}")
            own.append(field)
            types[field] = str(ann)
            if field in ns and not isinstance(ns[field], property):  # ``text``: its slot is ``_text``
                defaults[field] = ns.pop(field)
            elif defaults:
                raise TypeError(f"{name}.{field}: a field without a default follows one with a default")
        ns["__slots__"] = tuple("_text" if f == "text" else f for f in own)  # ``text``: see Event.text
        ns["FIELDS"] = tuple(types)
        #: every field's value in order, the text's slot for ``text`` (``__reduce__``): one C call
        #: (an event has a source, a line and a text: the getter of 2+ names gives a tuple)
        ns["_VALUES"] = attrgetter(*("_text" if f == "text" else f for f in types))
        ns["FIELD_TYPES"] = types
        ns["_DEFAULTS"] = defaults
        ns["__init__"] = _lazy_init
        return super().__new__(mcls, name, bases, ns)


class Event(metaclass=_EventMeta):
    """Common envelope of every event."""

    kind: ClassVar[str] = "event"
    is_error: ClassVar[bool] = False
    FIELDS: ClassVar[tuple[str, ...]]
    FIELD_TYPES: ClassVar[dict[str, str]]

    source: str
    line: int
    text: str
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    dev: int | None = None
    rank: int | None = None
    ts: str | None = None
    level: str | None = None
    #: an NCCL WARN message this line carries without NCCL's own ``NCCL WARN`` prefix, as
    #: ``ncclGetLastError()`` returns it: quoted by the layer above (PyTorch's ``Last error:``
    #: line, XLA's ``Last NCCL warning(error) log entry``) or pasted without the word NCCL.
    #: The knowledge base identifies it as the NCCL message it is; the line stays the evidence.
    inner: str | None = None

    if not TYPE_CHECKING:  # type checkers see the field ``text: str`` above; its slot is ``_text``
        @property
        def text(self) -> str:
            """The line: kept as a string, or by reference (:mod:`ncclsleuth.util.reread`: its
            place in its file, where the model keeps many of them) and read again when asked for."""
            t = self._text
            return t if t.__class__ is str else _read_again(self.source, t, self.line)

        @text.setter
        def text(self, value: str) -> None:
            self._text = value

    def __repr__(self) -> str:
        """As a dataclass repr."""
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({args})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the class and its field values: rebuilt by one ``__init__`` call
        instead of one ``setattr`` per slot (workers ship thousands of events); a text kept
        by reference travels as the reference (the receiving process reads it again)."""
        return type(self), self._VALUES(self)  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        """All fields as builtins, ``kind`` first, ``None`` values dropped."""
        out: dict[str, Any] = {"kind": self.kind}
        for name in self.FIELDS:
            v = getattr(self, name)
            if v is None:
                continue
            out[name] = v if type(v) in _SCALARS else plain(v)
        return out

    @property
    def is_problem(self) -> bool:
        """True when this line reports a problem (WARN, exception, error-level log).

        Named so that no event field can shadow it: eleven kinds have a field ``error``
        (the error text), and a property of that name read the empty text as "no problem",
        which dropped their lines from the report."""
        return self.is_error or self.level in ("WARN", "E", "F", "ERROR", "CRITICAL", "FATAL")

    @property
    def wraps_message(self) -> bool:
        """True for a message that carries another one ("watchdog thread terminated with
        exception: <message>"): a message the grammar knows inside it is the better event."""
        return False


_SCALARS = frozenset({str, int, float, bool})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """Field names of an event or value record, in order (``dataclasses.fields`` filters
    on every call)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        fields = getattr(cls, "FIELDS", None)
        names = _FIELD_NAMES[cls] = fields if fields is not None else tuple(f.name for f in dataclasses.fields(cls))
    return names


def is_record(v: Any) -> bool:
    """True for an event or a value record: fields read as attributes."""
    return isinstance(v, Event) or (hasattr(v, "__dataclass_fields__") and not isinstance(v, type))


def plain(v: Any) -> Any:
    """A field value as ``to_dict`` shows it: value records as dicts, tuples as lists."""
    if isinstance(v, tuple):
        return [plain(x) for x in v]
    if is_record(v):
        return {name: plain(getattr(v, name)) for name in field_names(type(v))}
    return v


def register(kind: str, *, error: bool = False) -> Any:
    """Class decorator: give an event class its kind and register it."""

    def deco(cls: type[Event]) -> type[Event]:
        cls.kind = kind
        cls.is_error = error
        REGISTRY[kind] = cls
        if error:
            ERROR_KINDS.add(kind)
        return cls

    return deco


def ev(kind: str, *, error: bool = False):  # type: ignore[no-untyped-def]
    """Shorthand: ``@ev("kind")`` registers an event class under its kind.

    Events compare by identity (each is one line of one file): no ``__eq__``/``__hash__``.
    """

    def deco(cls: type[Event]) -> type[Event]:
        return register(kind, error=error)(cls)

    return deco
