"""Whole-job reasoning: the one rank that broke the job, and the ranks that only reported it.

When one rank of a job fails, every other rank reports *something*: a watchdog or gloo
timeout, ``Connection closed by peer``, a store wait.  Those are messengers.  These facts
find the rank they are about, from the job's members (:mod:`..members`: each rank's last
line, last progress line, first problem line and its time, traceback, collective counters
and how the elastic agent says it ended) and what each line means in the knowledge base
(:mod:`.said`):

* ``rank_named``: PyTorch or gloo names it (``Rank 3 failed to pass monitoredBarrier``);
* ``odd_one_out``: the ranks disagree on a value at the same point (the collective and its
  size at one SeqNum, the code line where each traceback stopped, the DETAIL fingerprints,
  the size gloo received): the minority is named, with one line of each group;
* ``first_failure``: a rank failed on its own (an exception, a cause-role message) while the
  others only lost it or waited; with timestamps, the earliest such failure;
* ``quiet_rank``: reasoning from absence: the member that does not report what the others
  report: killed by a signal, exited while the others wait, went silent one step before
  them, or busy alone past their timeout.

Each record's evidence is the culprit's line first, then the messengers' lines (all of
them: the finding accounts for them, and the symptom findings link to it).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ... import events as E
from ...util.classes import dataclass
from ...util.clock import earlier
from ...util.rxstore import rx
from ..job import JobModel
from ..members import Exit, Member, members
from .base import TEXT_MOST, Record, fact, ranges
from .said import Said, lines_of, said, strip_prefixes

#: at most this share of the ranks may be "the odd ones" (a minority), and at most this many
MINORITY_SHARE = 0.34
MINORITY_MAX = 8


# --------------------------------------------------------------------------- what each rank reported


@dataclass(slots=True)  # one per rank: no dict each
class Report:
    """What one member reported: the first of its lines of each kind, with its verdict (the
    other lines are not kept: at 16,384 ranks a list and its pairs each were ~0.2 KiB a rank)."""

    m: Member
    own: tuple[E.Event, Said] | None = None
    lost: tuple[E.Event, Said] | None = None
    waited: tuple[E.Event, Said] | None = None

    @property
    def reports(self) -> bool:
        """It reported the failure (lost a peer or gave up waiting)."""
        return self.lost is not None or self.waited is not None

    @property
    def quiet(self) -> bool:
        return self.own is None and self.lost is None and self.waited is None


def picture(model: JobModel) -> list[Report]:
    """Every member's report (memoised on the model)."""
    ms = members(model)
    hit = model.memo.get("picture")
    if hit is not None and hit[0] == id(ms):
        return hit[1]  # type: ignore[return-value]
    out: list[Report] = []
    for m in ms:
        r = Report(m)
        for ev, s in lines_of([m.traceback, m.first_problem, m.watchdog, m.mismatch, m.last_problem]):
            if s.what == "own" and r.own is None:
                r.own = (ev, s)
            elif s.what == "lost" and r.lost is None:
                r.lost = (ev, s)
            elif s.what == "waited" and r.waited is None:
                r.waited = (ev, s)
        out.append(r)
    model.memo["picture"] = (id(ms), out)
    return out


def _ranked(reps: Iterable[Report]) -> list[Report]:
    return [r for r in reps if r.m.rank is not None and not r.m.shared]


def _messengers(reps: Iterable[Report], exclude: Member | None = None) -> list[E.Event]:
    """The reporters' lines (lost and waited), culprit excluded."""
    out: list[E.Event] = []
    for r in reps:
        if r.m is exclude:
            continue
        for pair in (r.lost, r.waited):
            if pair is not None:
                out.append(pair[0])
    return out


def _host(m: Member) -> str:
    return m.host or "?"


def _minority_ok(n_odd: int, n_total: int) -> bool:
    return 1 <= n_odd <= MINORITY_MAX and n_odd <= max(1, MINORITY_SHARE * n_total)


# --------------------------------------------------------------------------- rank_named


class RankNamed(Record):
    rank: int
    ranks: list[int]
    who: str  # "rank 3" / "ranks 1, 3"
    host: str
    said_by: int | str  # the rank whose line names it
    message: str
    timeout_ms: int | str
    pointers: int  # ranks whose own lines point at the namer's log
    category: str


@fact(RankNamed)
def rank_named(model: JobModel) -> list[RankNamed]:
    """Ranks PyTorch or gloo names as the culprit: monitoredBarrier's ``Rank N failed to pass
    monitoredBarrier in T ms`` / ``Ranks N, M ...`` / ``Rank N timed out in monitoredBarrier``
    (rank 0 enforces the barrier and names who did not arrive); the other ranks' ``Please
    check rank 0 logs for faulty rank`` lines point at rank 0's log, not at a culprit."""
    named = [ev for ev in model.events.get("monitored_barrier", ()) if isinstance(ev, E.MonitoredBarrier)
             and ev.what in ("failed", "timeout") and ev.ranks]
    if not named:
        return []
    ms = members(model)
    pointers = [ev for ev in model.events.get("monitored_barrier", ())
                if isinstance(ev, E.MonitoredBarrier) and ev.what == "waited"]
    out: list[RankNamed] = []
    seen: set[tuple[int, ...]] = set()
    for ev in named:
        if ev.ranks in seen:
            continue
        seen.add(ev.ranks)
        first = ev.ranks[0]
        m = ms.by_rank.get(first)
        s = said(ev)
        lead: list[E.Event] = [ev]
        if m is not None and (last := m.last_line()) is not None:
            lead.append(last)  # where the named rank's output stops
        out.append({"rank": first, "ranks": list(ev.ranks), "who": _who(list(ev.ranks)),
                    "host": _host(m) if m else "?", "said_by": ev.rank if ev.rank is not None else "?",
                    "message": s.kb_id or "", "timeout_ms": ev.timeout_ms if ev.timeout_ms is not None else "?",
                    "pointers": len({p.rank for p in pointers}),
                    "category": s.category or "collective_timeout",
                    "evidence": lead + _unique([p for p in pointers] + _messengers(picture(model), m))})
    return out


def _who(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranges(ranks, most=TEXT_MOST)}"


def _unique(evs: list[E.Event]) -> list[E.Event]:
    seen: set[tuple[str, int]] = set()
    out: list[E.Event] = []
    for ev in evs:
        k = (ev.source, ev.line)
        if k not in seen:
            seen.add(k)
            out.append(ev)
    return out


# --------------------------------------------------------------------------- odd_one_out


class OddOneOut(Record):
    how: str  # collective | code_line | fingerprint | gloo_size
    point: str  # where the ranks were compared
    rank: int
    ranks: list[int]
    who: str
    host: str
    value: str  # the minority's value
    majority: str  # the others' value
    n_odd: int
    n_rest: int
    category: str


@fact(OddOneOut)
def odd_one_out(model: JobModel) -> list[OddOneOut]:
    """Ranks that disagree with the others at the same point, grouped by value; the minority
    is named, with one line of each group as evidence.

    Compared: the collective each rank's watchdog timed out in at one SeqNum (op, element
    counts, shape); the code line where each rank's traceback stopped in a collective; the
    collective fingerprints of TORCH_DISTRIBUTED_DEBUG=DETAIL (each message gives two
    ranks' fingerprints); and gloo's size check, which aborts the rank that *received* too
    much: in gloo's ring allreduce rank ``a`` receives from ``a + 1``
    (``gloo/allreduce.cc``: ``recvRank = (rank + 1) % size``), so either ``a`` holds the
    smaller tensor or ``a + 1`` the bigger one; the one whose traceback stops at another code
    line than the ranks outside the pair is the culprit.
    """
    reps = _ranked(picture(model))
    if len(reps) < 2:
        return []
    out: list[OddOneOut] = []
    out.extend(_by_watchdog(reps))
    out.extend(_by_fingerprint(reps))
    sized = _by_gloo_size(model, reps)
    out.extend(sized)
    if not sized:
        out.extend(_by_code_line(reps))
    return out


def _groups(items: list[tuple[str, Report, E.Event]], how: str, point: str, n_total: int,
            category: str = "collective_desync") -> list[OddOneOut]:
    """The minority groups of (value, report, line) items, when one value clearly wins."""
    by: dict[str, list[tuple[Report, E.Event]]] = {}
    for value, r, ev in items:
        by.setdefault(value, []).append((r, ev))
    if len(by) < 2:
        return []
    order = sorted(by.items(), key=lambda kv: -len(kv[1]))
    (major, mlist), second = order[0], order[1]
    if len(mlist) <= len(second[1]) or len(mlist) < 2:
        return []
    odd = [(v, lst) for v, lst in order[1:]]
    n_odd = sum(len(lst) for _, lst in odd)
    if not _minority_ok(n_odd, n_total):
        return []
    out: list[OddOneOut] = []
    for value, lst in odd:
        ranks = sorted(r.m.rank for r, _ in lst if r.m.rank is not None)
        lead = lst[0][0].m
        out.append({"how": how, "point": point, "rank": ranks[0], "ranks": ranks, "who": _who(ranks),
                    "host": _host(lead), "value": value, "majority": major, "n_odd": len(ranks),
                    "n_rest": len(mlist), "category": category,
                    "evidence": [ev for _, ev in lst] + [mlist[0][1]] + [ev for _, ev in mlist[1:]]})
    return out


def _wd_value(ev: E.WatchdogTimeout) -> str:
    parts = [ev.op or "?"]
    if ev.numel_in is not None or ev.numel_out is not None:
        parts.append(f"NumelIn={ev.numel_in} NumelOut={ev.numel_out}")
    if ev.shape:
        parts.append(f"TensorShape={ev.shape}")
    return " ".join(parts)


def _by_watchdog(reps: list[Report]) -> list[OddOneOut]:
    at: dict[tuple[str, int], list[tuple[str, Report, E.Event]]] = {}
    for r in reps:
        wd = r.m.watchdog
        if wd is not None and wd.seq is not None and wd.op:
            at.setdefault((wd.pg or "0", wd.seq), []).append((_wd_value(wd), r, wd))
    out: list[OddOneOut] = []
    for (pg, seq), items in at.items():
        out.extend(_groups(items, "collective", f"the collective at SeqNum {seq} of process group {pg}",
                           len(items)))
    return out


def _tb_value(tb: E.Traceback) -> str:
    return f"{tb.call} at {tb.user_frame}" if tb.user_frame else str(tb.call)


def _by_code_line(reps: list[Report]) -> list[OddOneOut]:
    items = [(_tb_value(r.m.traceback), r, r.m.traceback) for r in reps
             if r.m.traceback is not None and r.m.traceback.call and r.own is None]
    return _groups(items, "code_line", "the code line where each rank's traceback stopped", len(reps))  # type: ignore[arg-type]


def _by_fingerprint(reps: list[Report]) -> list[OddOneOut]:
    fp: dict[int, tuple[str, E.Event]] = {}
    for r in reps:
        ev = r.m.mismatch
        if ev is None:
            continue
        for rank, op, shape in ((ev.rank_a, ev.op_a, ev.shape_a), (ev.rank_b, ev.op_b, ev.shape_b)):
            if rank is not None and (op or shape) and rank not in fp:
                fp[rank] = (" ".join(x for x in (op, f"TensorShape={shape}" if shape else None) if x), ev)
    by_rank = {r.m.rank: r for r in reps}
    items = [(v, by_rank[k], ev) for k, (v, ev) in fp.items() if k in by_rank]
    return _groups(items, "fingerprint", "the collective fingerprints compared by TORCH_DISTRIBUTED_DEBUG=DETAIL",
                   len(reps))


def _by_gloo_size(model: JobModel, reps: list[Report]) -> list[OddOneOut]:
    enforce = [ev for ev in model.events.get("cpp_abort", ())
               if isinstance(ev, E.CppAbort) and ev.what == "enforce" and ev.got is not None
               and "preamble.length" in (ev.detail or "")]
    if not enforce:
        return []
    ev = enforce[0]
    aborted = _aborted_rank(ev, reps)
    if aborted is None or aborted.m.rank is None:
        return []
    culprit, value = _size_culprit(aborted, aborted.m.rank, reps)
    # the "terminate called after throwing an instance of 'gloo::EnforceNotMet'" line just before
    terminate = [t for t in model.events.get("cpp_abort", ())
                 if t.source == ev.source and ev.line - 3 <= t.line < ev.line]
    lead: list[E.Event] = [ev, *terminate]
    if culprit is not aborted and culprit.m.traceback is not None:
        lead.append(culprit.m.traceback)
    rest: list[E.Event] = [r.m.traceback for r in reps if r is not culprit and r.m.traceback is not None]
    exit_lines = aborted.m.exit.evidence if aborted.m.exit else []
    rank = culprit.m.rank if culprit.m.rank is not None else aborted.m.rank
    return [{"how": "gloo_size", "point": f"the message size gloo checked ({ev.got} vs {ev.expected} bytes)",
             "rank": rank, "ranks": [rank], "who": f"rank {rank}", "host": _host(culprit.m), "value": value,
             "majority": "the size the others used", "n_odd": 1, "n_rest": len(reps) - 1,
             "category": "collective_desync", "evidence": lead + rest + _messengers(reps, culprit.m) + exit_lines}]


def _size_culprit(aborted: Report, a: int, reps: list[Report]) -> tuple[Report, str]:
    """Rank ``a`` received more than it expected from ``a + 1``: the culprit is ``a + 1`` when
    its traceback stops at another code line than the ranks outside the pair, else ``a``."""
    n = max(r.m.rank for r in reps if r.m.rank is not None) + 1
    sender = (a + 1) % n
    others = {_tb_value(r.m.traceback) for r in reps if r.m.rank not in (a, sender)
              and r.m.traceback is not None and r.m.traceback.call}
    s_rep = next((r for r in reps if r.m.rank == sender), None)
    tb = s_rep.m.traceback if s_rep is not None else None
    s_line = _tb_value(tb) if tb is not None and tb.call else None
    if s_rep is not None and s_line is not None and others and s_line not in others:
        return s_rep, f"sent more than rank {a} expected ({s_line})"
    if s_line is not None and s_line in others:
        return aborted, "received more than its own tensor holds: its tensor is the smaller one"
    return aborted, f"received more than it expected from rank {sender} (or rank {sender} sent more)"


def _aborted_rank(ev: E.Event, reps: list[Report]) -> Report | None:
    """The rank whose process printed a C++ abort: its prefix, else the one rank the agent
    says died of SIGABRT."""
    if ev.rank is not None:
        return next((r for r in reps if r.m.rank == ev.rank), None)
    aborted = [r for r in reps if r.m.exit is not None and r.m.exit.exitcode == -6]
    return aborted[0] if len(aborted) == 1 else None


# --------------------------------------------------------------------------- first_failure


class FirstFailure(Record):
    rank: int | str
    who: str
    host: str
    message: str  # its own failure line, without the envelope
    kb_id: str
    category: str
    others: int  # ranks that only lost it or waited
    before_s: float | str  # seconds before the next rank's trouble, where lines carry times
    alone: bool  # the only rank with a failure of its own


@fact(FirstFailure)
def first_failure(model: JobModel) -> list[FirstFailure]:
    """The rank that failed on its own (an exception or a message whose knowledge-base role
    is ``cause``) while the others only lost the connection to it or waited: the first such
    failure in time where the lines carry timestamps; the others' peer-loss and timeout
    lines are its symptoms.  When several ranks failed on their own and the lines do not say
    which was first, or nobody else reported anything, there is no record (the lines' own
    rules and the knowledge base say what each failure is)."""
    reps = [r for r in picture(model) if not r.m.shared]
    owners = [r for r in reps if r.own is not None]
    if not owners:
        return []
    first = _earliest(owners)
    if first is None:
        return []
    ev, s = first.own  # type: ignore[misc]
    later = [r for r in reps if r is not first and r.reports]
    if not later and len(owners) == 1:
        return []  # nobody else reported anything: not a question of which rank (the line's own rules say it)
    before = _lead(first, later)
    rank: int | str = first.m.rank if first.m.rank is not None else "?"
    return [{"rank": rank, "who": first.m.name, "host": _host(first.m), "message": _msg(ev), "kb_id": s.kb_id or "",
             "category": s.category or "app_crash", "others": len(later),
             "before_s": round(before, 1) if before is not None else "?", "alone": len(owners) == 1,
             "evidence": [ev] + _messengers(later)}]


def _msg(ev: E.Event) -> str:
    from .said import message_of

    return " ".join(message_of(ev).split())[:300]


def _earliest(owners: list[Report]) -> Report | None:
    """The owner whose failure is surely first in time; with one owner, that one."""
    if len(owners) == 1:
        return owners[0]
    timed = [r for r in owners if r.m.first_t is not None]
    if len(timed) < len(owners):
        return None  # cannot tell which came first
    timed.sort(key=lambda r: r.m.first_t.t)  # type: ignore[union-attr]
    a, b = timed[0], timed[1]
    return a if earlier(a.m.first_t, b.m.first_t) else None  # type: ignore[arg-type]


def _lead(first: Report, later: list[Report]) -> float | None:
    t0 = first.m.first_t
    ts = [r.m.first_t.t for r in later if r.m.first_t is not None]
    if t0 is None or not ts:
        return None
    return min(ts) - t0.t


# --------------------------------------------------------------------------- quiet_rank


#: what each way of ending means for the job (the elastic agent's exit codes: knowledge
#: base MP-FAILED-BIN / ERR-FAILURE-*): a rank killed by a signal or gone without a word is a
#: peer failure for the others; an abort (SIGABRT, SIGSEGV) is a crash of its own; a rank
#: that exited or fell behind while the others wait made them call different collectives;
#: a rank busy alone past the others' timeout is the timeout's cause
HOW_CATEGORY = {"killed": "peer_failure", "died": "peer_failure", "aborted": "app_crash", "gone": "peer_failure",
                "exited": "collective_desync", "behind": "collective_desync", "busy": "collective_timeout"}


class QuietRank(Record):
    how: str  # killed | aborted | exited | died | gone | behind | busy
    left: str  # "died" or, where exit and death cannot be told apart, "ended"
    category: str
    rank: int
    who: str
    host: str
    last: str  # its last line
    step: int | str  # its last progress step
    others_step: int | str  # the step most reporters reached
    signal: str
    exitcode: int | str
    ended: str  # how it ended, in words
    others: int  # ranks that report the failure
    others_said: str  # what they report
    quiet: int  # how many ranks are quiet


_HOW_SAID = {"lost": "lost the connection to a peer", "waited": "timed out waiting"}


@fact(QuietRank)
def quiet_rank(model: JobModel) -> list[QuietRank]:
    """Reasoning from absence: the member that does not report what the others report.

    The others report the failure (they lost a peer or timed out); this rank reports
    nothing of its own.  How it ended decides what it did: the elastic agent says it died of
    a signal (``killed`` by SIGKILL: the OOM killer or the scheduler; ``aborted``: SIGABRT,
    SIGSEGV, ...) or it is missing from the agent's failure list (``exited``: it finished
    while the others wait); without the agent, the others' lines say how it left: a peer
    that closed its connections cleanly (gloo's ``Connection closed by peer``) exited, one
    that reset them (``Connection reset by peer``) died.  A rank that is still there when
    the others time out either stopped earlier (``behind``: its last progress line is
    behind theirs) or was busy alone (``busy``: it got as far as they did, then did
    something else: its last line says what).  Ranks the agent tore down with SIGTERM after
    the failure are victims, not candidates, when another quiet rank ended otherwise.
    """
    reps = _ranked(picture(model))
    if len(reps) < 2:
        return []
    if any(r.own is not None for r in reps):
        return []  # a rank failed on its own: first_failure's case
    quiet = [r for r in reps if r.quiet and _exists(r.m)]
    if not quiet:
        quiet = _late(reps)
    reporters = [r for r in reps if r.reports and r not in quiet]
    if not reporters or not quiet:
        return []
    sized = _by_gloo_size(model, reps)
    if sized:  # an abort by gloo's size check is odd_one_out's evidence, not a death of its own
        quiet = [r for r in quiet if not (r.m.exit is not None and r.m.exit.exitcode == -6)]
    ended = [r for r in quiet if r.m.exit is not None and not r.m.exit.torn_down]
    cands = ended or quiet
    if not _minority_ok(len(cands), len(reps)):
        return []
    agent = any(r.m.exit is not None for r in reps)
    lost = [r for r in reporters if r.lost is not None]
    waited = [r for r in reporters if r.waited is not None and r.lost is None]
    steps = Counter(r.m.step for r in reporters if r.m.progress_of is not None)
    others_step = steps.most_common(1)[0][0] if steps else None
    said_by = "lost the connection to a peer" if len(lost) >= len(waited) else "timed out waiting"
    messengers = _messengers(reporters)
    out: list[QuietRank] = []
    for r in cands:
        how = _how(r, agent, lost, waited, others_step)
        if how is not None and r.m.rank is not None:
            out.append(_quiet_record(r.m, r.m.rank, how, others_step, len(reporters), said_by, len(cands),
                                     messengers))
    return out


def _quiet_record(m: Member, rank: int, how: str, others_step: int | None, others: int, said_by: str,
                  quiet: int, messengers: list[E.Event]) -> QuietRank:
    ex = m.exit
    exit_line = ex.evidence[0] if ex and ex.evidence else None
    # a rank that died: how it ended first; one that stopped, left or was busy: its last line
    last, prog = m.last_line(), m.progress_line()
    order = (exit_line, last, prog) if how in ("killed", "aborted") else (last, prog, exit_line)
    lead = [ev for ev in order if ev is not None]
    return {"how": how, "left": "ended" if how == "gone" else "died",
            "category": HOW_CATEGORY[how], "rank": rank, "who": f"rank {rank}", "host": _host(m),
            "last": " ".join((last.text if last else "").split())[:200],
            "step": m.step if m.step is not None else "?",
            "others_step": others_step if others_step is not None else "?",
            "signal": (ex.signal or "") if ex else "", "ended": _ended(how, ex),
            "exitcode": ex.exitcode if ex and ex.exitcode is not None else "?", "others": others,
            "others_said": said_by, "quiet": quiet,
            "evidence": _unique(lead + (ex.evidence[1:] if ex else []) + messengers)}


def _late(reps: list[Report]) -> list[Report]:
    """Ranks that did not time out while the others did: they only lost their peers (who had
    closed their connections after their own timeout), so they were not waiting in the
    collective when the others gave up: they arrived late (gloo's knowledge base: "the rank
    that did NOT time out is usually the one that was late")."""
    waited = [r for r in reps if r.waited is not None and r.lost is None]
    lost_only = [r for r in reps if r.lost is not None and r.waited is None]
    if lost_only and len(waited) >= max(2, 2 * len(lost_only)) and len(waited) + len(lost_only) == len(reps):
        return lost_only
    return []


def _ended(how: str, ex: Exit | None) -> str:
    if ex is not None and ex.exitcode is not None and not ex.torn_down:
        return f"exit code {ex.exitcode}" + (f", {ex.signal}" if ex.signal else "")
    return {"died": "its connections were reset, no word from it", "exited": "it exited without an error",
            "gone": "NCCL saw its connections closed, which an exit and a kill (SIGKILL, the OOM killer) both give",
            "behind": "its output stops earlier than the others'", "busy": "still busy when the others timed out"
            }.get(how, how)


def _exists(m: Member) -> bool:
    """The member printed something or the agent knows it (a rank with no trace at all is
    a missing rank, not a quiet one)."""
    return m.last_of is not None or m.progress_of is not None or m.exit is not None


def _how(r: Report, agent: bool, lost: list[Report], waited: list[Report], others_step: int | None) -> str | None:
    ex = r.m.exit
    if r.lost is not None:  # it lost its peers after they timed out: late, not gone
        step = r.m.step
        return "behind" if step is not None and others_step is not None and step < others_step else "busy"
    if ex is not None and not ex.torn_down:
        if ex.exitcode == 0:
            return "exited"
        if ex.signal == "SIGKILL" or ex.exitcode == -9:
            return "killed"
        if ex.exitcode is not None and ex.exitcode < 0:
            return "aborted"
        return None  # a non-zero exit code without a line of its own: nothing to say
    if agent and ex is None and r.m.last_of is not None:
        return "exited"  # the agent listed the failed workers, not this one: it exited 0
    if lost and len(lost) >= len(waited):
        # a peer that died has its sockets reset; one that exits closes them (GLOO-read-error vs
        # GLOO-connection-closed)
        resets = sum(1 for x in lost if x.lost is not None and "reset" in x.lost[0].text)
        if resets:
            return "died"
        # NCCL's "socketProgress: Connection closed by remote peer" is recv() returning 0, and
        # from 2.24.3 on also ECONNRESET/EPIPE (src/misc/socket.cc socketProgressOpt; src/os/
        # linux.cc from 2.29): the kernel closes a killed process's sockets as an exiting one's,
        # so NCCL's words say only that the process ended (fixtures/gpu/killed-rank-socket)
        if any(x.lost is not None and " NCCL " in x.lost[0].text for x in lost):
            return "gone"
        return "exited"
    step = r.m.step
    if step is not None and others_step is not None and step < others_step:
        return "behind"
    return "busy"


# --------------------------------------------------------------------------- busy_past_timeout


class BusyPastTimeout(Record):
    rank: int | str
    who: str
    host: str
    what: str  # what the progress bar says it was doing
    elapsed: str  # "30:09"
    elapsed_s: int
    timeout_s: int
    timeout_note: str  # where the timeout comes from


#: PyTorch's default process-group timeouts: gloo, and NCCL before 2.2 (30 min); NCCL from
#: 2.2 (10 min) (knowledge base PGN-WD-TIMEOUT: "default 600000 ms from v2.2, 1800000 ms before")
DEFAULT_TIMEOUTS_S = (600, 1800)
_BAR_WHAT = rx(r"^(.*?)[:\s]*\d+%\|")
_TIMEOUT_MS = rx(r"(?:Timeout\(ms\)=|TIMEOUT\(ms\): |Timed out waiting )(\d+)")


@fact(BusyPastTimeout)
def busy_past_timeout(model: JobModel) -> list[BusyPastTimeout]:
    """A rank whose progress bar (tqdm: ``[30:09<33:25, ...]``) had run longer than the
    process-group timeout when the job failed right after it: it was doing work alone (a
    tokenisation, a download, a preprocessing pass) while the others waited in a collective
    and timed out.  The timeout is the job's own where a line prints it (``Timeout(ms)=``,
    gloo's ``Timed out waiting Nms``), else PyTorch's defaults (10 and 30 minutes)."""
    known = _job_timeouts(model)
    limits = sorted(known) if known else list(DEFAULT_TIMEOUTS_S)
    out: list[BusyPastTimeout] = []
    for m in members(model):
        if m.elapsed_s is None or m.elapsed_s < limits[0]:  # no progress bar, or not long enough
            continue
        p = m.progress_line()
        if p is None or p.elapsed_s is None:  # not so: elapsed_s is its line's
            continue
        after = [ev for ev in (m.last_problem, m.traceback) if ev is not None and ev.source == p.source
                 and ev.line >= p.line]
        if not after:
            continue
        limit = max(t for t in limits if t <= p.elapsed_s)
        note = "the job's process-group timeout" if known else f"PyTorch's default process-group timeout " \
               f"({'gloo, and NCCL before 2.2' if limit == 1800 else 'NCCL from 2.2'})"
        bm = _BAR_WHAT.match(strip_prefixes(p.text))
        out.append({"rank": m.rank if m.rank is not None else "?", "who": m.name, "host": _host(m),
                    "what": (bm.group(1).strip() if bm and bm.group(1).strip() else "a progress bar"),
                    "elapsed": f"{p.elapsed_s // 60}:{p.elapsed_s % 60:02d}", "elapsed_s": p.elapsed_s,
                    "timeout_s": limit, "timeout_note": note, "evidence": [p, *after[:1]]})
    return out


def _job_timeouts(model: JobModel) -> set[int]:
    out: set[int] = set()
    for kind in ("watchdog_timeout", "pg_options", "traceback"):
        for ev in model.events.get(kind, ())[:64]:
            m = _TIMEOUT_MS.search(ev.text)
            if m is not None:
                out.add(int(m.group(1)) // 1000)
    return {t for t in out if t > 0}
