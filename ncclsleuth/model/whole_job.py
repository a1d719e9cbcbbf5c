"""Whole-job facts: how the ranks differ from each other.

A 1,024-rank job leaves 1,024 logs and the answer is in how they differ: the one rank
whose collective sequence is behind, the host whose init took ten times longer, the
minority whose settings differ.  Each function here is a registered fact (see
:mod:`ncclsleuth.model.facts`).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from .. import events as E
from .facts import Fact, fact, ranges
from .job import JobModel, Process


def _median(values: Any) -> float:
    """statistics.median (the mean of the two middle values for an even count), without
    importing statistics (decimal and fractions: ~4 ms of a chat-sized run's start-up)."""
    s = sorted(values)
    if not s:
        raise ValueError("median of no values")
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


# ---------------------------------------------------------------------- collectives


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


@fact
def collective_laggard(model: JobModel) -> list[Fact]:
    """Ranks whose collective sequence number is behind the others', per process group.

    Evidence, strongest first: the desync report naming the rank; per-rank
    ``last enqueued`` work counters (the laggard never enqueued the collective the others
    wait in); watchdog timeouts at a sequence number the laggard never reached.
    """
    hosts = global_rank_hosts(model)
    out: list[Fact] = []
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
             hosts: dict[int, str], evidence: list[E.Event]) -> Fact:
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


@fact
def collective_order_mismatch(model: JobModel) -> list[Fact]:
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
    out: list[Fact] = []
    for (pg, seq), ops in by_seq.items():
        if len(ops) > 1:
            desc = "; ".join(f"ranks {ranges([r for e in evs for r in e.ranks])} started {op}"
                             for op, evs in sorted(ops.items()))
            out.append({"pg": pg, "seq": seq, "detail": desc,
                        "evidence": [evs[0] for evs in ops.values()]})
    for (seq, _), ops in wd.items():
        if len(ops) > 1:
            evs = wd_ev[(seq, None)]
            out.append({"pg": "0", "seq": seq, "detail": "watchdog timeouts name " + " and ".join(sorted(ops)),
                        "evidence": evs[:4]})
    return out


# ---------------------------------------------------------------------- init timing


@fact
def init_timing(model: JobModel) -> list[Fact]:
    """Per communicator: init duration, slowest rank/host/phase, and outliers."""
    out: list[Fact] = []
    for c in model.comms.values():
        timed = [r for r in c.ranks.values() if r.timings is not None]
        if not timed:
            continue
        totals = [r.timings.total for r in timed]  # type: ignore[union-attr]
        slow = max(timed, key=lambda r: r.timings.total)  # type: ignore[union-attr]
        med = _median(totals)
        phases = dict(slow.timings.phases)  # type: ignore[union-attr]
        dom = max(phases, key=lambda k: phases[k]) if phases else "?"
        host_tot: dict[str, list[float]] = defaultdict(list)
        for r in timed:
            host_tot[r.host or "?"].append(r.timings.total)  # type: ignore[union-attr]
        host_med = _median([max(v) for v in host_tot.values()])
        slow_host = max(host_tot, key=lambda h: max(host_tot[h]))
        outlier = len(host_tot) >= 3 and max(host_tot[slow_host]) > max(3 * host_med, host_med + 5)
        boot_share = phases.get("bootstrap", 0) / slow.timings.total if slow.timings.total else 0  # type: ignore[union-attr]
        out.append({"comm": c.key, "nranks": c.nranks, "timed": len(timed), "max_s": round(slow.timings.total, 2),  # type: ignore[union-attr]
                    "median_s": round(med, 2), "slow_rank": slow.rank, "slow_host": slow.host or "?",
                    "phase": dom, "phase_s": round(phases.get(dom, 0.0), 2),
                    "bootstrap_share": round(boot_share, 2), "outlier": outlier,
                    "any_flag": outlier or (boot_share > 0.5 and slow.timings.total > 5),  # type: ignore[union-attr]
                    "bootstrap_dominates": boot_share > 0.5 and slow.timings.total > 5,  # type: ignore[union-attr]
                    "evidence": [slow.timings]})
    return out


# ---------------------------------------------------------------------- consistency

_CONSISTENT_ENV = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_IB_GID_INDEX", "NCCL_NET",
                   "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NET_GDR_LEVEL", "NCCL_ALGO", "NCCL_PROTO",
                   "NCCL_CROSS_NIC", "NCCL_IB_TC", "NCCL_BUFFSIZE", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE")


@fact
def config_minority(model: JobModel) -> list[Fact]:
    """Settings where a minority of hosts differs from the majority (env, GDR, IB device count)."""
    out: list[Fact] = []
    procs = [p for p in model.processes.values() if p.host]
    if len({p.host for p in procs}) < 2:
        return out
    # processes grouped by their values of the watched settings: a handful of groups
    # however many ranks, so the per-setting pass below does not touch every process
    groups: dict[tuple[str | None, ...], tuple[set[str], Process]] = {}
    for p in procs:
        sig = tuple(map(p.env.get, _CONSISTENT_ENV))
        g = groups.get(sig)
        if g is None:
            groups[sig] = ({p.host or "?"}, p)
        else:
            g[0].add(p.host or "?")
    for i, name in enumerate(_CONSISTENT_ENV):
        vals: dict[str, set[str]] = defaultdict(set)
        evs: dict[str, E.Event] = {}
        for sig, (hosts, first) in groups.items():
            v = sig[i] if sig[i] is not None else "(unset)"
            vals[v] |= hosts
            if "env:" + name in first.evidence:  # a set value always has its env line
                evs.setdefault(v, first.evidence["env:" + name])
        out.extend(_minority(name, vals, evs))
    ibn: dict[str, set[str]] = defaultdict(set)
    ibev: dict[str, E.Event] = {}
    for p in procs:
        if p.ib_devices:
            key = str(len(p.ib_devices))
            ibn[key].add(p.host or "?")
            ibev.setdefault(key, p.evidence["net_ib_devices"])
    out.extend(_minority("number of NET/IB devices", ibn, ibev))
    gdr: dict[str, set[str]] = defaultdict(set)
    for p in procs:
        if p.net_conns:
            gdr["GDR on" if p.gdr_conns else "GDR off"].add(p.host or "?")
    out.extend(_minority("GPUDirect RDMA on NET hops", gdr, {}, allow_no_evidence=True))
    return out


def _minority(name: str, vals: dict[str, set[str]], evs: dict[str, E.Event],
              allow_no_evidence: bool = False) -> list[Fact]:
    if len(vals) < 2:
        return []
    major = max(vals, key=lambda v: len(vals[v]))
    out = []
    for v, hosts in vals.items():
        if v == major or len(hosts) >= len(vals[major]):
            continue
        ev = [e for e in (evs.get(v), evs.get(major)) if e is not None]
        if not ev and not allow_no_evidence:
            continue
        out.append({"setting": name, "value": v, "majority": major, "hosts": ", ".join(sorted(hosts)[:8]),
                    "nhosts_minority": len(hosts), "nhosts_majority": len(vals[major]), "evidence": ev})
    return out


# ---------------------------------------------------------------------- topology & bandwidth


@fact
def nccltests_result(model: JobModel) -> list[Fact]:
    """Peak bus bandwidth of an nccl-tests run, where it saturates, and #wrong errors."""
    rows: list[E.NcclTestsRow] = model.nccltests_rows
    if not rows:
        return []
    best = max(rows, key=lambda r: max(r.busbw, r.ip_busbw or 0))
    peak = max(best.busbw, best.ip_busbw or 0)
    sat = next((r for r in sorted(rows, key=lambda r: r.size) if max(r.busbw, r.ip_busbw or 0) >= 0.9 * peak), best)
    wrong = [r for r in rows if _nonzero(r.wrong) or _nonzero(r.ip_wrong)]
    nets = Counter(p.network for p in model.processes.values() if p.network)
    hosts = {p.host for p in model.processes.values() if p.host}
    hosts |= {ev.test_host for ev in model.events.get("nccltests_rank", ()) if getattr(ev, "test_host", None)}  # type: ignore[attr-defined]
    nics = max((len({d.hca for d in p.ib_devices}) for p in model.processes.values()), default=0)
    network = nets.most_common(1)[0][0] if nets else "?"
    # What the log itself says the fabric should give: an RDMA NIC of the last decade runs at
    # >= 100 Gb/s (12.5 GB/s), and a multi-node allreduce's busbw approaches the NICs' sum.
    expected = round(nics * _NIC_FLOOR_GBS, 1) if nics and len(hosts) > 1 and network.startswith("IB") else None
    return [{"peak_busbw": round(peak, 2), "peak_size": best.size, "saturates_at": sat.size, "rows": len(rows),
             "wrong_rows": len(wrong), "network": network, "nhosts": len(hosts), "nics": nics,
             "expected_min_busbw": expected if expected is not None else "?",
             "far_below": expected is not None and peak < 0.3 * expected,
             "evidence": [best] + wrong[:5]}]


#: GB/s one RDMA NIC gives at least (100 Gb/s); 200/400 Gb/s NICs give 2-4x this
_NIC_FLOOR_GBS = 12.5


def _nonzero(w: Any) -> bool:
    if w in (None, "N/A"):
        return False
    try:
        return float(w) != 0
    except (TypeError, ValueError):
        return False


@fact
def init_stopped_silently(model: JobModel) -> list[Fact]:
    """A single-node job whose log stops after ring/tree set-up with no COMPLETE and no error.

    That is what a P2P/NVLink hang looks like from the log: NCCL built its graph, started
    connecting GPUs inside the node, and nothing was printed again.
    """
    if model.error_events():
        return []
    hosts = {p.host for p in model.processes.values() if p.host}
    out: list[Fact] = []
    for c in model.comms.values():
        if c.graph_event is None or any(r.complete is not None for r in c.ranks.values()):
            continue
        nranks = c.nranks or max((len(o) for o in c.rings.values()), default=0)
        if nranks < 2:
            continue
        out.append({"comm": c.key, "nranks": nranks, "nhosts": len(hosts), "host": ", ".join(sorted(hosts)) or "?",
                    "channels": len(c.rings), "evidence": [c.graph_event]})
    return out


@fact
def init_missing_ranks(model: JobModel) -> list[Fact]:
    """Ranks of a communicator that never logged Init START while most others did.

    Needs most of the communicator's ranks in the logs (an excerpt with a few lines is
    not evidence of absence), and no rank past Init COMPLETE, or errors in the job.
    Where the ranks of a host are contiguous, the missing rank's host is named from its
    neighbours.
    """
    out: list[Fact] = []
    failed = bool(model.error_events())
    for c in model.comms.values():
        if not c.nranks or c.nranks < 2:
            continue
        # "Init START" exists from NCCL 2.18.3 on; older logs say nothing about ranks that are absent
        started = {r for r, st in c.ranks.items() if st.start is not None and st.start.phase == "START"}
        seen = started | {r for r, st in c.ranks.items() if st.complete is not None}
        missing = sorted(set(range(c.nranks)) - seen)
        if not missing or not started or len(seen) < max(2, 0.75 * c.nranks):
            continue
        completed = sum(1 for st in c.ranks.values() if st.complete is not None)
        if completed and not failed:
            continue
        hosts = _guess_hosts(c, missing)
        evidence = [st.start for st in sorted(c.ranks.values(), key=lambda s: s.rank)[:3] if st.start is not None]
        out.append({"comm": c.key, "nranks": c.nranks, "missing": ranges(missing), "nmissing": len(missing),
                    "seen": len(seen), "completed": completed, "host": hosts, "evidence": evidence})
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


@fact
def stragglers(model: JobModel) -> list[Fact]:
    """Ranks whose training steps are consistently slower than the others'.

    Per rank (or per file when the rank is unknown) the median of its step times; a
    straggler's median is above the job's median by more than 10% and by more than
    three median absolute deviations of the per-rank medians.
    """
    per = {k: _median(v) for k, v in model.step_times.items() if len(v) >= 5}
    if len(per) < 4:
        return []
    meds = list(per.values())
    job = _median(meds)
    mad = _median(abs(x - job) for x in meds) or job * 0.01
    hosts = global_rank_hosts(model)
    out: list[Fact] = []
    for key, med in sorted(per.items(), key=lambda kv: -kv[1]):
        if med > job * 1.10 and med - job > 3 * mad:
            rank = key if isinstance(key, int) else None
            out.append({"rank": rank if rank is not None else "?", "who": f"rank {rank}" if rank is not None else str(key),
                        "host": hosts.get(rank, "?") if rank is not None else "?", "median_ms": round(med, 1),
                        "job_median_ms": round(job, 1), "slower_pct": round(100 * (med / job - 1)),
                        "others": len(per) - 1, "steps": len(model.step_times[key]),
                        "evidence": [model.step_evidence[key]]})
    return out


# ---------------------------------------------------------------------- RAS (NCCL 2.24+)


@fact
def ras_dead_peers(model: JobModel) -> list[Fact]:
    """Peers NCCL's RAS declared dead or whose keep-alive expired, one record per peer.

    A RAS peer is a process, named by ``ip<port>``; the host is found from the bootstrap
    interface addresses the processes printed (``Bootstrap : Using ib0:10.0.0.18<0>``).
    ``reporters`` counts the hosts that saw it: one host reporting many peers points at
    that host's own network, many hosts reporting one peer at the peer.
    """
    by_peer: dict[str, list[E.Event]] = {}
    for ev in model.events.get("ras_peer", ()):
        if ev.is_problem and getattr(ev, "peer", None):
            by_peer.setdefault(ev.peer, []).append(ev)  # type: ignore[attr-defined]
    if not by_peer:
        return []
    ip_host: dict[str, str] = {}
    for p in model.processes.values():
        for i in p.bootstrap:
            if i.addr and p.host:
                ip_host.setdefault(i.addr, p.host)
    out: list[Fact] = []
    for peer, evs in by_peer.items():
        ip = peer.split("<", 1)[0]
        dead = [e for e in evs if getattr(e, "what", "") == "dead"]
        reporters = sorted({e.host for e in evs if e.host})
        host = ip_host.get(ip, ip)  # the finding is about the peer, not about who reported it
        out.append({"peer": peer, "peer_host": host, "host": host, "declared_dead": bool(dead),
                    "reporters": len(reporters), "reporter_hosts": ", ".join(reporters[:8]) or "?",
                    "evidence": sorted(evs, key=lambda e: getattr(e, "what", "") != "dead")})
    out.sort(key=lambda f: (not f["declared_dead"], -f["reporters"], f["peer"]))
    return out
