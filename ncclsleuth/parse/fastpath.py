"""Plain NCCL INFO lines by shape, for analyze: each shape is decided once, then only that is done.

An INFO log of a big job is mostly the same few dozen messages printed by every rank
and channel.  For a plain ``host:pid:tid [dev] NCCL INFO message`` line, the
position-exact shape (:func:`~ncclsleuth.parse.grammar.fixed_key`: every character
in place, digits masked) decides everything the line can mean: the grammar rule, the
event kind, where each value sits.  So the first lines of a shape go through the
full parser, and the shape is then given a *plan*, what the job model needs of its
lines (:meth:`~ncclsleuth.model.job.JobModel.needs_event`):

* ``CONN``: a per-connection line (``Channel 03/24 : 5[5] -> 6[6] via P2P/IPC``), the
  most numerous line of an INFO log: counted by its text from the source rank on,
  per process and communicator, and folded into hop counts at the end of the file;
* ``TOUCH``: a kind nothing reads one by one (no handler, not kept, not a problem):
  its process's last line and the kind's count;
* ``SLOW``: everything else (an event the model reads, a shape with pointers, a line
  the templates do not cover): the full parser, every time.

No event, field dict or template fill is made for ``CONN`` and ``TOUCH`` lines.  The
plans depend on what the model keeps (the run's rules), so a plan table belongs to a
shape cache *and* a drop set (:func:`plans_for`).  A plan is made once the shape's
fill template exists (after a few lines, as for the templates), and only from what the
full parser did with the line it just parsed, so the result is the same as without plans
(tests: ``tests/test_fastpath.py``, the whole analyze with and without them).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .grammar import STATEFUL_RULES, ShapeCache, fixed_key

if TYPE_CHECKING:
    from .. import events as E


class Sink(Protocol):
    """What the plans do instead of making events (``JobModel`` documents each); the
    parser's sink (:class:`ncclsleuth.parse.lines.Sink`) has these too."""

    def needs_event(self, kind: str) -> bool: ...

    def touch(self, line: int, hp: str, kind: str) -> bool: ...

    def bind(self, source: str, line: int, hp: str) -> None: ...

    def conn_seen(self, line: int, hp: str, rest: str) -> bool: ...

    def add_conn_first(self, source: str, line: int, hp: str, rest: str, src: str, dst: str, via: str) -> None: ...

CONN, TOUCH, SLOW = 1, 2, 3
#: what :func:`fast_line` says besides ``SLOW``: the line is done, or its shape has no plan yet
DONE, NONE = 0, 4
_SLOW = (SLOW,)
#: the fast path on (tests switch it off to compare)
ENABLED = True
#: shapes given a plan per table (a log with a pointer in every line makes a new shape per line)
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
    fkey = fixed_key(line)
    hit = cache.fixed_templates.get(fkey)
    if hit is None:
        return
    plans[fkey] = _decide(hit, sink, line, events)


def _decide(hit: tuple[str, Any, dict[str, Any]], sink: Sink, line: str, events: list[E.Event]) -> tuple[Any, ...]:
    """CONN, TOUCH or SLOW for a shape (see the module doc)."""
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
    if len(events) != 1:
        return _SLOW
    ev = events[0]
    # nccl_other: its event is the envelope path's; a rank, a time or a problem do more than touch
    if (ev.kind == "nccl_other" or sink.needs_event(ev.kind) or ev.rank is not None or ev.ts
            or ev.is_problem or ev.pid is None or line[:hp_end] != f"{ev.host}:{ev.pid}"):
        return _SLOW
    return (TOUCH, hp_end, ev.kind)


def fast_line(plans: dict[bytes, tuple[Any, ...]], sink: Sink, source: str, n: int, line: str) -> int:
    """Do what the plan of ``line``'s shape says: ``DONE``; else the full parser's turn,
    ``SLOW`` (its plan) or ``NONE`` (no plan yet: :func:`learn` from what the parser made)."""
    plan = plans.get(fixed_key(line)) if line.isascii() else _SLOW
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
    return SLOW
