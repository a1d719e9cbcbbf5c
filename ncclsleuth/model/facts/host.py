"""Facts about the hosts around NCCL, from what their tools and kernels printed
(events of :mod:`ncclsleuth.events.host`): RDMA ports and their state, GID tables
compared across nodes, the GPU-NIC paths of a topology matrix, Xids repeating on one GPU,
the RCCL versions of the job.

A tool's output is often pasted without a host: its events are grouped by the host the
line names (a ``node1:`` label, the envelope), else the host of the file (a per-node log),
else the file itself; two tables of one file stay apart by their ``block``.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from ... import events as E
from ...util.rxstore import rx
from ..job import JobModel
from .base import Record, fact

# NCCL's path types (src/include/graph.h, v2.30.7-1) for nvidia-smi's cells: LOC < NVL < NVB <
# C2C < PIX < PXB < P2C < PXN < PHB < SYS; nvidia-smi's NODE is NCCL's PHB (one CPU node per
# NUMA node); SOC is old drivers' SYS.
PATH_RANK = {"X": 0, "NV#": 1, "C2C": 3, "PIX": 4, "PXB": 5, "PHB": 8, "NODE": 8, "SYS": 9, "SOC": 9}
#: ncclTopoCheckGdr (src/graph/paths.cc): GPUDirect RDMA is used up to this path type by
#: default (NCCL_NET_GDR_LEVEL raises it)
GDR_DEFAULT_LEVEL = PATH_RANK["PXB"]
#: Xids that point at the application's kernels (a bad address, an exception in the SM)
#: unless they repeat on one GPU under different processes (knowledge: SYS-xid-13, SYS-xid-31)
APP_XIDS = (13, 31)
_GPU = rx(r"^GPU\d+$")
_ZERO_LID = {"0", "0x0", "0x0000"}


def host_of(model: JobModel, ev: E.Event) -> str:
    """The host a tool line belongs to: named on it, else its file's host, else its file
    (a paste per node: what groups one node's lines, not a host name; see :func:`host_name`)."""
    return host_name(model, ev) or ev.source


def host_name(model: JobModel, ev: E.Event) -> str | None:
    """The host a tool line names (its envelope, a ``node1:`` label) or its file's host."""
    return ev.host or getattr(ev, "node", None) or model.source_hosts().get(ev.source)


def _path_rank(cell: str) -> int:
    return PATH_RANK.get("NV#" if cell.startswith("NV") and cell[2:].isdecimal() else cell, 10)


# ---------------------------------------------------------------------- RDMA ports


class IbPortState(Record):
    host: str  # "?" where neither the line nor its file names one
    device: str
    port: int | None
    state: str  # Active | Down | Initializing | Armed | ?
    phys_state: str
    link_layer: str
    sm_lid: str
    rate: str
    tool: str
    down: bool  # not Active (or no physical link): NCCL skips the port
    no_sm: bool  # InfiniBand port Initializing/Armed with SM lid 0: no subnet manager
    active_on_host: int  # ports of the same host that are Active
    used_by_nccl: bool  # NCCL listed the device (NET/IB : Using ...) or NCCL_IB_HCA names it
    matters: bool  # down and NCCL had nothing else (no Active port on the host) or wanted this one


def _nccl_devices(model: JobModel) -> set[str]:
    """HCA names NCCL used (``NET/IB : Using [0]mlx5_0:1/IB ...``) or was told to use (NCCL_IB_HCA)."""
    names = {d.hca for p in model.processes.values() for d in p.ib_devices}
    for p in model.processes.values():
        spec = p.env.get("NCCL_IB_HCA", "")
        if spec and not spec.startswith("^"):
            names.update(x.split(":")[0].lstrip("=") for x in spec.split(",") if x.strip())
    return names


@fact(IbPortState)
def ib_port_state(model: JobModel) -> list[IbPortState]:
    """RDMA ports from ibstat / ibstatus / ibv_devinfo: their state, and whether it matters."""
    ports = model.events.get("ib_port", [])
    if not ports:
        return []
    used = _nccl_devices(model)
    active: Counter[str] = Counter()
    for ev in ports:
        if getattr(ev, "state", None) == "Active":
            active[host_of(model, ev)] += 1
    out: list[IbPortState] = []
    for ev in ports:
        assert isinstance(ev, E.IbPort)
        host = host_of(model, ev)
        state = ev.state or "?"
        down = state != "Active" or ev.phys_state in ("Polling", "Disabled", "Sleep", "LinkErrorRecovery")
        no_sm = (state in ("Initializing", "Armed") and (ev.sm_lid or "").lower() in _ZERO_LID
                 and (ev.link_layer or "InfiniBand") == "InfiniBand")
        in_use = ev.device in used
        out.append({"host": host_name(model, ev) or "?", "device": ev.device, "port": ev.port, "state": state,
                    "phys_state": ev.phys_state or "?", "link_layer": ev.link_layer or "?",
                    "sm_lid": ev.sm_lid or "?", "rate": ev.rate or "?", "tool": ev.tool, "down": down,
                    "no_sm": no_sm, "active_on_host": active[host], "used_by_nccl": in_use,
                    "matters": down and (active[host] == 0 or in_use), "evidence": [ev]})
    return out


# ---------------------------------------------------------------------- GID tables


class GidIndexConflict(Record):
    index: int  # the NCCL_IB_GID_INDEX the job sets
    device: str
    host_a: str
    gid_a: str
    kind_a: str  # link_local | ipv4 | zero | other | missing
    host_b: str
    gid_b: str
    kind_b: str
    ipv4_index_a: str  # where the IPv4-mapped RoCE v2 GID sits on each side ("?" when none)
    ipv4_index_b: str


def gid_kind(gid: str) -> str:
    """link_local (fe80::/10), ipv4 (IPv4-mapped ::ffff:a.b.c.d), zero, or other."""
    g = gid.lower()
    if g.startswith("fe80"):
        return "link_local"
    if g.startswith("::ffff:") or g.replace(":", "").startswith("00000000000000000000ffff"):
        return "ipv4"
    return "zero" if not g.replace(":", "").replace("0", "") else "other"


def _configured_gid_index(model: JobModel) -> tuple[int, E.Event | None] | None:
    """The one NCCL_IB_GID_INDEX the job sets (as NCCL echoed it), None if unset or several."""
    vals: dict[str, E.Event | None] = {}
    for p in model.processes.values():
        v = p.env.get("NCCL_IB_GID_INDEX")
        if v is not None and v.strip() not in vals:  # the first process's line of each value
            vals[v.strip()] = p.evidence.get("env:NCCL_IB_GID_INDEX")
    for ev in model.events.get("env_setting", ()):
        if getattr(ev, "name", "") == "NCCL_IB_GID_INDEX":
            vals.setdefault(str(getattr(ev, "value", "")).strip(), ev)
    good = {k: v for k, v in vals.items() if k.lstrip("-").isdecimal() and int(k) >= 0}
    if len(good) != 1:
        return None
    key, shown = next(iter(good.items()))
    return int(key), shown


@fact(GidIndexConflict)
def gid_index_conflict(model: JobModel) -> list[GidIndexConflict]:
    """The GID index the job sets names a link-local GID on one node and an IPv4-mapped one
    (or none) on another: the two sides of a connection use GIDs of different types."""
    gids = model.events.get("ib_gid", [])
    conf = _configured_gid_index(model) if gids else None
    if conf is None:
        return []
    index, env_ev = conf
    # (host, block) -> device -> index -> event: one table per node's output
    tables: dict[tuple[str, int | None], dict[str, dict[int, E.Event]]] = defaultdict(lambda: defaultdict(dict))
    for ev in gids:
        assert isinstance(ev, E.IbGid)
        if ev.index is not None:
            tables[(host_of(model, ev), ev.block)][ev.device][ev.index] = ev
    if len(tables) < 2:
        return []
    sides = []
    for (host, _), devs in tables.items():
        for dev, entries in devs.items():
            at = entries.get(index)
            v4 = sorted(i for i, e in entries.items() if gid_kind(getattr(e, "gid", "")) == "ipv4"
                        and getattr(e, "gid_type", None) in (None, "RoCE v2"))
            kind = gid_kind(getattr(at, "gid", "")) if at is not None else "missing"
            sides.append((host, dev, at, kind, str(v4[0]) if v4 else "?", entries))
    out: list[GidIndexConflict] = []
    for i, a in enumerate(sides):
        for b in sides[i + 1:]:
            if a[0] == b[0] or a[3] == b[3] or "ipv4" not in (a[3], b[3]):
                continue
            ev_a = a[2] or next(iter(a[5].values()))
            ev_b = b[2] or next(iter(b[5].values()))
            evidence = [e for e in (ev_a, ev_b, env_ev) if e is not None]
            out.append({"index": index, "device": a[1], "host_a": a[0], "gid_a": getattr(a[2], "gid", "-"),
                        "kind_a": a[3], "host_b": b[0], "gid_b": getattr(b[2], "gid", "-"), "kind_b": b[3],
                        "ipv4_index_a": a[4], "ipv4_index_b": b[4], "evidence": evidence})
            return out  # one pair names the problem; the others repeat it
    return out


# ---------------------------------------------------------------------- nvidia-smi topo -m


class GpuNicPath(Record):
    host: str
    gpu: str
    nic: str  # the nearest NIC (its legend name when the matrix has one)
    path: str  # the connection type to it (PHB, NODE, SYS)
    gpus_far: int  # GPUs of this matrix whose nearest NIC is as far


@fact(GpuNicPath)
def gpu_nic_far(model: JobModel) -> list[GpuNicPath]:
    """GPUs of a ``nvidia-smi topo -m`` matrix whose nearest NIC is farther than NCCL's
    default GPUDirect RDMA level (PXB): NCCL stages their network traffic in host memory."""
    rows = model.events.get("topo_row", [])
    if not rows:
        return []
    legend = {(host_of(model, ev), getattr(ev, "block", None), getattr(ev, "nic", "")): getattr(ev, "name", "")
              for ev in model.events.get("topo_nic", ())}
    far: dict[tuple[str, int | None], list[tuple[E.Event, str, str]]] = defaultdict(list)
    for ev in rows:
        assert isinstance(ev, E.TopoRow)
        if not _GPU.match(ev.device):
            continue
        nics = [(c, cell) for c, cell in zip(ev.columns, ev.cells) if not _GPU.match(c)]
        if not nics:
            continue
        col, cell = min(nics, key=lambda nc: _path_rank(nc[1]))
        if _path_rank(cell) > GDR_DEFAULT_LEVEL:
            key = (host_of(model, ev), ev.block)
            far[key].append((ev, legend.get((key[0], key[1], col)) or col, cell))
    out: list[GpuNicPath] = []
    for items in far.values():
        for ev, nic, cell in items:
            out.append({"host": host_name(model, ev) or "?", "gpu": getattr(ev, "device", ""), "nic": nic, "path": cell,
                        "gpus_far": len(items), "evidence": [ev]})
    return out


# ---------------------------------------------------------------------- Xids


class XidRepeats(Record):
    host: str
    pci: str
    xid: int
    count: int  # reports of that Xid on this GPU
    processes: int  # distinct processes it hit
    pids: str


@fact(XidRepeats)
def xid_repeats(model: JobModel) -> list[XidRepeats]:
    """Xid 13/31 (normally the application's fault) repeating on one GPU under different
    processes: the GPU, not the code, is the common factor."""
    seen: dict[tuple[str, str, int], list[E.Event]] = defaultdict(list)
    for ev in model.events.get("gpu_xid", ()):
        xid = getattr(ev, "xid", None)
        if xid in APP_XIDS:
            seen[(host_of(model, ev), getattr(ev, "pci", ""), int(xid))].append(ev)
    out: list[XidRepeats] = []
    for (_, pci, xid), evs in seen.items():
        pids = sorted({p for ev in evs if (p := getattr(ev, "xid_pid", None)) is not None})
        if len(pids) >= 2:
            out.append({"host": host_name(model, evs[0]) or "?", "pci": pci, "xid": xid, "count": len(evs),
                        "processes": len(pids), "pids": ", ".join(map(str, pids[:8])), "evidence": evs[:8]})
    return out


# ---------------------------------------------------------------------- RCCL


class RcclVersionMismatch(Record):
    version: str  # the minority's
    majority: str
    hosts: str


@fact(RcclVersionMismatch)
def rccl_version_mismatch(model: JobModel) -> list[RcclVersionMismatch]:
    """RCCL versions that differ across the hosts of the job (RCCL's banner per process)."""
    by: dict[str, dict[str, E.Event]] = defaultdict(dict)
    for ev in model.events.get("rccl_version", ()):
        by[str(getattr(ev, "version", ""))].setdefault(host_of(model, ev), ev)
    if len(by) < 2:
        return []
    major = max(by, key=lambda v: (len(by[v]), v))
    return [{"version": v, "majority": major, "hosts": ", ".join(sorted(hosts)[:8]),
             "evidence": list(hosts.values())[:8] + list(by[major].values())[:1]}
            for v, hosts in by.items() if v != major]
