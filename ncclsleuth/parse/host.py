"""Grammar fields to event fields for the lines around NCCL (the grammar's host_msg rules,
events in :mod:`ncclsleuth.events.host`): kernel and driver lines, crash reports, ulimit,
the first lines of tool blocks, aws-ofi-nccl and RCCL banners.

Like :mod:`.build`, this depends on nothing but the field strings (and the text before
the message, ``pre``: where the kernel puts the device, ``mlx5_core 0000:3b:00.0 ens1f0np0:``,
and a parallel shell its host label, ``node1:``), so the shape cache can replay it.
``build`` merges :data:`ALIASES` and :data:`FIXERS` into its own tables and calls
:data:`PRE_FIXERS` with the text before the message.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..util.rxstore import rx

Fields = dict[str, Any]

# grammar rule (alias) -> (event kind, fixed fields)
ALIASES: dict[str, tuple[str, Fields]] = {
    "driver_api_mismatch": ("driver_error", {"what": "api_mismatch"}),
    "driver_rminit_failed": ("driver_error", {"what": "rminit_failed"}),
    "driver_fm_mismatch": ("driver_error", {"what": "fm_version_mismatch"}),
    "driver_nvml_init": ("driver_error", {"what": "nvml_init"}),
    "driver_no_driver": ("driver_error", {"what": "no_driver"}),
    "driver_no_devices": ("driver_error", {"what": "no_devices"}),
    "driver_gpu_lost": ("driver_error", {"what": "gpu_lost"}),
    "oom_killed": ("oom_kill", {"what": "killed"}),
    "oom_k8s": ("oom_kill", {"what": "k8s", "cgroup": True}),
    "iommu_dmar": ("iommu_fault", {"what": "dmar"}),
    "iommu_amd": ("iommu_fault", {"what": "amd_vi"}),
    "nic_link_down": ("nic_event", {"what": "link_down"}),
    "nic_module_event": ("nic_event", {"what": "module"}),
    "module_unknown_symbol": ("kernel_module", {"what": "unknown_symbol"}),
    "module_insert_failed": ("kernel_module", {"what": "insert_failed"}),
    "module_not_found": ("kernel_module", {"what": "not_found"}),
    "ibverbs_couldnt_load": ("ibverbs_warning", {"what": "couldnt_load"}),
    "ibverbs_no_driver": ("ibverbs_warning", {"what": "no_driver"}),
    "ibverbs_memlock": ("ibverbs_warning", {"what": "memlock"}),
    "ibverbs_kernel_abi": ("ibverbs_warning", {"what": "kernel_abi"}),
    "crash_ucx": ("crash_signal", {"tool": "ucx"}),
    "crash_gdb": ("crash_signal", {"tool": "gdb"}),
    "crash_python": ("crash_signal", {"tool": "python"}),
    "crash_shell": ("crash_signal", {"tool": "shell"}),
    "service_head": ("tool_output", {"tool": "service"}),
    "service_not_found": ("service_status", {"state": "not-found"}),
    "ib_ca_head": ("tool_output", {"tool": "ibstat"}),
    "ib_state_ibstat": ("tool_output", {"tool": "ibstat"}),
    "ib_state_ibstatus": ("tool_output", {"tool": "ibstatus"}),
    "ib_state_ibv": ("tool_output", {"tool": "ibv_devinfo"}),
    "topo_head": ("tool_output", {"tool": "topo"}),
    "show_gids_head": ("tool_output", {"tool": "show_gids"}),
    "df_head": ("tool_output", {"tool": "df"}),
    "nvsmi_q_head": ("tool_output", {"tool": "nvsmi_q"}),
    "c10_stack_head": ("tool_output", {"tool": "c10_stack"}),
    "ofi_plugin_version": ("ofi_version", {"what": "plugin"}),
    "ofi_libfabric_version": ("ofi_version", {"what": "libfabric"}),
}

#: the signal a crash report names in words (strsignal()), as its number and name
SIGNALS = {"bus error": ("SIGBUS", 7), "segmentation fault": ("SIGSEGV", 11), "aborted": ("SIGABRT", 6),
           "illegal instruction": ("SIGILL", 4), "floating point exception": ("SIGFPE", 8)}
SIGNUMS = {n: name for name, n in SIGNALS.values()}
_ULIMITS = {"max locked memory": "memlock", "open files": "nofile", "max user processes": "nproc",
            "stack size": "stack"}
_XID_PID = rx(r"^pid=(?:'?<unknown>'?|(\d+))(?:, name=([^,]*))?, ?")
_RSS = rx(r"\b(anon|shmem)-rss:(\d+)kB")
_BDF = rx(r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]")
_DEVICE = rx(r"(?:Request device \[|device=)([0-9a-fA-F:.]+)")
_NETDEV = rx(r"\s([\w.-]+):\s*$")
_NODE = rx(r"^\s*([A-Za-z][\w.-]*):\s+$")
_UCX_PID = rx(r"\[[^:\]\s]+:(\d+):\d+(?::\d+)?\]\s*$")
_SHELL_PID = rx(r"(\d+)\s+$")


def _version(f: Fields, *names: str) -> None:
    for n in names:
        if f.get(n):
            f[n] = str(f[n]).rstrip(".,")


def _b_xid(f: Fields) -> None:
    f["pci"] = str(f.get("pci", "")).strip()[5:-1]  # "(PCI:0000:3b:00)"
    detail = str(f.get("detail", "")).strip()
    m = _XID_PID.match(detail)
    if m:
        f["xid_pid"] = m.group(1)
        name = (m.group(2) or "").strip()
        f["process"] = None if name in ("", "<unknown>") else name
        detail = detail[m.end():]
    f["detail"] = detail


def _b_driver(f: Fields) -> None:
    _version(f, "client_version", "driver_version")
    if "bdf" in f:
        f["device"] = f.pop("bdf")
    if "_rest" in f and not f.get("detail"):
        f["detail"] = f["_rest"]


def _b_oom(f: Fields) -> None:
    head = str(f.pop("_oomhead", ""))
    if head:
        f["cgroup"] = head.startswith("Memory cgroup")
    for kind, kb in _RSS.findall(str(f.get("detail", ""))):
        f[kind + "_rss_kb"] = kb


def _b_aer(f: Fields) -> None:
    f["severity"] = f.pop("aer_severity", "")
    f["type"] = f.pop("aer_type", "")


def _b_iommu(f: Fields) -> None:
    m = _DEVICE.search(str(f.get("detail", "")))
    if m:
        f["device"] = m.group(1)
    if "_dmaop" in f:
        f["detail"] = f"{f['_dmaop']} {f.get('detail', '')}"


def _b_nic(f: Fields) -> None:
    if "_rest" in f and not f.get("detail"):
        f["detail"] = f["_rest"]


def _b_module(f: Fields) -> None:
    q = f.pop("_quoted", None)
    if q:
        f["module"] = q.strip("'")
    if "_rest" in f and not f.get("detail"):
        f["detail"] = f["_rest"]


def _b_ibverbs(f: Fields) -> None:
    q = f.pop("_quoted", None)
    if q:
        f["driver"] = q.strip("'")
    if "_word" in f:
        f["driver"] = f["_word"]


def _b_crash(f: Fields) -> None:
    words = ""
    if "signame" in f:  # gdb: received signal SIGBUS, Bus error.
        f["signal"] = f.pop("signame")
        words = str(f.get("detail", ""))
    elif "_shellsig" in f:
        words = str(f["_shellsig"])
        f["detail"] = (words + " " + str(f.get("_core", "")) + " " + str(f.get("_rest", ""))).strip()
    elif "errtext" in f:  # UCX: (Bus error: nonexistent physical address)
        words = str(f.pop("errtext"))[1:-1]
        f["detail"] = words
    else:  # faulthandler: Fatal Python error: Bus error
        words = str(f.get("detail", ""))
    hit = SIGNALS.get(words.split(":")[0].strip().rstrip(".").lower())
    if hit is not None:
        f.setdefault("signal", hit[0])
        f.setdefault("signum", hit[1])
    num = f.get("signum")
    if "signal" not in f and num is not None and str(num).isdecimal():
        f["signal"] = SIGNUMS.get(int(num), f"signal {num}")
    if "signum" not in f and f.get("signal"):
        f["signum"] = next((n for name, n in SIGNALS.values() if name == f["signal"]), None)


def _b_ulimit(f: Fields) -> None:
    name = str(f.pop("_ulimitname", ""))
    opt = str(f.pop("_ulimitopt", ""))[1:-1]  # "kbytes, -l"
    f["name"], f["resource"] = name, _ULIMITS.get(name, name)
    f["unit"] = opt.split(",")[0] if "," in opt else None
    value = str(f.pop("limit", "")).strip()
    f["value"] = value
    f["amount"] = value if value.isdecimal() else None


def _b_acs(f: Fields) -> None:
    flags = [str(t) for t in f.pop("acs", [])]
    f["flags"] = " ".join(flags)
    for name, key in (("SrcValid", "src_valid"), ("ReqRedir", "req_redir"), ("CmpltRedir", "cmplt_redir")):
        f[key] = name + "+" in flags


_LNK = rx(r"Speed ([\w.]+/s)(?: \((downgraded|ok)\))?, Width (x\d+)(?: \((downgraded|ok)\))?")


def _b_link(f: Fields) -> None:
    m = _LNK.search(str(f.get("detail", "")))
    if m:
        f["speed"], f["width"] = m.group(1), m.group(3)
        f["speed_downgraded"], f["width_downgraded"] = m.group(2) == "downgraded", m.group(4) == "downgraded"


def _b_ib_netdev(f: Fields) -> None:
    dev, _, port = str(f.pop("_ibdevport", "")).rpartition(" port ")
    f["device"], f["port"] = dev, port
    f["up"] = str(f.pop("updown", "")) == "Up"


def _b_tool(f: Fields) -> None:
    q = f.pop("_quoted", None)
    if q:
        f["name"] = q.strip("'")
    for key in ("_ibstate", "_ibstatusstate", "_ibstatusphys", "_ibvstate"):
        if key in f:
            f["detail"] = str(f[key]).strip()
    if "_svchead" in f:
        f["name"] = str(f["_svchead"])[2:]
        f["detail"] = str(f.get("detail", "")).strip().lstrip("-").strip()
    for key in ("_topohead", "_showgidshead", "_dfhead", "_nvsmilog"):
        if key in f:
            f["detail"] = str(f[key]).strip()
    if "bdf" in f:
        f["name"] = f.pop("bdf")
    if "function" in f:
        f["name"], f["detail"] = f.pop("function"), f.pop("where", "")


def _b_service(f: Fields) -> None:
    f.setdefault("unit", "")


def _b_nvsmi_header(f: Fields) -> None:
    _version(f, "smi_version", "driver_version", "cuda_version")


def _b_ofi_provider(f: Fields) -> None:
    f["provider"] = str(f.get("provider", "")).rstrip(",")


def _b_rccl(f: Fields) -> None:
    v = str(f.get("version", ""))  # 2.22.3-HEAD(:271856d) / 2.18.3+hip6.0( HEAD:5f5d1e1)
    ver, _, hip = v.partition("+")
    rest = ("+" + hip) if hip else ""
    if ver.endswith("-HEAD"):
        ver, rest = ver[:-5], "HEAD"
    f["version"] = ver
    f["detail"] = (rest + str(f.get("detail", ""))).strip()


def _b_hw_bus(f: Fields) -> None:
    if "bdf" in f:  # NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.
        f["detail"] = f"GPU {f.pop('bdf')}"


# rule or kind -> fixer(fields)
FIXERS: dict[str, Callable[[Fields], Any]] = {
    "gpu_xid": _b_xid,
    "driver_error": _b_driver,
    "oom_kill": _b_oom,
    "pcie_aer": _b_aer,
    "iommu_fault": _b_iommu,
    "nic_event": _b_nic,
    "kernel_module": _b_module,
    "ibverbs_warning": _b_ibverbs,
    "crash_signal": _b_crash,
    "ulimit_value": _b_ulimit,
    "tool_output": _b_tool,
    "pci_acs": _b_acs,
    "ib_netdev": _b_ib_netdev,
    "pci_link": _b_link,
    "service_status": _b_service,
    "nvsmi_header": _b_nvsmi_header,
    "ofi_provider": _b_ofi_provider,
    "rccl_version": _b_rccl,
    "hw_bus": _b_hw_bus,
}


def node_label(pre: str) -> str | None:
    """The host label a parallel shell (pdsh, clush) put before a line: ``node1: ``."""
    m = _NODE.match(pre)
    return m.group(1) if m else None


def _pre_device(f: Fields, pre: str) -> None:
    """The PCI device (and network device) the kernel names before its message."""
    if not f.get("device"):
        found = _BDF.findall(pre)
        if found:
            f["device"] = found[-1]
    if f.get("what") == "link_down":
        n = _NETDEV.search(pre)
        if n and not _BDF.fullmatch(n.group(1)):
            f["netdev"] = n.group(1)


def _pre_module(f: Fields, pre: str) -> None:
    if not f.get("module"):
        name = pre.strip().rstrip(":").split()[-1:] if pre.strip() else []
        if name:
            f["module"] = name[0].rstrip(":")


def _pre_crash(f: Fields, pre: str) -> None:
    m = _UCX_PID.search(pre) if f.get("tool") == "ucx" else _SHELL_PID.search(pre) if f.get("tool") == "shell" else None
    if m:
        f["crash_pid"] = m.group(1)


def _pre_tool(f: Fields, pre: str) -> None:
    node = node_label(pre)
    if node:
        f["node"] = node


# kind -> fixer(fields, text before the message)
PRE_FIXERS: dict[str, Callable[[Fields, str], Any]] = {
    "pcie_aer": _pre_device,
    "iommu_fault": _pre_device,
    "nic_event": _pre_device,
    "kernel_module": _pre_module,
    "crash_signal": _pre_crash,
    "tool_output": _pre_tool,
    "ib_netdev": _pre_tool,
}
