"""Facts from nccl-tests results: bandwidth below what the network should give, wrong results."""
from __future__ import annotations

from collections import Counter
from typing import Any

from ... import events as E
from ..job import JobModel
from .base import Record, fact, median


class NcclTestsResult(Record):
    peak_busbw: float
    peak_size: int
    saturates_at: int
    rows: int
    wrong_rows: int
    network: str
    nhosts: int
    nics: int
    expected_min_busbw: float | str
    far_below: bool


@fact(NcclTestsResult)
def nccltests_result(model: JobModel) -> list[NcclTestsResult]:
    """Peak bus bandwidth of an nccl-tests run, where it saturates, and #wrong errors."""
    rows: list[E.NcclTestsRow] = model.nccltests_rows
    if not rows:
        return []
    best = max(rows, key=lambda r: max(r.busbw, r.ip_busbw or 0))
    peak = max(best.busbw, best.ip_busbw or 0)
    ranks = {ev.test_rank for ev in model.events.get("nccltests_rank", ())}  # type: ignore[attr-defined]
    if peak == 0 and len(ranks) == 1 and not any(_nonzero(r.wrong) or _nonzero(r.ip_wrong) for r in rows):
        # one rank: nccl-tests defines busbw as algbw * 2(n-1)/n for all_reduce, (n-1)/n for the
        # others (doc/PERFORMANCE.md), 0 for n = 1: there is no bus bandwidth to report
        return []
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
             "evidence": [best, *wrong[:5]]}]


#: GB/s one RDMA NIC gives at least (100 Gb/s); 200/400 Gb/s NICs give 2-4x this
_NIC_FLOOR_GBS = 12.5


def _nonzero(w: Any) -> bool:
    if w in (None, "N/A"):
        return False
    try:
        return float(w) != 0
    except (TypeError, ValueError):
        return False


class NcclTestsHostOutlier(Record):
    host: str
    peak_busbw: float
    others_busbw: float  # the median of the other hosts' peaks
    ratio: float  # its peak over the others'
    nhosts: int  # the other hosts compared


#: a host whose nccl-tests peak is below this share of the other hosts' is named
SLOW_HOST_SHARE = 0.7


@fact(NcclTestsHostOutlier)
def nccltests_host_outlier(model: JobModel) -> list[NcclTestsHostOutlier]:
    """nccl-tests run on each node (one output per host, as a node health check does it):
    the host whose peak bus bandwidth is well below the other hosts', named with the ratio.
    A run's host is the ``on <host>`` of its ``#  Rank 0 ... on <host> device ...`` lines (the
    hosts of one file: one per file, or the run spans hosts and is not a per-node result)."""
    hosts: dict[str, set[str]] = {}
    for ev in model.events.get("nccltests_rank", ()):
        assert isinstance(ev, E.NcclTestsRank)
        if ev.test_host:
            hosts.setdefault(ev.source, set()).add(ev.test_host)
    src_host = model.source_hosts()
    best: dict[str, E.NcclTestsRow] = {}
    for r in model.nccltests_rows:
        cur = best.get(r.source)
        if cur is None or _bw(r) > _bw(cur):
            best[r.source] = r
    per_host: dict[str, E.NcclTestsRow] = {}
    for src, row in best.items():
        hs = hosts.get(src) or ({src_host[src]} if src in src_host else set())
        if len(hs) == 1:
            h = next(iter(hs))
            if h not in per_host or _bw(row) > _bw(per_host[h]):
                per_host[h] = row
    if len(per_host) < 3:
        return []  # with two hosts, which one is slow is not an outlier question
    out: list[NcclTestsHostOutlier] = []
    for h, row in sorted(per_host.items(), key=lambda kv: _bw(kv[1])):
        med = median([_bw(r) for k, r in per_host.items() if k != h])
        if med <= 0 or _bw(row) >= SLOW_HOST_SHARE * med or (len(out) + 1) * 3 > len(per_host):
            break
        out.append({"host": h, "peak_busbw": round(_bw(row), 2), "others_busbw": round(med, 2),
                    "ratio": round(_bw(row) / med, 2), "nhosts": len(per_host) - 1,
                    "evidence": [row, max((r for k, r in per_host.items() if k != h), key=_bw)]})
    return out


def _bw(r: E.NcclTestsRow) -> float:
    return max(r.busbw, r.ip_busbw or 0)
