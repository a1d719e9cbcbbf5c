"""Plain NCCL INFO lines by shape, for analyze: each shape is decided once, then only that is done.

An INFO log of a big job is mostly the same few dozen messages printed by every rank
and channel.  For a plain ``host:pid:tid [dev] NCCL INFO message`` line, the
position-exact shape (:func:`~ncclsleuth.parse.grammar.info_key`: every character
in place, digits and hex runs masked) decides everything the line can mean: the grammar rule, the
event kind, where each value sits.  So the first lines of a shape go through the
full parser, and the shape is then given a *plan*, what the job model needs of its
lines (:meth:`~ncclsleuth.model.job.JobModel.needs_event`):

* ``CONN``: a per-connection line (``Channel 03/24 : 5[5] -> 6[6] via P2P/IPC``), the
  most numerous line of an INFO log: counted by its text from the source rank on,
  per process and communicator, and folded into hop counts at the end of the file;
* ``TOUCH``: a kind nothing reads one by one (no handler, not kept, not a problem):
  its process's last line and the kind's count;
* ``OTHER``: a message the grammar does not know (``threadThresholds 8/8/64 | ...``,
  ``cudaDriverVersion 12040``: each rank prints a dozen): its ``nccl_other`` event cut from
  the line by position, without the envelope, the grammar and the anchors it found nothing in;
* ``EVENT``: an event the model reads, of a shape with a template: the event made from the
  template at once (what the full parser does first with such a line), the full parser only
  where the template's fields make no event of their own;
* ``MADE``: an ``EVENT`` shape whose event, at its ``learned.maker_at``-th line, was found to be each
  field a constant or one slice of the line (:func:`.learned.derive`, the template as the probe,
  checked on changed digits and on the shape's first line): the event made from the slices,
  without the template's field dict, the builder's fixes and conversions (the parse of 1,000
  ranks in one file: 11% fewer instructions); a shape where no such maker fits stays ``EVENT``;
* ``TREES``: a ``Trees [0] a/b/c->me->up [1] ...`` line (one a rank per communicator, ~1,000
  characters): its event cut from the line by position, and only the channels the model keeps
  (``Sink.tree_channels``) split (:func:`trees_event`); the template split every pair of the line
  first, 32 against 6 us a line.  Any other order of channels, or a pair that does not split, goes
  the ``EVENT`` way;
* ``SLOW``: everything else (a line the templates do not cover, a
  message whose meaning spans lines): the full parser, every time.

Two or more consecutive ``CONN`` lines of one process and thread (each rank prints its
connections one peer after another, every channel alike) are taken as one run
(:func:`conn_run`): one regex finds the run, one ``findall`` its texts from the source rank on,
each distinct text's shape is checked once, and the model counts the run's lines together
(``JobModel.conn_lines``, the same as each line's ``conn_seen``/``add_conn_first`` in order).

No event, field dict or template fill is made for ``CONN`` and ``TOUCH`` lines.  The
plans depend on what the model keeps (the run's rules), so a plan table belongs to a
shape cache *and* a drop set (:func:`plans_for`).  A plan is made once the shape's
fill template exists (after a few lines, as for the templates), and only from what the
full parser did with the line it just parsed, so the result is the same as without plans
(tests: ``tests/test_fastpath.py``, the whole analyze with and without them).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from .. import events as E
from ..util.rxstore import rx
from . import learned
from .anchors import DIGIT_ANCHOR_WORDS, GUARDED_ANCHORS, anchor_starts
from .build import tree_edges
from .grammar import DIGITS_MASK, SIMPLE_NCCL_LINE, STATEFUL_RULES, ShapeCache, info_key


class Sink(Protocol):
    """What the plans do instead of making events (``JobModel`` documents each); the
    parser's sink (:class:`ncclsleuth.parse.lines.Sink`) has these too."""

    def needs_event(self, kind: str) -> bool: ...

    def keeps_line(self, kind: str, text: str) -> bool: ...

    def touch(self, line: int, hp: str, kind: str) -> bool: ...

    def bind(self, source: str, line: int, hp: str) -> None: ...

    def conn_seen(self, line: int, hp: str, rest: str) -> bool: ...

    def add_conn_first(self, source: str, line: int, hp: str, rest: str, src: str, dst: str, via: str) -> None: ...

    def add(self, ev: E.Event) -> None: ...

    def conn_lines(self, source: str, first: int, hp: str, rests: list[str], cuts: dict[str, Cut]) -> None: ...

    @property
    def tree_channels(self) -> int: ...

#: where a connection line's source, destination and transport sit in its text from the source on
Cut = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
CONN, TOUCH, SLOW, OTHER, EVENT, MADE, TREES = 1, 2, 3, 5, 6, 7, 8
#: what :func:`fast_line` says besides ``SLOW``: the line is done, or its shape has no plan yet
DONE, NONE = 0, 4
_SLOW = (SLOW,)
#: the fast path on (tests switch it off to compare)
ENABLED = True
#: runs of connection lines handed over at once (:func:`conn_run`; tests switch it off to compare)
RUNS = True
#: shapes given a plan per table (a hostile log can make a new shape per line)
MAX_PLANS = 100_000



def plans_for(cache: ShapeCache, drop: frozenset[str]) -> dict[bytes, tuple[Any, ...]]:
    """The plan table of a shape cache for a sink's drop set (shared by every file parsed with them)."""
    table = cache.plan_tables.get(drop)
    if table is None:
        table = cache.plan_tables[drop] = {}
    return table


def learn(plans: dict[bytes, tuple[Any, ...]], cache: ShapeCache, sink: Sink, line: str,
          events: list[E.Event]) -> None:
    """Give ``line``'s shape a plan from what the full parser just made of it (``events``),
    once the shape's fill template exists; nothing while it does not.  Only for a line
    :func:`fast_line` found no plan for (``NONE``)."""
    if len(plans) >= MAX_PLANS or not line.isascii():
        return
    fkey = info_key(line)
    hit = cache.fixed_templates.get(fkey)
    if hit is None:  # no template: a message the grammar does not know, or one seen once so far
        plan = _other_plan(line, events, fkey, sink)
        if plan is not None:
            plans[fkey] = plan
        return
    plans[fkey] = _decide(hit, sink, line, events)


def _other_plan(line: str, events: list[E.Event], key: bytes | None = None,
                sink: Sink | None = None) -> tuple[Any, ...] | None:
    """The ``OTHER`` plan of a plain INFO line whose only event is the ``nccl_other`` the
    envelope path made of its whole body, or None.  The same for every line of the shape:
    no grammar rule takes the body (the shape cache remembers a None by shape), no anchor
    starts in it, and none could with other digits (``DIGIT_ANCHOR_WORDS``, the guards);
    checked by making the plan's event of this line and comparing it with the parser's.  ``key``:
    the line's ``info_key`` where the caller has it.  ``TOUCH`` instead where ``sink`` neither
    reads nor keeps the event (``Sink.keeps_line``: a test of words, which every line of the
    shape has in the same places)."""
    if len(events) != 1 or type(events[0]) is not E.NcclOther or "\r" in line or "\x1b" in line \
            or b"\x80" in (key or info_key(line)):  # hex letters may spell an anchor's word: only digits vary
        return None
    m = SIMPLE_NCCL_LINE.fullmatch(line)
    if m is None:
        return None
    body = m.group(5)
    if anchor_starts(body) or any(w in body for w in DIGIT_ANCHOR_WORDS) \
            or any(lit in body for lit, _ in GUARDED_ANCHORS):
        return None
    plan = (OTHER, m.end(1), m.end(2), m.end(3), m.start(4), m.end(4), m.start(5))
    ev = events[0]
    mine = _other_event(plan, ev.source, ev.line, line)
    if ev.is_problem or mine.to_dict() != ev.to_dict():
        return None
    if sink is not None and not sink.keeps_line(ev.kind, line) and line[:plan[2]] == f"{ev.host}:{ev.pid}":
        return (TOUCH, plan[2], ev.kind)
    return plan


def _other_event(plan: tuple[Any, ...], source: str, n: int, line: str) -> E.NcclOther:
    """The ``nccl_other`` event of a line of an ``OTHER`` shape, cut at the plan's positions."""
    _, h, p, t, d0, d1, b = plan
    return E.NcclOther(source=source, line=n, text=line, host=line[:h], pid=int(line[h + 1:p]),
                       tid=int(line[p + 1:t]), dev=int(line[d0:d1]), level="INFO", message=line[b:])


def _decide(hit: tuple[str, Any, dict[str, Any]], sink: Sink, line: str, events: list[E.Event]) -> tuple[Any, ...]:
    """CONN, TOUCH, EVENT or SLOW for a shape (see the module doc)."""
    rule, _fill, spans = hit
    if rule in STATEFUL_RULES or rule.startswith("ws_"):
        return _SLOW
    hp_end = spans["_pid"][1]
    if rule == "channel_conn":
        if events:  # folded by ``add_conn`` without an event, or not plain: leave it to the parser
            return _SLOW
        src, dst, via = spans["src"], spans["dst"], spans["via"]
        start = src[0]
        return (CONN, hp_end, start, (src[0] - start, src[1] - start), (dst[0] - start, dst[1] - start),
                (via[0] - start, via[1] - start))
    # the parser's first step for any line of the shape is its template: a redraw or a colour
    # code would have had the line split first (``FileParser._line``)
    event = (EVENT, rule, hit[1], [0, line, learned.maker_at(line)] if learned.plannable(line) else None) \
        if "\r" not in line and "\x1b" not in line else _SLOW
    if rule == "trees" and event is not _SLOW:
        return _trees_plan(line, events, sink, event)
    if len(events) != 1:
        return event
    ev = events[0]
    # nccl_other: its event is the envelope path's; a rank, a time or a problem do more than touch
    if (ev.kind == "nccl_other" or sink.needs_event(ev.kind) or ev.rank is not None or ev.ts
            or ev.is_problem or ev.pid is None or line[:hp_end] != f"{ev.host}:{ev.pid}"):
        return event
    return (TOUCH, hp_end, ev.kind)


def _trees_plan(line: str, events: list[E.Event], sink: Sink, event: tuple[Any, ...]) -> tuple[Any, ...]:
    """The ``TREES`` plan of a ``Trees`` line's shape (its ``EVENT`` plan where the line is not
    plain, or :func:`trees_event` does not make the parser's event of it)."""
    m = SIMPLE_NCCL_LINE.fullmatch(line)
    if m is None or len(events) != 1 or type(events[0]) is not E.Trees or not m.group(5).startswith("Trees "):
        return event
    plan = (TREES, m.end(1), m.end(2), m.end(3), m.start(4), m.end(4), m.start(5) + 6, event)
    ev = events[0]
    mine = trees_event(plan, ev.source, ev.line, line, sink.tree_channels)
    return plan if mine is not None and mine.to_dict() == ev.to_dict() else event


#: ``[0] [1] ...``: the channel tokens of a ``Trees`` line printed in order
IN_ORDER = [f"[{i}]" for i in range(128)]


def trees_event(plan: tuple[Any, ...], source: str, n: int, line: str, keep: int) -> E.Trees | None:
    """The event of a line of a ``TREES`` shape with the edges of its first ``keep`` channels, or
    None where its channels are not ``[0] spec [1] spec ...`` in order (the ``EVENT`` way then).

    NCCL prints the channels in order (``src/init.cc``, 2.4-2.30: ``for (int c=0;
    c<comm->nChannels; c++)``), so the kept ones are the text up to ``[keep]``."""
    _, h, p, t, d0, d1, b, _event = plan
    cut = line.find(f" [{keep}] ", b)
    tokens = (line[b:] if cut < 0 else line[b:cut]).split()
    if len(tokens) % 2 or tokens[0::2] != IN_ORDER[:len(tokens) // 2] or (cut >= 0 and len(tokens) != 2 * keep):
        return None
    try:
        edges = tree_edges(tokens)
    except ValueError:
        return None
    return E.Trees(source=source, line=n, text=line, host=line[:h], pid=int(line[h + 1:p]),
                   tid=int(line[p + 1:t]), dev=int(line[d0:d1]), level="INFO", edges=edges)


#: a run of two or more connection lines of one process and thread: the same ``host:pid:tid [dev]``
#: and channel count on each (backreferences), so the text before each line's source rank is
#: the same shape on every line, and each line's shape is that of its text from the source on.
#: Each line's text after `` : `` starts as a connection's source does (``5[5]``: the grammar's
#: PEERDEV): a rank 0's ring dump (``Channel 03/24 : 0 1 2 3 ...``, one a channel, same prefix)
#: is no run.  Before, such a dump matched as a run, failed its plan check, and was matched
#: again from each of its lines: 6,848 failed runs in a quarter of an 8,000-rank file
_CONN_RUN = rx(r"([^\s:]+:[0-9]+):([0-9]+) \[([0-9]+)\] NCCL INFO Channel [0-9][0-9]/([0-9]+) : [0-9]+\[[^\n]*"
                       r"(?:\n\1:\2 \[\3\] NCCL INFO Channel [0-9][0-9]/\4 : [0-9]+\[[^\n]*)+", re.ASCII)
_REST = rx(r" NCCL INFO Channel [0-9][0-9]/[0-9]+ : ([^\n]*)", re.ASCII)


def conn_run(plans: dict[bytes, tuple[Any, ...]], sink: Sink, source: str, n: int, text: str, at: int) -> int:
    """The lines from ``at`` (line ``n``, a plain INFO line) that are a run of one process's
    connection lines of ``CONN`` shapes, handed to the sink at once (``Sink.conn_lines``: what
    :func:`fast_line` does to each, in order); the text position past the run, or -1 where the
    line starts no such run (then it goes by :func:`fast_line`).

    Each distinct text from the source rank on (a peer and transport, the same on every channel:
    ~24 lines) is checked once: its line's shape must have the ``CONN`` plan, cutting where this
    line's text does; any other makes the run go line by line."""
    m = _CONN_RUN.match(text, at)
    if m is None:
        return -1
    end = m.end()
    got = run_cuts(plans, text, at, end, 0, m.end(1) - at)
    if got is None:
        return -1
    sink.conn_lines(source, n, text[at:m.end(1)], got[0], got[1])
    return end


def run_cuts(plans: dict[bytes, tuple[Any, ...]], text: str, at: int, end: int, k: int, hp_end: int,
             ok: Callable[[str, bytes], bool] | None = None) -> tuple[list[str], dict[str, Cut]] | None:
    """Of a run of connection lines from ``at`` to ``end`` (one process's, each line's plain NCCL
    INFO line ``k`` characters in, the same text before each: a launcher's prefix or none), each
    line's text from its source rank on and where the fields of each distinct one sit (its plain
    line's ``CONN`` plan, which must cut the ``host:pid`` at ``hp_end``); None where a line is not
    one (a second such text in it, another plan, or a text and its plain shape ``ok`` refuses)."""
    rests = _REST.findall(text, at, end)
    if len(rests) != text.count("\n", at, end) + 1:  # a line with a second such text in it
        return None
    start = at + k
    head = text.find(" : ", start, end) + 3 - start  # the text before the first plain line's source rank
    prefix = text[start:start + head]
    cuts: dict[str, Cut] = {}
    for rest in dict.fromkeys(rests):
        line = prefix + rest
        key = info_key(line) if line.isascii() else None
        plan = plans.get(key) if key is not None else None
        if plan is None or plan[0] != CONN or plan[1] != hp_end or plan[2] != head:
            return None
        if ok is not None and not ok(rest, key):  # type: ignore[arg-type]  # a plan: an ASCII line's key
            return None
        cuts[rest] = (plan[3], plan[4], plan[5])
    return rests, cuts


def fast_line(plans: dict[bytes, tuple[Any, ...]], sink: Sink, source: str, n: int, line: str,
              make: Callable[[int, str, tuple[Any, ...]], bool]) -> int:
    """Do what the plan of ``line``'s shape says: ``DONE``; else the full parser's turn,
    ``SLOW`` (its plan, or an ``EVENT`` line whose template did not make its event) or ``NONE``
    (no plan yet: :func:`learn` from what the parser made).  ``make(n, line, plan)``: the
    parser's event of a line of an ``EVENT`` or ``MADE`` plan, handed to the sink (False: none,
    the line goes the full way, as it would have after its template)."""
    if not line.isascii():
        return SLOW
    plan = plans.get(line.encode().translate(DIGITS_MASK) if "0x" not in line else info_key(line))  # info_key, inline
    if plan is None:
        return NONE
    what = plan[0]
    if what == CONN:
        hp, rest = line[:plan[1]], line[plan[2]:]
        if not sink.conn_seen(n, hp, rest):
            (a, b), (c, d), (e, f) = plan[3], plan[4], plan[5]
            sink.add_conn_first(source, n, hp, rest, rest[a:b], rest[c:d], rest[e:f])
        return DONE
    if what == TOUCH:
        hp = line[:plan[1]]
        if not sink.touch(n, hp, plan[2]):
            sink.bind(source, n, hp)
            sink.touch(n, hp, plan[2])
        return DONE
    if what >= EVENT:
        return DONE if make(n, line, plan) else SLOW
    if what == OTHER:
        sink.add(_other_event(plan, source, n, line))
        return DONE
    return SLOW
