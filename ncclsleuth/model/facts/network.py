"""Facts about the network each process chose: interfaces, socket fallback, the minority network."""
from __future__ import annotations

from collections import Counter

from ... import events as E
from ...util.rxstore import rx
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


class IfnameUnseen(Record):
    host: str
    setting: str  # the NCCL_SOCKET_IFNAME value
    seen: str  # the interfaces the log shows NCCL using ("none")
    failure: str  # the kind of the first socket/bootstrap failure


class NetworkMinority(Record):
    host: str
    network: str
    majority: str
    majority_hosts: int


_BAD_IFACE = rx(r"^(?:lo|docker\d*|virbr\d*|br-[0-9a-f]+|ip6tnl\d*|sit\d*|tunl\d*|vmnet\d*|"
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


def single_host(model: JobModel) -> bool:
    """True when every communicator of the log has all its ranks on one host: a one-node job,
    whose processes reach each other over any local address (loopback included).  A log of
    one rank of a bigger job is not one: its communicators have ranks it does not show."""
    hosts = {p.host for p in model.processes.values() if p.host}
    comms = [c for c in model.comms.values() if c.ranks]  # a ring line before any comm line has none
    if len(hosts) != 1 or not comms:
        return False
    for comm in comms:
        states = list(comm.ranks.values())
        nranks = comm.nranks or max((rs.nranks or 0 for rs in states), default=0)
        if not nranks or len(comm.ranks) < nranks or any((rs.nnodes or 1) > 1 for rs in states):
            return False
    return True


@fact(BadInterface)
def bad_interface(model: JobModel) -> list[BadInterface]:
    """Processes whose bootstrap/OOB or socket interface is loopback, a bridge or link-local,
    in a job that spans hosts (on one host every local address reaches the other ranks)."""
    out: list[BadInterface] = []
    if single_host(model):
        return out
    for p in model.processes.values():
        for where, ifaces, keys in (("bootstrap", p.bootstrap, ("bootstrap_iface", "net_ib_devices")),
                                    ("socket", p.socket_ifaces, ("net_socket_ifaces",))):
            for i in ifaces:
                why = iface_problem(i.name, i.addr)
                named = next((k for k in keys if k in p.said), None)  # the line that named them
                if why is None or named is None:
                    continue
                first = ifaces[0] is i
                # the line quoted: the interface's own, else that one (asked here only: a process
                # keeps the place of its lines, made again when asked)
                iev = p.evidence["iface:" + i.name if "iface:" + i.name in p.said else named]
                alts = [a for a in _good_alternatives(model, p.host) if a != i.name]
                out.append({"host": p.host or "?", "pid": p.pid, "iface": i.name, "addr": i.addr or "",
                            "where": where, "reason": why, "first": first,
                            "alternatives": ",".join(alts),  # '' when the log shows no other
                            "suggest": alts[0] if alts else "<routable-iface>",
                            "evidence": [iev]})
    return out


#: the socket and bootstrap failures a missing interface leads to
_SOCKET_FAILURES = ("socket_error", "bootstrap_error", "no_interface")


def _ifname_matches(value: str, names: set[str]) -> bool:
    """Whether NCCL_SOCKET_IFNAME ``value`` selects one of ``names``, as misc/socket.cc
    ncclFindInterfaces reads it (misc/utils.cc parseStringList, matchIfList): a comma list of
    prefixes, each with an optional ``:port``; ``=`` for exact names."""
    exact = value.startswith("=")
    prefixes = [p.split(":", 1)[0] for p in value.lstrip("=").split(",")]
    return any((n == p if exact else n.startswith(p)) for n in names for p in prefixes if p)


def _settings(model: JobModel, name: str) -> list[E.Event]:
    """The lines setting ``name``: the kept ``env_setting`` events, then of the processes' own the
    first line of each value not among them, in input order (events are kept up to a number per
    kind: at 16,384 ranks with two settings each, later ranks' lines are only in their process's
    evidence, most as their place: only the lines read are made again).  Its reader takes the
    first line of each value."""
    out = [ev for ev in model.events.get("env_setting", ()) if getattr(ev, "name", "") == name]
    kept = {(ev.source, ev.line) for ev in out}
    first: dict[str, tuple[tuple[int, int], Process]] = {}
    key = "env:" + name
    for p in model.processes.values():
        at = p.said_at(key)
        if at is None or at in kept:
            continue
        value = str(p.env.get(name, "")).strip()
        order = model.order_at(*at)
        if value not in first or order < first[value][0]:
            first[value] = (order, p)
    return out + [p.evidence[key] for _, p in sorted(first.values(), key=lambda t: t[0])]


@fact(IfnameUnseen)
def ifname_unseen(model: JobModel) -> list[IfnameUnseen]:
    """NCCL_SOCKET_IFNAME names interfaces none of which the log shows NCCL using, and a
    socket or bootstrap failure follows: the name matches nothing on the node (ncclFindInterfaces
    finds no interface, and the bootstrap runs on an address that is not there)."""
    settings = _settings(model, "NCCL_SOCKET_IFNAME")
    failures = sorted((ev for k in _SOCKET_FAILURES for ev in model.events.get(k, ()) if ev.is_problem),
                      key=model.order_key)
    if not settings or not failures:
        return []
    seen = {i.name for p in model.processes.values() for i in (*p.bootstrap, *p.socket_ifaces)}
    out: list[IfnameUnseen] = []
    done: set[str] = set()
    for ev in settings:
        value = str(getattr(ev, "value", "")).strip()
        if not value or value in done or value.startswith("^"):  # an exclusion list names what is not used
            continue
        done.add(value)
        if _ifname_matches(value, seen):
            continue
        out.append({"host": ev.host or "?", "setting": value, "seen": ", ".join(sorted(seen)) or "none",
                    "failure": failures[0].kind, "evidence": [ev, failures[0]]})
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
