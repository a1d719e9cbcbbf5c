"""What each problem line means, from the knowledge base (``knowledge/``).

``known_message``: one record per problem line the knowledge base knows (an NCCL WARN by
its catalog id and printing file, a PyTorch / gloo / plugin / driver message by its
format, an NCCL WARN quoted by the layer above by the id of what it quotes), with the
meaning in this line's context: its role (cause, symptom, context, benign), category,
severity, subsystem, what it means, the fix, and the code it was read from.  The phase a
line belongs to decides some meanings (a refused connection during init is a blocked port;
after init, a dead peer): a process is in ``runtime`` once one of its communicators printed
Init COMPLETE on an earlier line of the same file.
"""
from __future__ import annotations

from collections.abc import Container
from typing import Any

from ... import knowledge
from ...events import Event
from ...util.rxstore import rx
from ..job import JobModel
from .base import LazyRecord, Record, fact

#: a global rank a message names: NCCL prints them "rank %d" ("Duplicate GPU detected : rank
#: 0 and rank 1", "at and around rank 39"); "local rank 3" and "rank[3]" are not matched
_NAMED_RANK = rx(r"(?<![\w-])(?<!local )(?<!Local )rank (\d{1,6})\b")


class KnownMessage(Record):
    """A problem line and its meaning: which message it is and what the code that printed it
    was doing."""

    id: str  # catalog id (NCCL-W-..., a PyTorch catalog id) or <SOURCE>-<slug>
    source: str  # nccl | torch | gloo | aws-ofi-nccl | rccl | nccl-tests | system
    subsystem: str
    role: str  # cause | symptom | context | benign | unknown
    category: str | None  # the root cause it establishes (a symptom's likely cause)
    categories: list[str]  # every likely cause of a symptom, most likely first
    severity: str  # error | warning | info
    meaning: str
    fix: str
    why: str  # the code condition that prints it
    ref: str  # file, function and release range it was read from
    function: str
    file: str  # the printing file as the WARN prefix names it ("" when the line has none)
    message: str  # the message text (after NCCL WARN)
    phase: str  # init | runtime | "" (unknown)
    kind: str  # the event kind the parser gave the line
    host: str | None
    rank: int | None
    ranks: list[int]  # the global ranks the message names ("rank 0 and rank 1", "around rank 39")
    pid: int | None


def _init_done(model: JobModel) -> dict[tuple[str, str | None, int | None], int]:
    """(file, host, pid) -> the first line where one of the process's communicators completed init."""
    out: dict[tuple[str, str | None, int | None], int] = {}
    for comm in model.comms.values():
        for rs in comm.ranks.values():
            at = rs.done_at()
            if at is not None:
                key, line = at[:3], at[3]
                if key not in out or line < out[key]:
                    out[key] = line  # type: ignore[index]  # (file, host, pid): a done line's file is known
    return out


def _init_started(model: JobModel) -> set[tuple[str | None, str | None, int | None]]:
    """(file, host, pid) of the processes that began a communicator's init: the rank states'
    Init lines and those no rank state keeps (``JobModel.init_aside``), not the ``comm_init``
    events (analyze keeps none: ``UNREAD_KINDS``; elsewhere 20,000, and an 8,000-rank job prints
    32,000 Init START/COMPLETE lines)."""
    out = set(model.init_aside)
    for comm in model.comms.values():
        for rs in comm.ranks.values():
            out.update(rs.init_wheres())  # without making their events
    return out


def _phase(ev: Event, done: dict[tuple[str, str | None, int | None], int],
           started: set[tuple[str | None, str | None, int | None]]) -> str | None:
    key = (ev.source, ev.host, ev.pid)
    line = done.get(key)
    if line is not None:
        return "runtime" if ev.line > line else "init"
    return "init" if key in started else None


@fact(KnownMessage, per_line=True)
def known_message(model: JobModel, skip: Container[tuple[str, int]] = frozenset()) -> list[KnownRecord]:
    """Problem lines with their meaning from the knowledge base, in line order (those in
    ``skip``, which findings already explain, left out: only fallback rules read this)."""
    events = model.error_events()
    if skip:  # the run's explained lines ask them all at once where they can (rules.ranking.Explained)
        bulk = getattr(skip, "unexplained", None)
        events = bulk(events) if bulk is not None else \
            [ev for ev in events if (ev.source, ev.line) not in skip]
    if not events:
        return []
    done = _init_done(model)
    started = _init_started(model)
    out: list[KnownRecord] = []
    for ev in events:
        phase = _phase(ev, done, started)
        # an NCCL WARN quoted by the layer above says more than the wrapper's words: its meaning
        # is reported, with the wrapper's line as the evidence
        hit = knowledge.explain_warn(ev.inner, phase) if ev.inner else None
        if hit is None:
            hit = knowledge.explain(ev.text, phase)
        if hit is None:
            continue
        known, m = hit
        out.append(KnownRecord(ev, known, m, phase or "", _named_ranks(known.message)))
    return out


def _named_ranks(message: str) -> list[int]:
    """The global ranks ``message`` names; the regex only where its literal is (most problem
    lines name none: a 16,384-rank job's ~50,000 watchdog and abort lines paid a scan each)."""
    return sorted({int(n) for n in _NAMED_RANK.findall(message)}) or _NO_RANKS if "rank " in message else _NO_RANKS


#: one list per distinct ``categories`` of the knowledge base (a bounded set), and one for
#: "names no rank": a 16,384-rank job's ~50,000 watchdog and abort lines each made two lists
#: that say the same (records are read, never changed)
_LISTS: dict[tuple[str, ...], list[str]] = {}
_NO_RANKS: list[int] = []


def _categories(values: tuple[str, ...]) -> list[str]:
    """The list of ``values`` shared by every record that has them."""
    got = _LISTS.get(values)
    if got is None:
        got = _LISTS[values] = list(values)
    return got


#: the fields of a record read from its meaning, and from its line's event
_OF_MEANING = frozenset({"id", "source", "subsystem", "role", "category", "severity", "meaning", "fix", "why", "ref",
                         "function"})
_OF_EVENT = frozenset({"kind", "host", "rank", "pid"})


class KnownRecord(LazyRecord):
    """One ``known_message`` record, the fields :class:`KnownMessage` declares read when asked
    from what the record is made of: the problem line's event, the message identified, its
    meaning (the knowledge base's, shared by every line of that meaning and context), the phase
    and the ranks the message names.  72 bytes, where a dict of the 21 fields was 464 and its
    evidence list 64 more: a record per problem line no finding explains (9,352 on the
    8,000-rank file of issue 16, ~1 a rank on 4,096 per-rank files) lives through the fallback
    rules."""

    __slots__ = ("ev", "known", "m", "phase", "ranks")
    _KEYS = ("id", "source", "subsystem", "role", "category", "categories", "severity", "meaning", "fix", "why",
             "ref", "function", "file", "message", "phase", "kind", "host", "rank", "ranks", "pid", "evidence")

    def __init__(self, ev: Event, known: knowledge.Known, m: knowledge.Meaning, phase: str, ranks: list[int]) -> None:
        self.ev, self.known, self.m, self.phase, self.ranks = ev, known, m, phase, ranks

    def __getitem__(self, key: str) -> Any:
        if key in _OF_MEANING:
            return getattr(self.m, key)
        if key in _OF_EVENT:
            return getattr(self.ev, key)
        if key == "message":
            return self.known.message
        if key == "file":
            return self.known.file or ""
        if key == "phase":
            return self.phase
        if key == "ranks":
            return self.ranks
        if key == "categories":
            return _categories(self.m.categories)
        if key == "evidence":
            return [self.ev]
        raise KeyError(key)
