"""Events of NCCL's own lines (``host:pid:tid [dev] NCCL INFO|WARN ...``): versions, settings,
networks, communicators, graphs, transports, errors, aborts, RAS."""
from __future__ import annotations

from typing import Any

from .base import Event, ev
from .values import IbDev, Iface, TreeEdge


@ev("nccl_version")
class NcclVersion(Event):
    version: str = ""
    cuda: str | None = None


@ev("env_setting")
class EnvSetting(Event):
    name: str = ""
    value: str = ""
    origin: str = "nccl"  # nccl | torch | config


@ev("bootstrap_iface")
class BootstrapIface(Event):
    ifaces: tuple[Iface, ...] = ()


@ev("net_ib_devices")
class NetIbDevices(Event):
    devices: tuple[IbDev, ...] = ()
    oob: Iface | None = None
    plugin: str | None = None  # NET/IB vs NET/IBext etc.


@ev("net_ib_none")
class NetIbNone(Event):
    plugin: str | None = None


@ev("net_gdr")
class NetGdr(Event):
    """Whether GPUDirect RDMA is used: for a NIC (``scope`` "hca": the net plugin reports it
    cannot register GPU memory, i.e. no nvidia-peermem/nv_peer_mem module and no DMA-BUF) or
    for one GPU-NIC pair (``scope`` "path": their PCI distance against NCCL_NET_GDR_LEVEL)."""

    enabled: bool = False
    net: str | None = None  # NET/IB, NET/Socket, ... (None: 2.21+ path lines carry no net)
    scope: str = ""  # hca | path
    hca: str | None = None
    detail: str = ""  # what follows "for": the GPU, the HCA, the distance, "(no module)"


@ev("net_socket_ifaces")
class NetSocketIfaces(Event):
    ifaces: tuple[Iface, ...] = ()
    count: int | None = None


@ev("net_iface_paths")
class NetIfacePaths(Event):
    """2.3 ``CUDA Dev 0, IP Interfaces : lo(SOC) eth0(PXB)``: candidate interfaces and their PCI path type."""

    cuda_dev: int | None = None
    paths: tuple[tuple[str, str], ...] = ()


@ev("net_selected")
class NetSelected(Event):
    network: str = ""


@ev("net_plugin")
class NetPlugin(Event):
    status: str = ""  # loaded | not_found | symbol_missing | internal | failed
    name: str | None = None
    detail: str | None = None


@ev("ibverbs_missing")
class IbverbsMissing(Event):
    library: str = "libibverbs.so"


@ev("comm_init")
class CommInit(Event):
    phase: str = ""  # START | COMPLETE
    func: str | None = None
    comm: str | None = None
    comm_rank: int | None = None
    nranks: int | None = None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None
    comm_id: str | None = None
    parent: str | None = None
    color: int | None = None
    key: int | None = None


@ev("comm_info")
class CommInfo(Event):
    comm: str | None = None
    comm_rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    local_rank: int | None = None


@ev("comm_end")
class CommEnd(Event):
    phase: str = ""  # Destroy COMPLETE | Abort START | Abort COMPLETE ...
    comm: str | None = None
    comm_rank: int | None = None
    nranks: int | None = None


@ev("init_timings")
class InitTimings(Event):
    func: str | None = None
    comm_rank: int | None = None
    nranks: int | None = None
    total: float = 0.0
    phases: tuple[tuple[str, float], ...] = ()


@ev("bootstrap_timings")
class BootstrapTimings(Event):
    total: float = 0.0
    phases: tuple[tuple[str, float], ...] = ()


@ev("ring")
class Ring(Event):
    channel: int = 0
    nchannels: int | None = None
    order: tuple[int, ...] = ()
    truncated: bool = False


@ev("trees")
class Trees(Event):
    edges: tuple[TreeEdge, ...] = ()


@ev("channel_conn")
class ChannelConn(Event):
    channel: int = 0
    conn_index: int | None = None
    src: int = 0
    src_dev: str | None = None
    dst: int = 0
    dst_dev: str | None = None
    direction: str | None = None  # send | receive | None (p2p/shm)
    transport: str = ""  # P2P | SHM | NET | COLLNET
    via: str = ""  # everything after "via "
    net: str | None = None  # IB | Socket | plugin name (NET only)
    nic: int | None = None
    proxy_rank: int | None = None
    gdr: bool = False


def via_fields(via: str) -> dict[str, Any]:
    """The fields of a :class:`ChannelConn`'s ``via`` text: ``NET/IB/0/GDRDMA``,
    ``NET/IB/1(0)/GDRDMA``, ``P2P/IPC/read``, ``SHM/direct/direct``.

    Here, next to the event, because both the builder (from the grammar) and the model
    (the connection lines it folds without building events) read it."""
    v = via.strip()
    if v.startswith("direct shared memory"):
        return {"transport": "SHM"}
    parts = v.split("/")
    head = parts[0].upper() if parts else ""
    f: dict[str, Any] = {"transport": head if head in ("P2P", "SHM", "NET", "COLLNET") else parts[0]}
    if head == "NET" and len(parts) > 1:
        f["net"] = parts[1]
        if len(parts) > 2:
            nic = parts[2]
            if "(" in nic:
                nic, proxy = nic.split("(", 1)
                f["proxy_rank"] = as_int(proxy.rstrip(")"))
            f["nic"] = as_int(nic)
        f["gdr"] = "GDRDMA" in v
    return f


def as_int(s: str) -> int | None:
    """An integer (decimal, else hex), None when it is neither (how the builder converts numbers)."""
    try:
        return int(s)
    except ValueError:
        try:
            return int(s, 16)
        except ValueError:
            return None


@ev("connected")
class Connected(Event):
    what: str = ""
    pxn: int | None = None
    gdr: int | None = None


@ev("nvls")
class Nvls(Event):
    available: bool | None = None
    detail: str = ""


@ev("channels_summary")
class ChannelsSummary(Event):
    coll: int | None = None
    nvls: int | None = None
    p2p: int | None = None
    collnet: int | None = None
    p2p_per_peer: int | None = None


@ev("err_trace")
class ErrTrace(Event):
    file: str = ""
    fline: int = 0
    code: int = 0
    thread: str | None = None
    func: str | None = None  # 2.30.7 ``file:line (func) -> code``
    error: str | None = None  # ``-> code (strerror)`` (2.18..)


@ev("socket_error", error=True)
class SocketError(Event):
    op: str = ""  # connect | accept | recv | send | closed | poll | listen
    peer: str | None = None
    error: str = ""
    func: str | None = None


@ev("socket_retry")
class SocketRetry(Event):
    peer: str | None = None
    error: str = ""
    func: str | None = None


@ev("call_retry")
class CallRetry(Event):
    """``Call to <call> returned <error>, retrying``: a call NCCL repeats, no failure. SYSCHECKSYNC
    prints it for EINTR, EWOULDBLOCK and EAGAIN only (src/include/checks.h, 2.3-2.30); up to 2.11
    the socket connect loop also printed it for ECONNREFUSED/ETIMEDOUT every 1000th retry
    (src/include/socket.h). A call that then fails for good prints its own WARN."""

    call: str = ""
    error: str = ""


@ev("no_interface", error=True)
class NoInterface(Event):
    what: str = ""


@ev("bootstrap_error", error=True)
class BootstrapError(Event):
    error: str = ""


@ev("ibv_error", error=True)
class IbvError(Event):
    call: str = ""
    errno: int | None = None
    error: str = ""
    hca: str | None = None
    port: int | None = None
    cur_state: str | None = None
    next_state: str | None = None
    gid_index: int | None = None
    local_gid: str | None = None
    remote_gid: str | None = None


@ev("ibv_retry")
class IbvRetry(Event):
    """INFO ``Call to ibv_modify_qp failed with ..., retrying N/M after T msec of sleep`` (2.24..)."""

    call: str = ""
    errno: int | None = None
    error: str = ""
    hca: str | None = None
    port: int | None = None
    cur_state: str | None = None
    next_state: str | None = None
    gid_index: int | None = None
    local_gid: str | None = None
    remote_gid: str | None = None
    attempt: int | None = None
    max_attempts: int | None = None


@ev("ib_completion_error", error=True)
class IbCompletionError(Event):
    peer: str | None = None
    status: int = 0
    status_name: str | None = None
    opcode: str | None = None
    vendor_err: int | None = None
    request: str | None = None
    local_gid: str | None = None
    remote_gid: str | None = None
    hca: str | None = None
    plugin: str | None = None


@ev("ib_async_event", error=True)
class IbAsyncEvent(Event):
    hca: str | None = None
    port: int | None = None
    event: str = ""
    fatal: bool = False


@ev("duplicate_gpu", error=True)
class DuplicateGpu(Event):
    rank_a: int | None = None
    rank_b: int | None = None
    device: str | None = None


@ev("shm_error", error=True)
class ShmError(Event):
    op: str = ""
    path: str | None = None
    size: int | None = None
    error: str | None = None


@ev("cuda_error", error=True)
class CudaError(Event):
    error: str = ""
    code: int | None = None
    origin: str = "nccl"  # nccl | torch

    @property
    def is_problem(self) -> bool:
        """Not on an NCCL INFO line: NCCL prints a CUDA failure at INFO only through
        CUDACHECKIGNORE / CUCHECKIGNORE, "report failure but clear error and continue"
        (src/include/checks.h, src/include/cudawrap.h, 2.3-2.30; '%s:%d Cuda failure ...'),
        where CUDACHECK and its kin WARN and fail the call."""
        return self.level != "INFO"


@ev("alloc_failure", error=True)
class AllocFailure(Event):
    what: str = ""
    bytes: int = 0


@ev("syscall_error", error=True)
class SyscallError(Event):
    call: str = ""
    error: str = ""


@ev("proxy_error", error=True)
class ProxyError(Event):
    error: str = ""
    op_id: str | None = None


@ev("version_mismatch", error=True)
class VersionMismatch(Event):
    detail: str = ""


@ev("topo_error", error=True)
class TopoError(Event):
    error: str = ""
    path: str | None = None
    attr: str | None = None
    node: str | None = None


@ev("nccl_other")
class NcclOther(Event):
    message: str = ""
    subsys: str | None = None
    catalog_id: str | None = None


@ev("nccl_abort", error=True)
class NcclAbort(Event):
    """NCCL putting a communicator in an error state or tearing it down (2.14+):
    ``ncclCommSetAsyncError: error comm %p sets state %d``, ``commReclaim: comm %p (rank = %d)
    in abort, error %d``, ``ncclProxyStop: ... destroys proxy resource error %d``,
    ``%s: communicator was revoked`` (2.28.7+).  The consequence of an earlier error."""

    what: str = ""  # async_error | job_failed | reclaim | proxy_stop | cleanup | revoked
    code: int | None = None  # ncclResult_t
    code_name: str | None = None  # "error 6, remote error", ...; "communicator revoked"
    comm: str | None = None
    comm_rank: int | None = None
    during: str | None = None  # reclaim: abort | commDestroySync


@ev("ras_peer")
class RasPeer(Event):
    """NCCL RAS (2.24+, shown with NCCL_DEBUG_SUBSYS=RAS): ``RAS declaring peer <addr> as DEAD``,
    ``RAS keep-alive timeout warning|error (<n>s) on socket connection with <addr>``,
    ``RAS collective <id> timeout warning (<n>s) -- <n> responses missing``."""

    what: str = ""  # dead | keepalive_warning | keepalive_error | coll_timeout_warning | coll_timeout_error
    peer: str | None = None  # ip<port> of the RAS peer (one per process)
    seconds: int | None = None
    coll: str | None = None
    missing: int | None = None

    @property
    def is_problem(self) -> bool:
        """A dead peer or an expired keep-alive is a problem; a warning is not (yet).  A RAS line
        at a problem level (a WARN) is one whatever its fields say."""
        return self.what == "dead" or self.what.endswith("_error") or Event.is_problem.fget(self)  # type: ignore[attr-defined]
