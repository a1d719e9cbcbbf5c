"""Facts about collectives across ranks: the laggard rank, mismatched collectives, stragglers.

A 1,024-rank job leaves 1,024 logs and the answer is in how they differ: the one rank
whose collective sequence is behind, the rank whose steps are slower than the others'."""
from __future__ import annotations

from collections import defaultdict

from ... import events as E
from ..job import JobModel
from .base import Record, fact, median, ranges


class CollectiveLaggard(Record):
    pg: str
    rank: int
    host: str
    seq: int  # the last collective it reached
    others_seq: int
    op: str
    ahead: int | str  # how many ranks are ahead ("the other" when a desync report says it)


class CollectiveOrderMismatch(Record):
    pg: str
    seq: int
    detail: str


class Straggler(Record):
    rank: int | str
    who: str
    host: str
    median_ms: float
    job_median_ms: float
    slower_pct: int
    others: int
    steps: int


def global_rank_hosts(model: JobModel) -> dict[int, str]:
    """Global rank -> host, from launcher prefixes, NCCL comm ranks and torchrun failure blocks."""
    out: dict[int, str] = {}
    biggest = max(model.comms.values(), key=lambda c: c.nranks or 0, default=None)
    if biggest is not None:
        for r, st in biggest.ranks.items():
            if st.host:
                out.setdefault(r, st.host)
    for p in model.processes.values():
        if p.launcher_rank is not None and p.host:
            out.setdefault(p.launcher_rank, p.host)
    for b in model.failure_blocks:
        f = b["fields"]
        if "rank" in f and "host" in f:
            try:
                out.setdefault(int(f["rank"][0].split()[0]), f["host"][0])
            except ValueError:
                pass
    return out


def _pg(ev: E.Event) -> str:
    return getattr(ev, "pg", None) or "0"


@fact(CollectiveLaggard)
def collective_laggard(model: JobModel) -> list[CollectiveLaggard]:
    """Ranks whose collective sequence number is behind the others', per process group.

    Evidence, strongest first: the desync report naming the rank; per-rank
    ``last enqueued`` work counters (the laggard never enqueued the collective the others
    wait in); watchdog timeouts at a sequence number the laggard never reached.
    """
    hosts = global_rank_hosts(model)
    out: list[CollectiveLaggard] = []
    for pg, ranks in _enqueued_by_rank(model).items():
        if len(ranks) < 2:
            continue
        top = max(seq for seq, _ in ranks.values())
        behind = {r: v for r, v in ranks.items() if v[0] < top}
        ahead = [r for r, v in ranks.items() if v[0] == top]
        if not behind or len(behind) >= len(ranks):
            continue
        op = _op_at(model, pg, top)
        for r, (seq, ev) in sorted(behind.items()):
            out.append(_laggard(pg, r, seq, top, op, len(ahead), hosts, [ev] + _messengers(ranks, ahead)))
    seen = {(f["pg"], f["rank"]) for f in out}
    for ev in model.events.get("desync_report", ()):
        assert isinstance(ev, E.DesyncReport)
        if ev.what not in ("not_joined", "never_joined"):
            continue
        for r in ev.ranks:
            if (_pg(ev), r) in seen:
                continue
            seen.add((_pg(ev), r))
            seq = ev.seq if ev.seq is not None else 0
            out.append(_laggard(_pg(ev), r, seq, seq + 1, _op_at(model, _pg(ev), seq + 1), None, hosts, [ev]))
    # the desync report's other lines (head, snapshot) belong to the same diagnosis
    report = [ev for ev in model.events.get("desync_report", ())]
    for f in out:
        f["evidence"] = f["evidence"] + [ev for ev in report if ev not in f["evidence"] and _pg(ev) == f["pg"]]
    return out


def _laggard(pg: str, rank: int, seq: int, top: int, op: str | None, n_ahead: int | None,
             hosts: dict[int, str], evidence: list[E.Event]) -> CollectiveLaggard:
    return {"pg": pg, "rank": rank, "host": hosts.get(rank, "?"), "seq": seq, "others_seq": top,
            "op": op or "?", "ahead": n_ahead if n_ahead is not None else "the other",
            "evidence": evidence}


def _messengers(ranks: dict[int, tuple[int, E.Event]], ahead: list[int]) -> list[E.Event]:
    return [ranks[r][1] for r in sorted(ahead)[:2]]


def _enqueued_by_rank(model: JobModel) -> dict[str, dict[int, tuple[int, E.Event]]]:
    """pg -> rank -> (last enqueued seq, the line saying so)."""
    out: dict[str, dict[int, tuple[int, E.Event]]] = defaultdict(dict)
    for ev in model.events.get("work_status", ()):
        assert isinstance(ev, E.WorkStatus)
        if ev.rank is None or ev.last_enqueued is None:
            continue
        cur = out[_pg(ev)].get(ev.rank)
        if cur is None or ev.last_enqueued > cur[0]:
            out[_pg(ev)][ev.rank] = (ev.last_enqueued, ev)
    return out


def _op_at(model: JobModel, pg: str, seq: int) -> str | None:
    for ev in model.events.get("watchdog_timeout", ()):
        assert isinstance(ev, E.WatchdogTimeout)
        if ev.seq == seq and ev.op:
            return ev.op
    return None


@fact(CollectiveOrderMismatch)
def collective_order_mismatch(model: JobModel) -> list[CollectiveOrderMismatch]:
    """Ranks that started a different op at the same sequence number (desync snapshot)."""
    by_seq: dict[tuple[str, int], dict[str, list[E.DesyncReport]]] = defaultdict(lambda: defaultdict(list))
    cur_seq: dict[str, int] = {}
    for ev in model.events.get("desync_report", ()):
        assert isinstance(ev, E.DesyncReport)
        if ev.what == "head" and ev.seq is not None:
            cur_seq[ev.source] = ev.seq
        if ev.what == "started" and ev.op:
            seq = cur_seq.get(ev.source, -1)
            by_seq[(_pg(ev), seq)][ev.op].append(ev)
    wd: dict[tuple[int | None, int | None], set[str]] = defaultdict(set)
    wd_ev: dict[tuple[int | None, int | None], list[E.Event]] = defaultdict(list)
    for ev in model.events.get("watchdog_timeout", ()):
        assert isinstance(ev, E.WatchdogTimeout)
        if ev.op and ev.seq is not None:
            wd[(ev.seq, None)].add(ev.op)
            wd_ev[(ev.seq, None)].append(ev)
    out: list[CollectiveOrderMismatch] = []
    for (pg, seq), ops in by_seq.items():
        if len(ops) > 1:
            desc = "; ".join(f"ranks {ranges([r for e in evs for r in e.ranks])} started {op}"
                             for op, evs in sorted(ops.items()))
            out.append({"pg": pg, "seq": seq, "detail": desc,
                        "evidence": [evs[0] for evs in ops.values()]})
    for (wd_seq, _), wd_ops in wd.items():
        if len(wd_ops) > 1 and wd_seq is not None:
            out.append({"pg": "0", "seq": wd_seq, "detail": "watchdog timeouts name " + " and ".join(sorted(wd_ops)),
                        "evidence": wd_ev[(wd_seq, None)][:4]})
    return out


@fact(Straggler)
def stragglers(model: JobModel) -> list[Straggler]:
    """Ranks whose training steps are consistently slower than the others'.

    Per rank (or per file when the rank is unknown) the median of its step times; a
    straggler's median is above the job's median by more than 10% and by more than
    three median absolute deviations of the per-rank medians.
    """
    per = {k: median(v) for k, v in model.step_times.items() if len(v) >= 5}
    if len(per) < 4:
        return []
    meds = list(per.values())
    job = median(meds)
    mad = median(abs(x - job) for x in meds) or job * 0.01
    hosts = global_rank_hosts(model)
    out: list[Straggler] = []
    for key, med in sorted(per.items(), key=lambda kv: -kv[1]):
        if med > job * 1.10 and med - job > 3 * mad:
            rank = key if isinstance(key, int) else None
            out.append({"rank": rank if rank is not None else "?",
                        "who": f"rank {rank}" if rank is not None else str(key),
                        "host": hosts.get(rank, "?") if rank is not None else "?", "median_ms": round(med, 1),
                        "job_median_ms": round(job, 1), "slower_pct": round(100 * (med / job - 1)),
                        "others": len(per) - 1, "steps": len(model.step_times[key]),
                        "evidence": [model.step_evidence[key]]})
    return out
