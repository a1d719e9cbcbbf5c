"""NCCL INFO lines behind a launcher's or a log collector's prefix, on the plain lines' fast path.

``srun --label`` puts the task's number before every line (``12: node3:4242:4300 [2] NCCL INFO
Channel 00/24 : ...``), ``kubectl logs --timestamps`` an RFC 3339 time
(``2025-11-29T11:31:50.123456789Z node3:...``), torchrun ``[default3]:``, ``mpirun --tag-output``
``[1,3]<stdout>:``, NCCL itself its time with ``NCCL_DEBUG_TIMESTAMP_LEVELS=ALL`` (2.26+): on a
Slurm job run with ``--label`` every line of the ``slurm-N.out`` has one.  The fast path's plans
(:mod:`.fastpath`) are for plain lines, so each such line took the full way: the envelope, the
message grammar, an event (300,000 lines of an 8,000-rank job's init: 4.5 s plain, 26 s with
``srun --label``, 27 s with ``kubectl`` times).

What the full parser makes of such a line is what it makes of the plain line after the prefix,
with the prefix's launcher rank and time (and the whole line as the text), wherever
(:mod:`.envelope`) the wrappers peeled from the line's start end exactly where the plain line
starts, nothing is peeled from its end, no process-group tag is among them, and the line is not
one of the forms peeled apart otherwise (Open MPI tags after its start, Markdown links).  So the plain
line goes by its plan, on a sink (:class:`Dressed`) that gives every event the prefix's rank,
time and text, and tells the model the launcher rank of a connection line's or a counted line's
process (what ``JobModel._process`` does with the event the full way makes: ``launched``).

That the two ways agree is checked at the first line of each pair of shapes, the prefix's and
the plain line's (:func:`agrees`: the full parser's events of the whole line against the plain
line's, given the prefix's fields, on a scratch parser), as the fast path checks its own plans; a
pair where they differ, and a prefix the envelope peels otherwise, go the full way (or by a learned
plan of the whole line: ``FileParser._by_plan``).  ``tests/test_prefixed.py`` compares whole
reports and models with and without this path, in one process and split over two.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from .. import events as E
from ..events.base import share_int, shared_int_get
from ..util import bounded_put
from ..util.rxstore import rx
from .envelope import split_mpi, strip_wrappers, wrapper_at
from .grammar import DIGITS_MASK as _DIGITS

#: the path on (tests switch it off to compare)
ENABLED = True
#: prefix shapes read, and processes told their launcher rank per parser (a hostile log can make a
#: new one on every line): past it the table starts again
MAX_PREFIXES = 8192
#: (prefix, plain line) shapes checked (:func:`agrees`), per shape cache: with the bounds below at
#: most ~40 MB of keys for a hostile log of a new shape on every line (a real job's: hundreds)
MAX_SHAPES = 10_000
#: the longest line, and the longest prefix, taken this way (longer ones go the full way): NCCL
#: prints at most 1,024 bytes a line (``src/debug.cc``); the shapes are keys of the tables above
MAX_CHARS = 2048
MAX_PREFIX = 256
#: a plain NCCL INFO line's start, from its host on
PLAIN_INFO = rx(r"[\w.-]+:\d+:\d+ \[\d+\] NCCL INFO ")

#: a prefix's shape (its digits masked) -> where its launcher rank and its time sit in it (a
#: ``(start, end)`` each, or None where it has none), or None where peeling it does more
_SHAPES: dict[bytes, tuple[tuple[int, int] | None, tuple[int, int] | None] | None] = {}
_RUN = rx(r"\d+")
_UNREAD: Any = object()


def fields(line: str, k: int) -> tuple[int | None, str | None, bytes] | None:
    """The (launcher rank, time) the envelope reads from ``line[:k]`` (ASCII), the wrappers before
    the plain NCCL INFO line at ``k``, and the prefix's shape (its digits masked); None where
    peeling ``line`` does anything else (see the module doc).

    Read by the prefix's shape: the wrappers' patterns (``envelope._WRAP``) tell no digit from
    another (``\\d``, ``\\w`` and classes holding all ten), so prefixes of one shape are peeled
    alike, their rank and time from the same places (:func:`_places`: a kubectl time is new on every
    line).  Each alternative ends before ``k`` (a literal, a bracket or a space) and the plain
    line's host starts with no space, so the first passes peel the prefix alone; whether the next
    stops at ``k`` depends on the host too, and is asked of every line (one anchored match)."""
    if _peeled_at_end(line) or ("]<std" in line and split_mpi(line) != [line]):
        return None  # a link, or wrappers peeled off the end; records of several ranks glued by Open MPI
    prefix = line[:k]
    shape = prefix.encode().translate(_DIGITS)
    got = _SHAPES.get(shape, _UNREAD)
    if got is _UNREAD:
        got = _places(line, k)
        bounded_put(_SHAPES, MAX_PREFIXES, shape, got)
    if got is None or wrapper_at(line, k) is not None:
        return None
    r, t = got
    return (int(prefix[r[0]:r[1]]) if r else None), (prefix[t[0]:t[1]] if t else None), shape


@lru_cache(maxsize=64)
def run_behind(k: int) -> re.Pattern[str]:
    """A run of two or more connection lines of one process behind one prefix of ``k`` characters,
    the same on every line (``srun --label``'s ``12: ``, torchrun's ``[default3]:``; not a
    collector's time, new on each line): ``fastpath``'s run of plain lines with the prefix before
    each (a backreference).  Its groups: the prefix, then the plain run's."""
    return rx(f"([^\\n]{{{k}}})" + r"([^\s:]+:[0-9]+):([0-9]+) \[([0-9]+)\] NCCL INFO Channel [0-9][0-9]/([0-9]+) : "
              r"[0-9]+\[[^\n]*(?:\n\1\2:\3 \[\4\] NCCL INFO Channel [0-9][0-9]/\5 : [0-9]+\[[^\n]*)+", re.ASCII)


def plain_end(rest: str) -> bool:
    """Whether ``rest``, a line's text from its plain message on, holds nothing that makes the
    envelope peel the line otherwise than by its prefix (what :func:`fields` asks of a whole line):
    no Markdown link, no wrapper it peels off the end, no Open MPI tag (records of ranks glued)."""
    return not (_peeled_at_end(rest) or "]<std" in rest)


def _peeled_at_end(text: str) -> bool:
    """Whether the envelope peels something of a line with ``text`` in it from its end or its
    middle: a Markdown link, a backtick or a repeat count after the message."""
    return "](http" in text or text.endswith(("`", "across cluster]"))


def plain_at(line: str, at: int) -> int:
    """Where the plain NCCL INFO line of ``line`` starts behind a prefix (``at``: where its
    `` NCCL INFO `` is): after the space before its host (``12: ``) or right after the prefix
    (``[default3]:``); 0 where the prefix is not one this path takes (a line of other characters
    than ASCII or past :data:`MAX_CHARS`, a prefix past :data:`MAX_PREFIX`, no plain line after it)."""
    if len(line) > MAX_CHARS or not line.isascii():
        return 0
    dev = line.rfind(" ", 0, at)  # the space before ``[dev]``
    k = line.rfind(" ", 0, dev) + 1  # where the plain line's host starts: after a space (``12: ``) ...
    if k <= 0 or PLAIN_INFO.match(line, k) is None:
        k = host_start(line, dev)  # ... or right after the prefix (``[default3]:``)
        if k <= 0 or PLAIN_INFO.match(line, k) is None:
            return 0
    return k if k <= MAX_PREFIX else 0


def host_start(line: str, dev: int) -> int:
    """Where the ``host`` of ``host:pid:tid`` before ``line[dev:]`` (`` [dev] NCCL INFO ...``) starts:
    after the last character before it that no host name holds (``]:`` of torchrun's
    ``[default3]:``, Open MPI's ``<stdout>:``); -1 where there are no two colons before ``dev``."""
    pid = line.rfind(":", 0, line.rfind(":", 0, dev))
    if pid < 0:
        return -1
    i = pid
    while i > 0 and (line[i - 1].isalnum() or line[i - 1] in "_.-"):  # [\w.-], the line being ASCII
        i -= 1
    return i


def _places(line: str, k: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None] | None:
    """Where the envelope reads the launcher rank and the time in ``line[:k]`` (see :func:`fields`),
    or None where peeling ``line`` does more than take the prefix off, or where a value's place is
    not one: the rank's digits are the only run of its value, the time's text occurs once."""
    prefix, meta = line[:k], {}  # type: ignore[var-annotated]  # dict[str, object]
    pos, end = strip_wrappers(line, 0, len(line), meta)
    if pos != k or end != len(line) or "pg" in meta or prefix.lstrip().startswith("**"):
        return None
    rank, ts = meta.get("rank"), meta.get("ts")
    r: tuple[int, int] | None = None
    t: tuple[int, int] | None = None
    if isinstance(rank, int):
        runs = [m.span() for m in _RUN.finditer(prefix) if int(m.group()) == rank]
        if len(runs) > 1:  # a time's ``03`` as well as the task's ``3``: the run whose change moves it
            runs = [(a, b) for a, b in runs if _read_rank(line, a, b) == int(_turned(prefix[a:b]))]
        if len(runs) != 1:
            return None
        r = runs[0]
    if isinstance(ts, str):
        at = prefix.find(ts)
        if at < 0 or prefix.count(ts) != 1:
            return None
        t = (at, at + len(ts))
    return r, t


def _turned(digits: str) -> str:
    """``digits`` with each digit one more (9 -> 0): another value of the same shape."""
    return digits.translate(_NEXT)


_NEXT = str.maketrans("0123456789", "1234567890")


def _read_rank(line: str, a: int, b: int) -> object:
    """The launcher rank the envelope reads from ``line`` with the digits ``line[a:b]`` turned."""
    meta: dict[str, object] = {}
    strip_wrappers(f"{line[:a]}{_turned(line[a:b])}{line[b:]}", 0, len(line), meta)
    return meta.get("rank")


def dress(ev: E.Event, line: str, rank: int | None, ts: str | None) -> E.Event:
    """``ev``, the event of a plain line, as the event of that line behind a prefix that says
    ``rank`` and ``ts``: the whole line is its text (before the parser refers to it)."""
    ev._text = line  # type: ignore[attr-defined]  # the slot behind Event.text
    if rank is not None:
        ev.rank = shared_int_get(rank) or share_int(rank)  # as __init__ stores it
    if ts is not None:
        ev.ts = ts
    return ev


class Dressed:
    """A parser's sink for the plain line of a prefixed one (:meth:`at` each line): what reaches the
    model is what the full way would give it (events dressed, launcher ranks told).

    A process's launcher rank is told once (``told``, bounded: told again is nothing): the model
    keeps the first it is told (``JobModel.launched``), and a process it did not have then (past its
    bound) it never gets."""

    __slots__ = ("sink", "line", "rank", "ts", "told", "tree_channels", "placed_kinds", "needs_event",
                 "keeps_line", "placed", "bind")

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.line = ""
        self.rank: int | None = None
        self.ts: str | None = None
        self.told: set[str] = set()
        self.tree_channels = sink.tree_channels
        self.placed_kinds = sink.placed_kinds
        self.needs_event = sink.needs_event
        self.keeps_line = sink.keeps_line
        self.placed = sink.placed
        self.bind = sink.bind

    def at(self, line: str, rank: int | None, ts: str | None) -> Dressed:
        """This sink for the plain line of ``line``, whose prefix says ``rank`` and ``ts``."""
        self.line, self.rank, self.ts = line, rank, ts
        return self

    def _tell(self, hp: str) -> None:
        if self.rank is not None and hp not in self.told:
            if len(self.told) >= MAX_PREFIXES:  # a hostile log's new process on every line: told again
                self.told.clear()
            self.told.add(hp)
            host, _, pid = hp.rpartition(":")
            self.sink.launched(host, int(pid), self.rank)

    def add(self, ev: E.Event) -> None:
        self.sink.add(dress(ev, self.line, self.rank, self.ts))

    def touch(self, line: int, hp: str, kind: str) -> bool:
        if not self.sink.touch(line, hp, kind):
            return False
        self._tell(hp)
        return True

    def conn_seen(self, line: int, hp: str, rest: str) -> bool:
        if not self.sink.conn_seen(line, hp, rest):
            return False
        self._tell(hp)
        return True

    def add_conn_first(self, source: str, line: int, hp: str, rest: str, src: str, dst: str, via: str) -> None:
        self.sink.add_conn_first(source, line, hp, rest, src, dst, via)
        self._tell(hp)

    def conn_lines(self, source: str, first: int, hp: str, rests: list[str], cuts: dict[str, Any]) -> None:
        self.sink.conn_lines(source, first, hp, rests, cuts)
        self._tell(hp)

    def launched(self, host: str, pid: int, rank: int) -> None:  # the parser's sink has it (``lines.Sink``)
        self.sink.launched(host, pid, rank)

    def add_conn(self, source: str, line: int, host: str, pid: int, src: str, dst: str, via: str,
                 direction: str | None = None) -> str | None:
        got = self.sink.add_conn(source, line, host, pid, src, dst, via, direction)
        self._tell(f"{host}:{pid}")
        return got


#: the full parser of one line on a scratch parser (no sink: a connection line is an event
#: there), its events, or None where it moved the parser's state
Probe = Callable[[str], "list[E.Event] | None"]


def agrees(line: str, k: int, rank: int | None, ts: str | None, probe: Probe) -> bool:
    """Whether the full parser's events of ``line`` are those of its plain line ``line[k:]``
    dressed with the prefix's ``rank`` and ``ts``, neither moving the parser's state."""
    whole, plain = probe(line), probe(line[k:])
    if whole is None or plain is None or len(whole) != len(plain):
        return False
    for a, b in zip(whole, plain):
        b = dress(b, line, rank, ts)
        if type(a) is not type(b) or a.to_dict() != b.to_dict():
            return False
    return True
