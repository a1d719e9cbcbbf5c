"""The message templates of rules: placeholders, defaults and optional clauses.

A rule's ``title``, ``message`` and ``fix`` are filled from what matched:

* ``{field}``: a field of the first matched item, ``{name.field}`` one of the item named
  with ``as: name``, or what every finding has (``{count}``, ``{hosts}``, ``{nhosts}``,
  ``{ranks}``, ``{host}``, ``{rank}``, ``{who}``);
* ``{field|words}``: the same, and ``words`` where the value is missing;
* ``{field:,}``: a count, written as :func:`~ncclsleuth.model.stats.number` writes numbers
  (``8,000 ranks``), the ``20000+`` of a count that is a floor as ``20,000+``, any other value
  as ``{field}`` is: for counts only, never for identifiers (ranks, sequence numbers, ports, pids);
* ``[ on {host}]``: an optional clause.  Square brackets around at least one placeholder
  are kept (without the brackets) only when every placeholder directly in them has a
  value; otherwise the whole clause is dropped.  Clauses nest:
  ``[ (seq {seq}[, shape {shape}])]`` keeps the sequence number without the shape.
  Brackets with no placeholder inside are plain text (``os.environ["RANK"]``), and so is
  a bracket without its pair; ``\\[`` and ``\\]`` are literal brackets anywhere.
* A template that opens with a clause or a placeholder starts with a capital when what
  comes first is its own text (the clause was dropped, a default was used), not a value:
  ``[{who}: ]the watchdog gave up`` reads ``The watchdog gave up`` when the logs name
  nobody, ``{host|a process} could not connect`` reads ``A process could not connect``.

A value is missing when it is None, empty, or ``?`` (what the model stores for an unknown
host).  A missing placeholder outside any clause and without a default says ``unknown``
and is recorded in :attr:`Filled.missing`: the rule pack's tests fail on it, so no shipped
rule prints a placeholder it cannot fill, and a user's rule still reads as words, never
as ``?``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import field
from functools import lru_cache
from typing import Any

from ..model.stats import number
from ..util.classes import dataclass
from ..util.rxstore import rx

#: ``{a}``, ``{a.b}``, ``{a|default}``, ``{a.b|default}``, each with ``:,`` after the name (a count)
PLACEHOLDER = rx(r"\{([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?(:,)?(?:\|([^{}]*))?\}")
#: a count that is a floor, as :func:`~ncclsleuth.rules.findings.finding` writes ``{count}`` past the kept events
_FLOOR = rx(r"(\d+)\+")
_TOKEN = rx(r"\\[\[\]]|\[|\]|" + PLACEHOLDER.pattern)
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Slot:
    """One placeholder: ``{name.sub:,|default}``."""

    name: str
    sub: str | None
    default: str | None
    raw: str
    #: ``:,``: a count, written with thousands separators
    count: bool = False


@dataclass(frozen=True)
class Clause:
    """An optional clause: kept when every slot directly in it has a value."""

    parts: tuple[Part, ...]


Part = str | Slot | Clause


@dataclass
class Filled:
    """A filled template and the placeholders that had to say ``unknown``."""

    text: str
    missing: list[str] = field(default_factory=list)


@lru_cache(maxsize=2048)
def parse(tpl: str) -> tuple[Part, ...]:
    """The template as text, slots and clauses (cached: a rule's templates are few)."""
    stack: list[list[Part]] = [[]]
    pos = 0
    for m in _TOKEN.finditer(tpl):
        if m.start() > pos:
            stack[-1].append(tpl[pos:m.start()])
        tok = m.group(0)
        if tok in ("\\[", "\\]"):
            stack[-1].append(tok[1])
        elif tok == "[":
            stack.append([])
        elif tok == "]":
            if len(stack) == 1:
                stack[-1].append("]")
            else:
                inner = stack.pop()
                stack[-1].extend([Clause(tuple(inner))] if _has_slot(inner) else ["[", *inner, "]"])
        else:
            stack[-1].append(Slot(m.group(1), m.group(2), m.group(4), tok, m.group(3) is not None))
        pos = m.end()
    if pos < len(tpl):
        stack[-1].append(tpl[pos:])
    while len(stack) > 1:  # an unclosed bracket is text
        inner = stack.pop()
        stack[-1].extend(["[", *inner])
    return tuple(stack[0])


def _has_slot(parts: list[Part] | tuple[Part, ...]) -> bool:
    return any(isinstance(p, Slot) or (isinstance(p, Clause) and _has_slot(p.parts)) for p in parts)


def placeholders(tpl: str) -> Iterator[tuple[str, str | None, bool]]:
    """(name, sub-field, optional) of every placeholder: optional when it has a default or
    stands in a clause (the schema checks the names against what a match provides)."""

    def walk(parts: tuple[Part, ...], in_clause: bool) -> Iterator[tuple[str, str | None, bool]]:
        for p in parts:
            if isinstance(p, Slot):
                yield p.name, p.sub, in_clause or p.default is not None
            elif isinstance(p, Clause):
                yield from walk(p.parts, True)

    yield from walk(parse(tpl), False)


def is_peer(name: str) -> bool:
    """A field that names the other end of a connection."""
    return name.startswith(("peer", "remote"))


def is_missing(val: Any) -> bool:
    return val is None or val == "" or val == "?" or (isinstance(val, (list, tuple)) and not val)


#: (name, sub-field or None) -> the value (missing: see :func:`is_missing`)
Lookup = Callable[[str, "str | None"], Any]


def fill(tpl: str, lookup: Lookup, show: Callable[[Any, bool], str] | None = None) -> Filled:
    """``tpl`` with its clauses decided and its placeholders replaced (see the module doc).

    ``show(value, peer)`` writes a value; ``peer`` is true for a placeholder that names the
    other end of a connection (``peer``, ``peer_host``, ``remote_*``): an address there is
    worth naming by its host."""
    show = show or (lambda v, _peer: str(v))
    out = Filled("")
    #: whether the first character written came from a value (a host name keeps its case)
    first_is_value: list[bool] = []

    def emit(buf: list[str], text: str, is_value: bool) -> None:
        if text and not first_is_value and not any(buf_text for buf_text in buf):
            first_is_value.append(is_value)
        buf.append(text)

    def render(parts: tuple[Part, ...], strict: bool, buf: list[str]) -> bool:
        """Append the parts to ``buf``; False (and nothing appended) when ``strict`` and a
        slot directly in them has no value."""
        mark, marks = len(buf), len(first_is_value)
        for p in parts:
            if isinstance(p, str):
                emit(buf, p, False)
            elif isinstance(p, Slot):
                val = lookup(p.name, p.sub)
                if not is_missing(val):
                    text = _count(val) if p.count else None
                    emit(buf, text if text is not None else show(val, is_peer(p.name) or is_peer(p.sub or "")), True)
                elif p.default is not None:
                    emit(buf, p.default, False)
                elif strict:
                    del buf[mark:], first_is_value[marks:]
                    return False
                else:
                    out.missing.append(p.raw)
                    emit(buf, UNKNOWN, False)
            else:
                render(p.parts, True, buf)
        return True

    parts = parse(tpl)
    buf: list[str] = []
    render(parts, False, buf)
    text = "".join(buf)
    if parts and not isinstance(parts[0], str) and first_is_value == [False] and text[:1].islower():
        text = text[0].upper() + text[1:]  # the sentence lost its opening clause: it starts here now
    out.text = text
    return out


def _count(val: Any) -> str | None:
    """A ``{field:,}`` value that is a number: ``8,000``, ``20,000+`` for the floor ``20000+``; None
    for anything else (written as a placeholder without ``:,`` is)."""
    if type(val) is str and (m := _FLOOR.fullmatch(val)) is not None:
        return number(int(m.group(1))) + "+"
    return number(val) if type(val) in (int, float) else None
