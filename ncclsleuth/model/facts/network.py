"""Facts about the network each process chose: interfaces, socket fallback, the minority network."""
from __future__ import annotations

import re
from collections import Counter

from ... import events as E
from ..job import JobModel, Process
from .base import Record, fact


class BadInterface(Record):
    host: str
    pid: int | None
    iface: str
    addr: str
    where: str  # bootstrap | socket
    reason: str
    first: bool  # the first interface of its list (the one NCCL uses)
    alternatives: str
    suggest: str


class SocketFallback(Record):
    host: str
    pid: int | None
    reason: str
    ib_disabled: bool


class NetworkMinority(Record):
    host: str
    network: str
    majority: str
    majority_hosts: int


_BAD_IFACE = re.compile(r"^(?:lo|docker\d*|virbr\d*|br-[0-9a-f]+|ip6tnl\d*|sit\d*|tunl\d*|vmnet\d*|"
                        r"cni-podman\d*|podman\d*|lxcbr\d*|lxdbr\d*|gre\d*|erspan\d*)$")


def iface_problem(name: str, addr: str | None) -> str | None:
    """Why an interface is a poor choice for cross-node traffic (None if it is fine)."""
    a = (addr or "").lower()
    if a.startswith("127.") or a == "::1":
        return "loopback address"
    if name == "lo":
        return "loopback interface"
    if _BAD_IFACE.match(name):
        if name.startswith("docker") or name.startswith(("br-", "podman", "cni-", "lxc", "lxd", "virbr")):
            return "container/VM bridge (not routable between nodes)"
        return "tunnel interface"
    if a.startswith("fe80:") or a.startswith("169.254."):
        return "link-local address (not routable between nodes)"
    return None


def _good_alternatives(model: JobModel, host: str | None) -> list[str]:
    names: list[str] = []
    for p in model.processes.values():
        if host and p.host != host:
            continue
        for i in (*p.socket_ifaces, *p.bootstrap):
            if iface_problem(i.name, i.addr) is None and i.name not in names and "<" not in i.name:
                names.append(i.name)
    return names


@fact(BadInterface)
def bad_interface(model: JobModel) -> list[BadInterface]:
    """Processes whose bootstrap/OOB or socket interface is loopback, a bridge or link-local."""
    out: list[BadInterface] = []
    for p in model.processes.values():
        for where, ifaces, ev in (("bootstrap", p.bootstrap, p.evidence.get("bootstrap_iface")
                                   or p.evidence.get("net_ib_devices")),
                                  ("socket", p.socket_ifaces, p.evidence.get("net_socket_ifaces"))):
            for i in ifaces:
                why = iface_problem(i.name, i.addr)
                if why is None or ev is None:
                    continue
                first = ifaces[0] is i
                iev = p.evidence.get("iface:" + i.name, ev)
                alts = [a for a in _good_alternatives(model, p.host) if a != i.name]
                out.append({"host": p.host or "?", "pid": p.pid, "iface": i.name, "addr": i.addr or "",
                            "where": where, "reason": why, "first": first,
                            "alternatives": ",".join(alts) or "the node's routable interface",
                            "suggest": alts[0] if alts else "<routable-iface>",
                            "evidence": [iev]})
    return out


@fact(SocketFallback)
def socket_fallback(model: JobModel) -> list[SocketFallback]:
    """Processes on NET/Socket although the log shows InfiniBand/RoCE should be there."""
    ib_hosts = {p.host for p in model.processes.values() if p.network and p.network.startswith("IB")}
    out: list[SocketFallback] = []
    for p in model.processes.values():
        on_socket = p.network == "Socket" or (p.network is None and p.socket_ifaces and
                                              (p.ibverbs_missing or p.ib_none))
        if not on_socket:
            continue
        reasons, ev = _fallback_reasons(p, ib_hosts)
        if not reasons:
            continue
        main = p.evidence.get("net_selected") or p.evidence.get("net_socket_ifaces")
        evidence = [e for e in (main, *ev) if e is not None]
        out.append({"host": p.host or "?", "pid": p.pid, "reason": "; ".join(reasons),
                    "ib_disabled": "NCCL_IB_DISABLE" in p.env and p.env["NCCL_IB_DISABLE"] not in ("0", ""),
                    "evidence": evidence})
    return out


def _fallback_reasons(p: Process, ib_hosts: set[str | None]) -> tuple[list[str], list[E.Event]]:
    """Why this process is on sockets and why RDMA should have been there; nothing unless the
    log shows RDMA was expected: a missing libibverbs (or NET/IB finding no device) alone is
    what every node without InfiniBand/RoCE prints (2.3..2.10 ibvwrap: the IB transport is
    simply not loaded), not a fallback."""
    reasons: list[str] = []
    ev: list[E.Event] = []
    expected = (p.env.get("NCCL_IB_DISABLE", "0") not in ("0", "") or bool(p.env.get("NCCL_IB_HCA"))
                or bool(p.plugins) or bool(ib_hosts - {p.host}) or bool(p.ib_devices)
                or any(i.name.startswith("ib") for i in p.socket_ifaces))
    if not expected:
        return [], []
    if p.env.get("NCCL_IB_DISABLE", "0") not in ("0", ""):
        reasons.append("NCCL_IB_DISABLE is set")
        ev.append(p.evidence["env:NCCL_IB_DISABLE"])
    if p.ibverbs_missing:
        reasons.append("libibverbs could not be loaded")
        ev.append(p.evidence["ibverbs_missing"])
    if p.ib_none and p.env.get("NCCL_IB_HCA"):
        reasons.append(f"NCCL_IB_HCA={p.env['NCCL_IB_HCA']} matches no InfiniBand/RoCE device")
        ev.append(p.evidence["env:NCCL_IB_HCA"])
    if p.ib_none and (p.plugins or any("IB" in x for x in p.plugins)):
        reasons.append(f"an RDMA net plugin is installed ({', '.join(p.plugins)}) but NET/IB found no device")
        ev.append(p.evidence["net_ib_none"])
    if ib_hosts - {p.host}:
        reasons.append("other nodes of this job use NET/IB")
    if any(i.name.startswith("ib") for i in p.socket_ifaces):
        reasons.append("the socket interface is IPoIB (ib*), so the node has InfiniBand")
        if p.evidence.get("net_socket_ifaces") is not None:
            ev.append(p.evidence["net_socket_ifaces"])
    return reasons, ev


@fact(NetworkMinority)
def network_minority(model: JobModel) -> list[NetworkMinority]:
    """Processes whose chosen network differs from the majority of the job."""
    nets = Counter(p.network for p in model.processes.values() if p.network)
    if len(nets) < 2:
        return []
    major, n_major = nets.most_common(1)[0]
    hosts_major = len({p.host for p in model.processes.values() if p.network == major})
    out: list[NetworkMinority] = []
    for p in model.processes.values():
        if p.network and p.network != major:
            out.append({"host": p.host or "?", "network": p.network, "majority": major,
                        "majority_hosts": hosts_major, "evidence": [p.evidence["net_selected"]]})
    return out
