"""Events of nccl-tests output (``all_reduce_perf`` and friends): ranks, result rows, failures."""
from __future__ import annotations

from .base import Event, ev


@ev("nccltests_rank")
class NcclTestsRank(Event):
    test_rank: int = 0
    group: int | None = None
    test_pid: int | None = None
    test_host: str | None = None
    device: int | None = None
    bus_id: str | None = None
    gpu_name: str | None = None


@ev("nccltests_row")
class NcclTestsRow(Event):
    size: int = 0
    count: int = 0
    dtype: str = ""
    redop: str | None = None
    root: int | None = None
    time_us: float = 0.0
    algbw: float = 0.0
    busbw: float = 0.0
    wrong: str | None = None
    ip_time_us: float | None = None
    ip_algbw: float | None = None
    ip_busbw: float | None = None
    ip_wrong: str | None = None


@ev("nccltests_avg_bw")
class NcclTestsAvgBw(Event):
    busbw: float = 0.0


@ev("nccltests_failure", error=True)
class NcclTestsFailure(Event):
    where: str | None = None
    message: str = ""
    what: str | None = None  # NCCL | CUDA | ... (``Test NCCL failure``)


@ev("nccltests_oob")
class NcclTestsOob(Event):
    count: int = 0
