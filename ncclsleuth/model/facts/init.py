"""Facts about communicator init: ranks stuck, missing or stopped, and init-time outliers."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from ... import events as E
from ..job import JobModel, RankState
from ..members import members
from .base import TEXT_MOST, Record, fact, median, ranges


class InitStuck(Record):
    comm: str
    nranks: int | None
    stuck: int
    completed: int
    ranks: str  # "40-42,47"
    hosts: str


class InitTiming(Record):
    comm: str
    nranks: int | None
    timed: int
    max_s: float
    median_s: float
    slow_rank: int
    slow_host: str
    phase: str
    phase_s: float
    bootstrap_share: float
    ratio: float  # the slowest host's init time over the median host's
    phase_ratio: float | str  # its dominant phase against the other hosts' median of that phase
    outlier: bool
    any_flag: bool
    bootstrap_dominates: bool


class InitStoppedSilently(Record):
    comm: str
    nranks: int
    nhosts: int
    host: str
    channels: int


class InitMissingRanks(Record):
    comm: str
    nranks: int
    missing: str
    nmissing: int
    seen: int
    completed: int
    host: str


@fact(InitStuck)
def init_stuck(model: JobModel) -> list[InitStuck]:
    """Ranks that logged Init START but never Init COMPLETE while others of the comm did."""
    out: list[InitStuck] = []
    for c in model.comms.values():
        done = [r for r in c.ranks.values() if r.done is not None]
        stuck = [r for r in c.ranks.values() if r.began is not None and r.done is None]
        if not done or not stuck:
            continue
        hosts = sorted({r.host or "?" for r in stuck})
        out.append({"comm": c.key, "nranks": c.nranks, "stuck": len(stuck), "completed": len(done),
                    "ranks": ranges([r.rank for r in stuck], most=TEXT_MOST), "hosts": ", ".join(hosts[:8]),
                    "evidence": [ev for r in stuck[:10] if (ev := r.start) is not None]})
    return out


@fact(InitTiming)
def init_timing(model: JobModel) -> list[InitTiming]:
    """Per communicator: init duration, slowest rank/host/phase, and outliers."""
    out: list[InitTiming] = []
    for c in model.comms.values():
        # every rank's total and phases are kept beside its line (its event made again for the one quoted)
        timed = [r for r in c.ranks.values() if r.timed is not None]
        if not timed:
            continue
        totals = [r.init_total for r in timed]
        slow = max(timed, key=lambda r: r.init_total)
        med = median(totals)
        phases = dict(slow.init_phases)
        dom = max(phases, key=lambda k: phases[k]) if phases else "?"
        # each host's slowest rank (a list of every rank's time per host was ~60 bytes a rank)
        host_max: dict[str, float] = {}
        for r in timed:
            h, tot = r.host or "?", r.init_total
            if h not in host_max or tot > host_max[h]:
                host_max[h] = tot
        host_med = median(host_max.values())
        slow_host = max(host_max, key=host_max.__getitem__)
        outlier = len(host_max) >= 3 and host_max[slow_host] > max(3 * host_med, host_med + 5)
        boot_share = phases.get("bootstrap", 0) / slow.init_total if slow.init_total else 0
        others_phase = [dict(r.init_phases).get(dom, 0.0) for r in timed if (r.host or "?") != slow_host]
        phase_med = median(others_phase) if others_phase else 0.0
        out.append({"comm": c.key, "nranks": c.nranks, "timed": len(timed), "max_s": round(slow.init_total, 2),
                    "median_s": round(med, 2), "slow_rank": slow.rank, "slow_host": slow.host or "?",
                    "phase": dom, "phase_s": round(phases.get(dom, 0.0), 2),
                    "bootstrap_share": round(boot_share, 2),
                    "ratio": round(host_max[slow_host] / host_med, 1) if host_med else 0.0,
                    "phase_ratio": round(phases.get(dom, 0.0) / phase_med, 1) if phase_med else "?",
                    "outlier": outlier,
                    "any_flag": outlier or (boot_share > 0.5 and slow.init_total > 5),
                    "bootstrap_dominates": boot_share > 0.5 and slow.init_total > 5,
                    "evidence": [t] if (t := slow.timings) is not None else []})
    return out


@fact(InitStoppedSilently)
def init_stopped_silently(model: JobModel) -> list[InitStoppedSilently]:
    """A single-node job whose log stops after ring/tree set-up with no COMPLETE and no error.

    That is what a P2P/NVLink hang looks like from the log: NCCL built its graph, started
    connecting GPUs inside the node, and nothing was printed again.
    """
    if model.error_events():
        return []
    hosts = {p.host for p in model.processes.values() if p.host}
    out: list[InitStoppedSilently] = []
    for c in model.comms.values():
        if c.graph_event is None or any(r.done is not None for r in c.ranks.values()):
            continue
        nranks = c.nranks or max((len(o) for o in c.rings.values()), default=0)
        if nranks < 2:
            continue
        out.append({"comm": c.key, "nranks": nranks, "nhosts": len(hosts), "host": ", ".join(sorted(hosts)) or "?",
                    "channels": len(c.rings), "evidence": [c.graph_event]})
    return out


@fact(InitMissingRanks)
def init_missing_ranks(model: JobModel) -> list[InitMissingRanks]:
    """Ranks of a communicator that never logged Init START while most others did.

    Needs most of the communicator's ranks in the logs (an excerpt with a few lines is
    not evidence of absence), and no rank past Init COMPLETE, or errors in the job; and every
    rank state the logs gave tracked (past ``MAX_RANKS`` a rank without one says nothing).
    Where the ranks of a host are contiguous, the missing rank's host is named from its
    neighbours.
    """
    out: list[InitMissingRanks] = []
    if model.untracked.get("ranks"):  # past the model's bound: a rank with no state may be one not tracked
        return out
    failed = bool(model.error_events())
    for c in model.comms.values():
        if not c.nranks or c.nranks < 2:
            continue
        # "Init START" exists from NCCL 2.18.3 on; older logs say nothing about ranks that are absent.
        # Counted and looked up in the rank states, not sets of the ranks (three sets of a
        # communicator's ranks were ~250 bytes a rank of the rule step's peak at 4,096 ranks)
        ranks = c.ranks
        if not any(st.start_phase == "START" for st in ranks.values()):
            continue
        missing = [r for r in range(c.nranks) if (st := ranks.get(r)) is None or not _seen(st)]
        if not missing:
            continue
        seen = sum(1 for st in ranks.values() if _seen(st))
        # too few ranks in the logs for absence to say anything, unless the missing ranks' own output is here
        present = _present_without_init(model, missing) if seen < max(2, 0.75 * c.nranks) else None
        if present == []:
            continue
        completed = sum(1 for st in c.ranks.values() if st.done is not None)
        if completed and not failed:
            continue
        hosts = _guess_hosts(c, missing)
        if present:
            hosts = ", ".join(sorted({ev.host for ev in present if ev.host})) or NO_INIT_LINE
        evidence: list[E.Event] = [ev for st in sorted(c.ranks.values(), key=lambda s: s.rank)[:3]
                                   if (ev := st.start) is not None] + (present or [])
        out.append({"comm": c.key, "nranks": c.nranks, "missing": ranges(missing, most=TEXT_MOST),
                    "nmissing": len(missing), "seen": seen, "completed": completed, "host": hosts,
                    "evidence": evidence})
    return out


def _seen(st: RankState) -> bool:
    """Whether the logs show the rank entering its init (Init START) or done with it."""
    return st.start_phase == "START" or st.done is not None


NO_INIT_LINE = "its output is in the logs, without Init START"


def _present_without_init(model: JobModel, missing: list[int]) -> list[E.Event]:
    """The last lines of the missing ranks when each of them has output of its own in the logs
    (a launcher prefix such as ``[default1]:``, a file of its own): evidence of absence in a
    job too small for the three-quarters test. NCCL prints "Init START" as a rank enters
    ncclCommInitRank (src/init.cc, 2.18.3+), so a rank whose output is here without that line
    never called into this communicator's init: it is still before its first collective
    (lazy init) or busy elsewhere. Empty when any missing rank has no output, problem lines of
    its own (they explain it better, and a rank with a few lines of errors is usually an excerpt),
    or training progress past step 0 (it ran collectives, so its init lines were left out)."""
    mem = members(model)
    out: list[E.Event] = []
    for r in missing:
        m = mem.by_rank.get(r)
        # a rank with problem lines of its own is explained by them (and is more often an excerpt)
        if m is None or m.last_of is None or m.shared or m.problems:
            return []
        # a rank past its first training step has run collectives, so it went through NCCL's init:
        # its Init START is only missing from what was pasted
        if (m.step or 0) >= 1:
            return []
        out.append(m.last_line())  # type: ignore[arg-type]  # last_of is not None: there is one
    return out


def _guess_hosts(c: Any, missing: list[int]) -> str:
    """Hosts of missing ranks, assuming ranks are placed on hosts in contiguous blocks."""
    by_host: dict[str, list[int]] = defaultdict(list)
    for r, st in c.ranks.items():
        if st.host:
            by_host[st.host].append(r)
    if not by_host:
        return "?"
    per_host = max(len(rs) for rs in by_host.values())
    block_host = {min(rs) // per_host: h for h, rs in by_host.items()}
    names = []
    for r in missing:
        h = block_host.get(r // per_host, "a host with no log")
        if h not in names:
            names.append(h)
    return ", ".join(names[:8])
