"""Facts from nccl-tests results: bandwidth below what the network should give, wrong results."""
from __future__ import annotations

from collections import Counter
from typing import Any

from ... import events as E
from ..job import JobModel
from .base import Record, fact


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
