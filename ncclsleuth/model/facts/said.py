"""What a rank's problem lines say about it, read from the knowledge base.

Whole-job reasoning sorts each rank's own lines into four kinds, by the meaning the
knowledge base gives the message (``knowledge/``), not by keywords:

* ``own``: a failure of the rank itself: a message whose role is ``cause`` (a launch
  configuration error, a CUDA error, a NCCL WARN that is a root cause), or a Python
  exception the knowledge base does not know (the application's own ``RuntimeError``);
* ``lost``: it lost a peer (``Connection closed by peer``, ``Connection reset by peer``,
  NCCL's ``remote process exited``): a symptom whose likely cause is ``peer_failure``;
* ``waited``: it waited for the others and gave up (watchdog and gloo timeouts, store
  waits, ``Please check rank 0 logs``): any other symptom;
* ``context``: lines that say that something failed but not what (return-code chains,
  the launcher's summary).
"""
from __future__ import annotations

from ... import events as E
from ... import knowledge
from ...util import bounded_put
from ...util.classes import dataclass
from ...util.rxstore import rx

#: kinds whose text never says anything about a rank of its own (the launcher's summary)
_IGNORED = frozenset({"agent_failure", "failure_field", "failure_block_head", "signal_exit"})
#: exceptions raised by the launcher about its children, not by a rank
_AGENT_EXC = rx(r"ChildFailedError|SignalException|torch\.distributed\.elastic\.")
#: a symptom whose likely cause is one of these is a rank waiting for the others; any other
#: likely cause (cuda_error, hardware_fault, cuda_oom, app_crash, ...) is the rank's own
WAITING = frozenset({"collective_timeout", "collective_desync", "straggler", "rendezvous_misconfig",
                     "network_blocked", "slow_init"})


@dataclass(frozen=True, slots=True)
class Said:
    """One line's verdict: which of the four kinds, and the knowledge base's reading."""

    what: str  # own | lost | waited | context
    categories: tuple[str, ...]
    kb_id: str | None

    @property
    def category(self) -> str | None:
        return self.categories[0] if self.categories else None


_CONTEXT = Said("context", (), None)
#: an exception the knowledge base does not know: the application's own
_UNKNOWN_EXC = Said("own", ("app_crash",), None)


def message_of(ev: E.Event) -> str:
    """The text a line's meaning is looked up with: the message without its envelope (a
    traceback by its exception line)."""
    if isinstance(ev, E.Traceback):
        return f"{ev.exc_type}: {ev.message}" if ev.message else ev.exc_type
    if isinstance(ev, E.WatchdogTimeout) and "WorkNCCL(" not in ev.text and ev.op:
        return _watchdog_text(ev)  # a message hard-wrapped over lines: its event holds the fields
    return strip_prefixes(ev.text)


def _watchdog_text(ev: E.WatchdogTimeout) -> str:
    """The watchdog message as ProcessGroupNCCL prints it (PGN-WD-TIMEOUT / PGN-WORK-3),
    rebuilt from the fields of a line whose WorkNCCL(...) was on the next lines."""
    kv = [f"SeqNum={ev.seq}" if ev.seq is not None else "", f"OpType={ev.op}",
          f"NumelIn={ev.numel_in}" if ev.numel_in is not None else "",
          f"NumelOut={ev.numel_out}" if ev.numel_out is not None else "",
          f"TensorShape={ev.shape}" if ev.shape else "",
          f"Timeout(ms)={ev.timeout_ms}" if ev.timeout_ms is not None else ""]
    ran = f" ran for {ev.ran_ms} milliseconds before timing out." if ev.ran_ms is not None else ""
    work = ", ".join(x for x in kv if x)
    return f"[Rank {ev.rank}] Watchdog caught collective operation timeout: WorkNCCL({work}){ran}"


#: bracketed wrappers at the start of a line: launcher ranks ``[rank0]:``, c10 glog headers
#: ``[E1201 10:42:52.644326315 ProcessGroupGloo.cpp:67]``, ``[Rank 0]:`` tags, srun ``3: `` labels
_PREFIXES = rx(r"(?:\s*(?:\[[^\]\n]{0,200}\]|\d{1,6}:(?= ))[: ]?)+")


def strip_prefixes(text: str) -> str:
    """A line without the bracketed prefixes launchers and loggers put before the message."""
    m = _PREFIXES.match(text)
    return text[m.end():].strip() if m else text.strip()


def said(ev: E.Event) -> Said:
    """What this line says about the rank that printed it."""
    if ev.kind in _IGNORED:
        return _CONTEXT
    if isinstance(ev, E.Traceback):
        if not ev.exc_type or _AGENT_EXC.search(ev.exc_type):
            return _CONTEXT
        return _lookup(message_of(ev), True)
    if isinstance(ev, E.MonitoredBarrier) and ev.what == "waited":
        return Said("waited", ("collective_timeout",), "GLOO-PG-mb-nonzero")
    text = ev.text  # once: a kept line's text is read back from its file (``Event.text``)
    if isinstance(ev, E.WatchdogTimeout) and "WorkNCCL(" not in text and ev.op:
        text = _watchdog_text(ev)
    return _lookup(text, False)


_CACHE: dict[tuple[str, bool], Said] = {}
#: meanings kept (a server answers many questions): past it the table starts again
MAX_CACHED = 20_000


def _lookup(text: str, exception: bool) -> Said:
    """Cached per message shape (:func:`shape`): a 16,384-rank job's 16,384 watchdog lines cost
    one lookup.  A meaning whose message the knowledge base reads numbers of (a context variant
    such as ``errno: 113`` or ``Error 80[34]``: :func:`ncclsleuth.knowledge.reads_digits`) is
    looked up for each line: the line's number decides it."""
    body = strip_prefixes(text)
    key = (shape(body), exception)
    hit = _CACHE.get(key)
    if hit is None:
        hit = _explain(text, exception)
        if hit.kb_id is None and body != text:  # the message without its prefix
            hit = _explain(body, exception)
        if hit.kb_id is None or not knowledge.reads_digits(hit.kb_id):
            bounded_put(_CACHE, MAX_CACHED, key, hit)
    return hit


def shape(body: str) -> str:
    """A message as the cache of meanings keys it: its numbers of three or more digits (ports, pids,
    sizes, times) as ``#``, but those a format or a context variant of the knowledge base holds
    (:func:`ncclsleuth.knowledge.numbers`: an Xid 119 is not an Xid 154, nor an ``Error 802`` an
    ``Error 804``); shorter numbers as they are (``SeqNum=1``, ``exitcode: -9``)."""
    parts = knowledge.NUMBER_RUN.split(body)
    if len(parts) == 1:
        return body
    named = knowledge.numbers()
    if named.isdisjoint(parts[1::2]):
        return "#".join(parts[0::2])
    return "".join(p if i % 2 == 0 or p in named else "#" for i, p in enumerate(parts))


def _explain(text: str, exception: bool) -> Said:
    hit = knowledge.explain(text)
    if hit is None or hit[1].id.startswith("PFX-"):  # a log prefix, not a message
        return _UNKNOWN_EXC if exception else _CONTEXT
    m = hit[1]
    if m.role == "cause":
        return Said("own", m.categories, m.id)
    if m.role == "symptom":
        first = m.categories[0] if m.categories else None
        if first == "peer_failure":
            return Said("lost", m.categories, m.id)
        if first is None or first in WAITING:
            return Said("waited", m.categories, m.id)
        # a wrapper whose likely cause is local ("watchdog thread terminated with exception:
        # CUDA error ..."): this rank's own failure, reported through its watchdog
        return Said("own", m.categories, m.id)
    if exception:  # an exception the knowledge base reads as context: still this rank's failure
        return Said("own", ("app_crash",), m.id)
    return _CONTEXT


def lines_of(m_events: list[E.Event | None]) -> list[tuple[E.Event, Said]]:
    """(line, verdict) of a member's noted lines, in the order given, without repeats."""
    out: list[tuple[E.Event, Said]] = []
    seen: set[tuple[str, int]] = set()
    for ev in m_events:
        if ev is None or (ev.source, ev.line) in seen:
            continue
        seen.add((ev.source, ev.line))
        out.append((ev, said(ev)))
    return out
