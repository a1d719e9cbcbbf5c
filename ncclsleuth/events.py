"""Typed events: what one log line (or one multi-line block) means.

Every event carries its origin (file, line) so a finding can quote it as evidence,
plus whatever the line's envelope told us (host, pid, tid, device, launcher rank,
timestamp).  The typed fields come from the grammar (`ncclsleuth/grammar`).

Events are slotted classes: a 10,000-rank job produces millions of them and they
must be cheap.  They are immutable by convention, not at run time: nothing changes an
event after the parser builds it, and a frozen dataclass's ``__init__`` (one
``object.__setattr__`` per field) cost 1.66 us an event against 0.47 us.  They are
not dataclasses either: ``@dataclass`` on ~75 classes took 27 ms of every start-up
(one compile per generated method, ``inspect.signature`` for each missing docstring).
:class:`_EventMeta` builds the same slotted class with the same keyword/positional
``__init__``, compiled the first time a kind is built (a run meets a few dozen kinds).
Value types (interfaces, IB devices, tree edges) stay frozen dataclasses: they compare
and hash by value.  ``to_dict()`` returns builtins only, so JSON output and the
per-file results shipped between processes never depend on these classes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from .cache import CODE

#: Event kinds that represent a problem line: each must be explained or listed.
ERROR_KINDS: set[str] = set()
#: kind name -> event class
REGISTRY: dict[str, type[Event]] = {}


def _lazy_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """First construction of a class: compile its real ``__init__``, then use it."""
    _compile_init(type(self))(self, *args, **kwargs)


def _compile_init(cls: type) -> Any:
    """``def __init__(self, source, line, text, host=None, ...)``: one assignment per
    field, defaults as declared, the signature a dataclass would have."""
    names = cls.FIELDS  # type: ignore[attr-defined]
    defaults = cls._DEFAULTS  # type: ignore[attr-defined]
    body = "".join(f"\n    self.{n} = {n}" for n in names) or "\n    pass"
    ns: dict[str, Any] = {}
    exec(CODE.compile(f"def __init__(self, {', '.join(names)}):{body}", "<event-init>"), ns)  # noqa: S102 - our field names
    init = ns["__init__"]
    init.__defaults__ = tuple(defaults[n] for n in names[len(names) - len(defaults):])
    init.__qualname__ = f"{cls.__name__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
    return init


class _EventMeta(type):
    """Builds each event class with ``__slots__`` for its own annotated fields (ClassVars
    excepted), at class creation: one class per event kind, not a class and a slotted copy.

    ``FIELDS`` lists every field in order (inherited first), ``FIELD_TYPES`` their
    annotation strings and ``_DEFAULTS`` their defaults; as with a dataclass, a field
    without a default may not follow one that has a default.
    """

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _EventMeta:
        types: dict[str, str] = {}
        defaults: dict[str, Any] = {}
        for base in bases:
            types.update(getattr(base, "FIELD_TYPES", {}))
            defaults.update(getattr(base, "_DEFAULTS", {}))
        own = []
        for field, ann in ns.get("__annotations__", {}).items():
            if str(ann).startswith(("ClassVar", "typing.ClassVar")):
                continue
            if field not in types and any(hasattr(b, field) for b in bases):
                raise TypeError(f"{name}.{field}: a field may not shadow the base attribute {field!r}")
            own.append(field)
            types[field] = str(ann)
            if field in ns:
                defaults[field] = ns.pop(field)
            elif defaults:
                raise TypeError(f"{name}.{field}: a field without a default follows one with a default")
        ns["__slots__"] = tuple(own)
        ns["FIELDS"] = tuple(types)
        ns["FIELD_TYPES"] = types
        ns["_DEFAULTS"] = defaults
        ns["__init__"] = _lazy_init
        return super().__new__(mcls, name, bases, ns)


class Event(metaclass=_EventMeta):
    """Common envelope of every event."""

    kind: ClassVar[str] = "event"
    is_error: ClassVar[bool] = False
    FIELDS: ClassVar[tuple[str, ...]]
    FIELD_TYPES: ClassVar[dict[str, str]]

    source: str
    line: int
    text: str
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    dev: int | None = None
    rank: int | None = None
    ts: str | None = None
    level: str | None = None

    def __repr__(self) -> str:
        """As a dataclass repr."""
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({args})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the class and its field values: rebuilt by one ``__init__`` call
        instead of one ``setattr`` per slot (workers ship thousands of events)."""
        return type(self), tuple([getattr(self, n) for n in self.FIELDS])

    def to_dict(self) -> dict[str, Any]:
        """All fields as builtins, ``kind`` first, ``None`` values dropped."""
        out: dict[str, Any] = {"kind": self.kind}
        for name in self.FIELDS:
            v = getattr(self, name)
            if v is None:
                continue
            out[name] = v if type(v) in _SCALARS else plain(v)
        return out

    @property
    def is_problem(self) -> bool:
        """True when this line reports a problem (WARN, exception, error-level log).

        Named so that no event field can shadow it: eleven kinds have a field ``error``
        (the error text), and a property of that name read the empty text as "no problem",
        which dropped their lines from the report."""
        return self.is_error or self.level in ("WARN", "E", "F", "ERROR", "CRITICAL", "FATAL")

    @property
    def wraps_message(self) -> bool:
        """True for a message that carries another one ("watchdog thread terminated with
        exception: <message>"): a message the grammar knows inside it is the better event."""
        return False


_SCALARS = frozenset({str, int, float, bool})
_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    """Field names of an event or value record, in order (``dataclasses.fields`` filters
    on every call)."""
    names = _NAMES.get(cls)
    if names is None:
        fields = getattr(cls, "FIELDS", None)
        names = _NAMES[cls] = fields if fields is not None else tuple(f.name for f in dataclasses.fields(cls))
    return names


def is_record(v: Any) -> bool:
    """True for an event or a value record: fields read as attributes."""
    return isinstance(v, Event) or (hasattr(v, "__dataclass_fields__") and not isinstance(v, type))


def plain(v: Any) -> Any:
    """A field value as ``to_dict`` shows it: value records as dicts, tuples as lists."""
    if isinstance(v, tuple):
        return [plain(x) for x in v]
    if is_record(v):
        return {name: plain(getattr(v, name)) for name in _names(type(v))}
    return v


def register(kind: str, *, error: bool = False) -> Any:
    """Class decorator: give an event class its kind and register it."""

    def deco(cls: type[Event]) -> type[Event]:
        cls.kind = kind
        cls.is_error = error
        REGISTRY[kind] = cls
        if error:
            ERROR_KINDS.add(kind)
        return cls

    return deco


def ev(kind: str, *, error: bool = False):  # type: ignore[no-untyped-def]
    """Shorthand: ``@ev("kind")`` registers an event class under its kind.

    Events compare by identity (each is one line of one file): no ``__eq__``/``__hash__``.
    """

    def deco(cls: type[Event]) -> type[Event]:
        return register(kind, error=error)(cls)

    return deco


# --------------------------------------------------------------------------- values


class _Value:
    """Base of the value records: pickled as (class, field values), rebuilt by one
    ``__init__`` call instead of a frozen dataclass's ``__setstate__`` (one
    ``object.__setattr__`` per field): unpickling a worker's results took 26% less."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), tuple([getattr(self, n) for n in _names(type(self))])


@dataclass(frozen=True, slots=True)
class Iface(_Value):
    """One socket interface: ``[idx]name:addr``."""

    name: str
    addr: str | None = None
    idx: int | None = None


@dataclass(frozen=True, slots=True)
class IbDev(_Value):
    """One NET/IB device: ``[idx]mlx5_0:1/RoCE``."""

    hca: str
    port: int | None
    link: str
    idx: int | None = None
    rail: int | None = None  # 2.30.7 ``[idx]hca:port:rail:plane/link``
    plane: int | None = None


@dataclass(frozen=True, slots=True)
class TreeEdge(_Value):
    """One ``[ch] d0/d1/d2->me->up`` entry of a ``Trees`` line."""

    channel: int
    down: tuple[int, ...]
    me: int
    up: int


# --------------------------------------------------------------------------- NCCL


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


# --------------------------------------------------------------------------- PyTorch


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
        """A dead peer or an expired keep-alive is a problem; a warning is not (yet)."""
        return self.what == "dead" or self.what.endswith("_error")


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
    what: str = ""  # connect_timeout | connect_failed | resolve_failed | socket_timeout | wait_timeout | barrier_timeout | recv_failed | not_listening
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


@ev("traceback", error=True)
class Traceback(Event):
    exc_type: str = ""
    message: str = ""
    start_line: int | None = None
    frames: int = 0
    last_frame: str | None = None


@ev("sync_call")
class SyncCall(Event):
    """A traceback frame or code line inside a barrier/collective: where a rank was waiting."""

    call: str = ""
    code: str = ""


@ev("exception", error=True)
class ExceptionLine(Event):
    exc_type: str = ""
    message: str = ""


@ev("cuda_oom", error=True)
class CudaOom(Event):
    detail: str = ""


@ev("hw_error", error=True)
class HwError(Event):
    what: str = ""  # ecc | xid | fell_off_bus | ...
    detail: str = ""


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


@ev("step_time")
class StepTime(Event):
    """One training step's wall time, as the training loop printed it (for stragglers)."""

    step: int | None = None
    ms: float | None = None


# --------------------------------------------------------------------------- nccl-tests


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


@ev("text")
class Text(Event):
    """A line that matched nothing: kept, never dropped."""


@ev("warn_text", error=True)
class WarnText(Event):
    """A WARN/error line we recognise as a problem but not its meaning."""

    message: str = ""


__all__ = [n for n in dir() if not n.startswith("_")]
