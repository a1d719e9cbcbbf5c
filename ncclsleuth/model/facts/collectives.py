"""Facts about collectives across ranks: the laggard rank, mismatched collectives, stragglers.

A 1,024-rank job leaves 1,024 logs and the answer is in how they differ: the one rank
whose collective sequence is behind, the rank whose steps are slower than the others'."""
from __future__ import annotations

from collections import defaultdict

from ... import events as E
from ..job import JobModel
from ..members import members, rank_hosts
from .base import TEXT_MOST, Record, fact, median, ranges


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


def _pg(ev: E.Event) -> str:
    return getattr(ev, "pg", None) or "0"


@fact(CollectiveLaggard)
def collective_laggard(model: JobModel) -> list[CollectiveLaggard]:
    """Ranks whose collective sequence number is behind the others', per process group.

    Evidence, strongest first: the desync report naming the rank; per-rank
    ``last enqueued`` work counters (the laggard never enqueued the collective the others
    wait in); watchdog timeouts at a sequence number the laggard never reached.
    """
    hosts = rank_hosts(model)
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
    """pg -> rank -> (last enqueued seq, the line saying so), from each rank's counters
    (:mod:`..tracks`: every rank's, not only the events kept per kind)."""
    out: dict[str, dict[int, tuple[int, E.Event]]] = defaultdict(dict)
    for m in members(model).ranks:
        for pg, (enq, _, ev) in m.counters.items():
            if enq is not None and m.rank is not None:
                out[pg][m.rank] = (enq, ev)
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
            desc = "; ".join(f"ranks {ranges([r for e in evs for r in e.ranks], most=TEXT_MOST)} started {op}"
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
    hosts = rank_hosts(model)
    out: list[Straggler] = []
    for key, med in sorted(per.items(), key=lambda kv: -kv[1]):
        if med > job * 1.10 and med - job > 3 * mad:
            rank = key if isinstance(key, int) else None
            out.append({"rank": rank if rank is not None else "?",
                        "who": f"rank {rank}" if rank is not None else str(key),
                        "host": hosts.get(rank, "?") if rank is not None else "?", "median_ms": round(med, 1),
                        "job_median_ms": round(job, 1), "slower_pct": round(100 * (med / job - 1)),
                        "others": len(per) - 1, "steps": len(model.step_times[key]),
                        "evidence": [model.step_line(key)]})
    return out


class StragglerHost(Record):
    host: str
    ratio: float  # its ranks' median step time over the other hosts'
    median_ms: float
    others_ms: float
    nranks: int
    ranks: list[int]
    nhosts: int  # the other hosts compared
    steps: int


#: a host is a straggler when its ranks' steps take this much longer than the other hosts'
HOST_SLOWER = 1.25


@fact(StragglerHost)
def straggler_hosts(model: JobModel) -> list[StragglerHost]:
    """Hosts whose ranks' training steps are consistently slower than the other hosts' (a
    node at half speed: a throttled GPU, a slow NIC or disk, a noisy neighbour), named with
    the ratio.  Per host: the median of its ranks' median step times (each rank's from the
    training loop's own lines); flagged when it is 25% above the median of the other hosts'
    and the host holds a minority of the job's hosts."""
    ms = members(model)
    file_rank = {s: m.rank for m in ms.ranks for s in m.sources}
    hosts = rank_hosts(model)
    src_host = model.source_hosts()
    per_host: dict[str, list[tuple[float, int | None, int | str, int]]] = defaultdict(list)
    for key, times in model.step_times.items():
        if len(times) < 5:
            continue
        rank = key if isinstance(key, int) else file_rank.get(key)
        host = hosts.get(rank) if rank is not None else None
        host = host or (src_host.get(key) if isinstance(key, str) else None)
        if host:
            per_host[host].append((median(times), rank, key, len(times)))
    if len(per_host) < 2:
        return []
    med = {h: median([x[0] for x in v]) for h, v in per_host.items()}
    out: list[StragglerHost] = []
    for h, m in sorted(med.items(), key=lambda kv: -kv[1]):
        others = median([v for k, v in med.items() if k != h])
        if not others or m < HOST_SLOWER * others:
            break
        slow = [x for x in per_host[h] if x[0] >= HOST_SLOWER * others]
        if len(slow) * 2 < len(per_host[h]) or (len(out) + 1) * 3 > len(med) + 1:
            break  # not most of its ranks, or not a minority of the hosts
        ranks = sorted(r for _, r, _, _ in per_host[h] if r is not None)
        fastest = min(med, key=lambda k: med[k])
        out.append({"host": h, "ratio": round(m / others, 2), "median_ms": round(m, 1), "others_ms": round(others, 1),
                    "nranks": len(per_host[h]), "ranks": ranks, "nhosts": len(med) - 1,
                    "steps": sum(x[3] for x in per_host[h]),
                    "evidence": [model.step_line(x[2]) for x in (*per_host[h][:4], per_host[fastest][0])]})
    return out


def _nccl_host(model: JobModel, host: str, pid: int | None) -> str:
    """The host as NCCL tells hosts apart: the host name, or the NCCL_HOSTID the process set."""
    proc = model.processes.get((host, pid))
    hostid = proc.env.get("NCCL_HOSTID") if proc is not None else None
    return f"{host} (NCCL_HOSTID {hostid})" if hostid else host


class DuplicateBusId(Record):
    rank_a: int
    rank_b: int
    ranks: list[int]
    host: str
    device: str  # the busId both use
    comm: str


@fact(DuplicateBusId)
def duplicate_busid(model: JobModel) -> list[DuplicateBusId]:
    """Two ranks of one communicator on one host that print the same ``busId`` in their
    ``ncclCommInitRank ... busId X ... Init START`` lines and no ``Init COMPLETE``: they run on one GPU,
    whether or not NCCL's own "Duplicate GPU detected" made it into the logs.

    Not a rank that completed the communicator's init: NCCL checks for a duplicate in the
    first AllGather of ``initTransportsRank`` and fails the init there (src/init.cc,
    2.5.6-2.29: "Duplicate GPU detected", ncclInvalidUsage; 2.30: "Multiple Ranks are using
    the same GPU/Partition" unless NCCL_MULTI_RANK_GPU_ENABLE=1), before "Init COMPLETE". Its
    host is a hash of the host name and boot id, or of NCCL_HOSTID (src/misc/utils.cc
    getHostHash), so one host name in the logs is not always one NCCL host. Nor a rank that
    printed its ``comm ... nNodes N localRanks L`` line: NCCL prints it later in the same
    function, after the check passed (2.20.3+)."""
    out: list[DuplicateBusId] = []
    seen: set[tuple[str, str]] = set()
    for c in model.comms.values():
        by: dict[tuple[str, str], list[int]] = defaultdict(list)
        for r, st in c.ranks.items():
            if st.host and st.bus_id and st.began is not None and st.done is None and st.nnodes is None:
                by[(_nccl_host(model, st.host, st.pid), st.bus_id)].append(r)
        for (host, bus), ranks in sorted(by.items()):
            if len(ranks) < 2 or (host, bus) in seen:
                continue
            seen.add((host, bus))
            a, b = sorted(ranks)[:2]
            evs: list[E.Event] = [ev for r in (a, b) for ev in (c.ranks[r].init_event(),) if ev is not None]
            out.append({"rank_a": a, "rank_b": b, "ranks": [a, b], "host": host, "device": bus, "comm": c.key,
                        "evidence": evs})
    return out
