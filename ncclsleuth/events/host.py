"""Events of what surrounds NCCL on a host: the kernel and the GPU driver, the diagnostic
tools people paste next to a failure (nvidia-smi, ibstat / ibstatus / ibv_devinfo /
show_gids, systemctl, lspci, ulimit, df), crash handlers and their backtraces, and the
network plugins and forks that log through NCCL (aws-ofi-nccl, RCCL).

What each message means is in ``knowledge/neighbours/`` (system.yaml, ofi.yaml,
rccl.yaml); these kinds carry the values the rules reason over.  Problem kinds
(``error=True``) are lines that report a failure whatever their values; a tool's output
(a port's state, a topology cell, a limit) is never a problem by itself: rules decide
what it means in its context (a port Down beside an Active one NCCL uses is harmless).

Values read from a multi-line block (ibstat, nvidia-smi topo -m, nvidia-smi -q,
systemctl status, df, backtraces) come from :mod:`ncclsleuth.parse.blocks`; ``block`` is
the line where that block started, so two tables of one paste stay apart, and ``node``
the host label a parallel shell put before each line (``node1: CA 'mlx5_0'``).
"""
from __future__ import annotations

from .base import Event, ev

# ---------------------------------------------------------------------- kernel and driver


@ev("gpu_xid", error=True)
class GpuXid(Event):
    """``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., <text>`` (dmesg / journalctl -k)."""

    pci: str = ""
    xid: int | None = None
    xid_pid: int | None = None  # the process the driver names ("<unknown>": None)
    process: str | None = None
    detail: str = ""


@ev("driver_error", error=True)
class DriverError(Event):
    """The GPU driver stack refusing to work: client/kernel-module version mismatch, the
    fabric manager's driver version check, nvidia-smi / NVML failing, a GPU that failed
    to initialise or is lost."""

    what: str = ""  # api_mismatch | fm_version_mismatch | nvml_init | no_driver | no_devices | gpu_lost | rminit_failed
    client_version: str | None = None  # the user-space side (client, fabric manager)
    driver_version: str | None = None  # the kernel module's
    device: str | None = None
    detail: str = ""


@ev("oom_kill", error=True)
class OomKill(Event):
    """The kernel OOM killer's victim (``Out of memory: Killed process N (python) ...``), or
    Kubernetes' ``Reason: OOMKilled``."""

    what: str = "killed"  # killed | k8s
    victim_pid: int | None = None
    process: str | None = None
    anon_rss_kb: int | None = None
    shmem_rss_kb: int | None = None
    cgroup: bool = False  # a memory cgroup (container, pod, job) hit its limit, not the node
    detail: str = ""


@ev("pcie_aer", error=True)
class PcieAer(Event):
    """``<dev> <bdf>: PCIe Bus Error: severity=..., type=..., (...)`` (the AER driver)."""

    device: str | None = None
    severity: str = ""  # Corrected | Uncorrected (Non-Fatal) | Uncorrected (Fatal)
    type: str = ""
    detail: str = ""


@ev("iommu_fault", error=True)
class IommuFault(Event):
    """A DMA the IOMMU blocked: ``DMAR: [DMA Read ...] Request device [3b:00.0] fault ...``
    or ``AMD-Vi: Event logged [IO_PAGE_FAULT ...]``."""

    what: str = ""  # dmar | amd_vi
    device: str | None = None
    detail: str = ""


@ev("nic_event", error=True)
class NicEvent(Event):
    """mlx5_core link and module events (``... ens1f0np0: Link down``, ``Port module event``)."""

    what: str = ""  # link_down | module
    device: str | None = None  # PCI address
    netdev: str | None = None
    detail: str = ""


@ev("kernel_module", error=True)
class KernelModule(Event):
    """A kernel module that cannot load (nvidia_peermem's unknown symbols, modprobe failures)."""

    what: str = ""  # unknown_symbol | insert_failed | not_found
    module: str | None = None
    symbol: str | None = None
    detail: str = ""


@ev("ibverbs_warning", error=True)
class IbverbsWarning(Event):
    """``libibverbs: Warning: ...``: a provider that does not load, no user-space driver, a
    small RLIMIT_MEMLOCK, a kernel ABI mismatch.  Harmless or not by the provider it names
    (the knowledge base says which)."""

    what: str = ""  # couldnt_load | no_driver | memlock | kernel_abi
    driver: str | None = None
    bytes: int | None = None
    detail: str = ""


# ---------------------------------------------------------------------- crashes


@ev("crash_signal", error=True)
class CrashSignal(Event):
    """A process killed by a fatal signal, as its crash handler or shell reports it: UCX's
    ``Caught signal 7 (Bus error: ...)``, gdb's ``received signal SIGBUS``, Python's
    faulthandler, the shell's ``Bus error (core dumped)``."""

    signal: str = ""  # SIGBUS, SIGSEGV, SIGABRT, ...
    signum: int | None = None
    tool: str = ""  # ucx | gdb | python | shell
    crash_pid: int | None = None
    detail: str = ""


@ev("stack_frame")
class StackFrame(Event):
    """One frame of a native backtrace (UCX, gdb, glibc backtrace_symbols, PyTorch's
    ``frame #N:``): where the crash, hang or exception was."""

    index: int | None = None
    function: str = ""
    library: str | None = None
    where: str | None = None  # file:line (gdb with symbols, c10 "Exception raised from")
    tool: str = ""  # ucx | gdb | glibc | c10
    nccl: bool = False  # a frame of libnccl / librccl or an nccl* function
    block: int | None = None


# ---------------------------------------------------------------------- diagnostic tools


@ev("tool_output")
class ToolOutput(Event):
    """The first line of a diagnostic tool's block (``CA 'mlx5_0'``, the topo -m header, a
    systemctl unit header, ...): the block reader that takes the next lines starts here."""

    tool: str = ""  # ibstat | ibstatus | ibv_devinfo | show_gids | topo | service | df | nvsmi_q | c10_stack
    name: str | None = None  # what the header names (the device, the unit, the function)
    node: str | None = None  # a host label before the line (pdsh / clush)
    detail: str = ""


@ev("service_status")
class ServiceStatus(Event):
    """The ``Active:`` line of ``systemctl status <unit>`` (or ``Unit <unit> could not be found.``)."""

    unit: str = ""
    description: str | None = None
    state: str = ""  # active | failed | inactive | activating | deactivating | not-found
    sub: str | None = None  # running | dead | exited | ...
    result: str | None = None  # exit-code | signal | ...
    exit_status: str | None = None  # "1/FAILURE" from the Process: line
    node: str | None = None
    block: int | None = None


@ev("topo_row")
class TopoRow(Event):
    """One device row of ``nvidia-smi topo -m``: the connection type to every column."""

    device: str = ""
    columns: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()
    cpu_affinity: str | None = None
    numa: str | None = None
    node: str | None = None
    block: int | None = None


@ev("topo_nic")
class TopoNic(Event):
    """``NIC0: mlx5_0`` of the NIC legend under a topology matrix."""

    nic: str = ""
    name: str = ""
    node: str | None = None
    block: int | None = None


@ev("ib_port")
class IbPort(Event):
    """One RDMA port as ibstat / ibstatus / ibv_devinfo show it (the line is its state line)."""

    device: str = ""
    port: int | None = None
    state: str | None = None  # Active | Down | Initializing | Armed
    phys_state: str | None = None  # LinkUp | Polling | Disabled | Sleep | LinkErrorRecovery | ...
    link_layer: str | None = None  # InfiniBand | Ethernet
    rate: str | None = None
    base_lid: str | None = None
    sm_lid: str | None = None
    active_mtu: str | None = None
    tool: str = ""
    node: str | None = None
    block: int | None = None


@ev("ib_gid")
class IbGid(Event):
    """One GID table entry (ibv_devinfo -v ``GID[  3]: ::ffff:10.0.0.1, RoCE v2``, a show_gids
    row, ibstatus' default gid)."""

    device: str = ""
    port: int | None = None
    index: int | None = None
    gid: str = ""
    gid_type: str | None = None  # RoCE v1 | RoCE v2 | None (IB, or not shown)
    ipv4: str | None = None
    netdev: str | None = None
    tool: str = ""
    node: str | None = None
    block: int | None = None


@ev("ib_netdev")
class IbNetdev(Event):
    """``mlx5_0 port 1 ==> ens1f0np0 (Up)`` (ibdev2netdev)."""

    device: str = ""
    port: int | None = None
    netdev: str = ""
    up: bool = False
    node: str | None = None


@ev("nvsmi_header")
class NvsmiHeader(Event):
    """``| NVIDIA-SMI 535.104.05  Driver Version: 535.104.05  CUDA Version: 12.2 |``."""

    smi_version: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None


@ev("nvsmi_gpu")
class NvsmiGpu(Event):
    """A GPU of the ``nvidia-smi`` table (its first row line; ``errors`` from the second)."""

    index: int | None = None
    name: str = ""
    bus_id: str | None = None
    uncorr_ecc: str | None = None  # the Volatile Uncorr. ECC column: a count, N/A or ERR!
    errors: bool = False  # ERR! in the GPU's fields: NVML could not read them
    block: int | None = None


@ev("nvsmi_value")
class NvsmiValue(Event):
    """A diagnostic value of ``nvidia-smi -q`` (ECC counters, remapped rows, retired pages,
    fabric state, clock event reasons, versions) with the section it sits in."""

    gpu: str | None = None  # the GPU's bus id
    section: str = ""  # "ECC Errors/Volatile", "Remapped Rows", "Fabric", ...
    key: str = ""
    value: str = ""
    node: str | None = None
    block: int | None = None


@ev("pci_acs")
class PciAcs(Event):
    """``ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ ...`` of ``lspci -vvv``."""

    flags: str = ""
    src_valid: bool = False
    req_redir: bool = False
    cmplt_redir: bool = False


@ev("pci_link")
class PciLink(Event):
    """``LnkSta: Speed 16GT/s, Width x8 (downgraded)`` of ``lspci -vvv``."""

    speed: str | None = None
    width: str | None = None
    speed_downgraded: bool = False
    width_downgraded: bool = False


@ev("ulimit_value")
class UlimitValue(Event):
    """A line of ``ulimit -a``: ``max locked memory (kbytes, -l) 64``."""

    resource: str = ""  # memlock | nofile | nproc | stack | ...
    name: str = ""
    unit: str | None = None
    value: str = ""
    amount: int | None = None  # None: unlimited (or not a number)


@ev("shm_size")
class ShmSize(Event):
    """The ``/dev/shm`` row of ``df`` (under its header)."""

    filesystem: str = ""
    size: str = ""
    used: str = ""
    avail: str = ""
    use_pct: int | None = None
    size_bytes: int | None = None
    mount: str = "/dev/shm"
    node: str | None = None


# ---------------------------------------------------------------------- plugins and forks


@ev("ofi_provider")
class OfiProvider(Event):
    """aws-ofi-nccl's ``NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)``."""

    provider: str = ""
    fabric: str | None = None
    nics: int | None = None


@ev("ofi_version")
class OfiVersion(Event):
    """aws-ofi-nccl's version banners: the plugin's own and libfabric's."""

    what: str = ""  # plugin | libfabric
    version: str = ""


@ev("rccl_version")
class RcclVersion(Event):
    """RCCL's banner (``RCCL version : 2.22.3-HEAD:271856d``, ``RCCL version 2.18.3+hip6.0``)."""

    version: str = ""
    detail: str = ""
