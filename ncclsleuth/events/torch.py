"""Events of PyTorch distributed (ProcessGroupNCCL, c10d stores, torchrun/elastic)."""
from __future__ import annotations

from .base import Event, ev


@ev("watchdog_timeout", error=True)
class WatchdogTimeout(Event):
    pg: str | None = None
    pg_rank: int | None = None
    seq: int | None = None
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    shape: str | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None


@ev("work_status", error=True)
class WorkStatus(Event):
    """``Timeout at NCCL work: N, last enqueued NCCL work: N, last completed NCCL work: N``."""

    what: str = ""  # timeout_at | exception_at | failure_at | dump_signal | update
    pg: str | None = None
    pg_rank: int | None = None
    seq: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None


@ev("desync_report", error=True)
class DesyncReport(Event):
    what: str = ""  # head | never_joined | not_joined | joined_not_finished | started | finished
    seq: int | None = None
    last_finished: int | None = None  # not_joined: the last collective these ranks finished
    op: str | None = None
    ranks: tuple[int, ...] = ()


@ev("pg_abort", error=True)
class PgAbort(Event):
    """ProcessGroupNCCL taking the process down after a failed or timed-out collective
    ("Some NCCL operations have failed or timed out", "Terminating the process after
    attempting to dump debug info, due to ...").  A consequence, never a root cause."""

    what: str = ""  # ops_failed | taking_down | terminating | dump_observed | watchdog_exception
    detail: str | None = None  # terminating: the reason; watchdog_exception: the exception text
    pg: str | None = None
    pg_rank: int | None = None

    @property
    def wraps_message(self) -> bool:
        return self.what == "watchdog_exception"


@ev("collective_mismatch", error=True)
class CollectiveMismatch(Event):
    rank_a: int | None = None
    rank_b: int | None = None
    seq_a: int | None = None
    seq_b: int | None = None
    op_a: str | None = None
    op_b: str | None = None
    shape_a: str | None = None
    shape_b: str | None = None
    differ: str | None = None


@ev("monitored_barrier", error=True)
class MonitoredBarrier(Event):
    """ProcessGroupGloo::monitoredBarrier: rank 0 names the ranks that did not arrive in time
    (``Rank 3 failed to pass monitoredBarrier in 10000 ms``, ``Ranks 1, 3 ...``, ``Rank 3 timed
    out in monitoredBarrier after ...``); any other rank says it arrived and points at rank 0's
    log (``... from rank 0. Please check rank 0 logs for faulty rank.``): not a culprit."""

    what: str = ""  # failed | timeout | waited
    ranks: tuple[int, ...] = ()  # failed/timeout: the ranks that did not arrive; waited: the reporter
    points_to: int | None = None  # waited: the rank whose log names the faulty rank
    timeout_ms: int | None = None


@ev("cpp_abort", error=True)
class CppAbort(Event):
    """A C++ exception that ended the process: ``terminate called after throwing an instance of
    'gloo::EnforceNotMet'`` (then SIGABRT), and gloo's enforce text ``[enforce fail at
    .../pair.cc:456] op.preamble.length <= op.nbytes. 580 vs 548. Received data size doesn't
    match expected size`` (``got`` / ``expected``: the two values the check compared)."""

    what: str = ""  # terminate | enforce
    exc_type: str | None = None
    where: str | None = None
    detail: str | None = None
    got: str | None = None
    expected: str | None = None


@ev("nccl_error", error=True)
class NcclErrorEv(Event):
    where: str | None = None
    reason: str = ""
    nccl_version: str | None = None
    exc_type: str | None = None


@ev("nccl_error_class", error=True)
class NcclErrorClass(Event):
    code: str = ""  # ncclSystemError ...
    detail: str = ""


@ev("store_error", error=True)
class StoreError(Event):
    #: connect_timeout | connect_failed | resolve_failed | socket_timeout | wait_timeout | barrier_timeout |
    #: recv_failed | not_listening | uniqueid
    what: str = ""
    peer_host: str | None = None
    port: int | None = None
    detail: str = ""


@ev("addr_in_use", error=True)
class AddrInUse(Event):
    addr: str | None = None
    port: int | None = None
    detail: str = ""


@ev("rendezvous_error", error=True)
class RendezvousError(Event):
    what: str = ""
    detail: str = ""


@ev("agent_failure", error=True)
class AgentFailure(Event):
    exitcode: int | None = None
    local_rank: int | None = None
    child_pid: int | None = None


@ev("failure_field")
class FailureField(Event):
    """One ``key : value`` line of torchrun's ChildFailedError block."""

    name: str = ""
    value: str = ""
    block: str | None = None  # root_cause | failures


@ev("failure_block_head")
class FailureBlockHead(Event):
    block: str = ""


@ev("heartbeat_stuck", error=True)
class HeartbeatStuck(Event):
    seconds: int | None = None


@ev("pg_options")
class PgOptions(Event):
    pg: str | None = None
    timeout_ms: int | None = None
    size: int | None = None
    global_rank: int | None = None
    nccl_version: str | None = None


@ev("env_deprecated")
class EnvDeprecated(Event):
    old: str = ""
    new: str = ""


@ev("signal_exit")
class SignalExit(Event):
    child_pid: int | None = None
    signal: str = ""
