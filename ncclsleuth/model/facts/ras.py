"""Facts from NCCL RAS (2.24+): peers declared dead."""
from __future__ import annotations

from ... import events as E
from ..job import JobModel
from .base import Record, fact


class RasDeadPeer(Record):
    peer: str
    peer_host: str
    host: str
    declared_dead: bool
    reporters: int
    reporter_hosts: str


@fact(RasDeadPeer)
def ras_dead_peers(model: JobModel) -> list[RasDeadPeer]:
    """Peers NCCL's RAS declared dead or whose keep-alive expired, one record per peer.

    A RAS peer is a process, named by ``ip<port>``; the host is found from the bootstrap
    interface addresses the processes printed (``Bootstrap : Using ib0:10.0.0.18<0>``).
    ``reporters`` counts the hosts that saw it: one host reporting many peers points at
    that host's own network, many hosts reporting one peer at the peer.
    """
    by_peer: dict[str, list[E.Event]] = {}
    for ev in model.events.get("ras_peer", ()):
        if ev.is_problem and getattr(ev, "peer", None):
            by_peer.setdefault(ev.peer, []).append(ev)  # type: ignore[attr-defined]
    if not by_peer:
        return []
    ip_host: dict[str, str] = {}
    for p in model.processes.values():
        for i in p.bootstrap:
            if i.addr and p.host:
                ip_host.setdefault(i.addr, p.host)
    out: list[RasDeadPeer] = []
    for peer, evs in by_peer.items():
        ip = peer.split("<", 1)[0]
        dead = [e for e in evs if getattr(e, "what", "") == "dead"]
        reporters = sorted({e.host for e in evs if e.host})
        host = ip_host.get(ip, ip)  # the finding is about the peer, not about who reported it
        out.append({"peer": peer, "peer_host": host, "host": host, "declared_dead": bool(dead),
                    "reporters": len(reporters), "reporter_hosts": ", ".join(reporters[:8]) or "?",
                    "evidence": sorted(evs, key=lambda e: getattr(e, "what", "") != "dead")})
    out.sort(key=lambda f: (not f["declared_dead"], -f["reporters"], f["peer"]))
    return out
