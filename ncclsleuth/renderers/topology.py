"""Rings, trees and transport hops per communicator (``ncclsleuth topology``) as text or JSON."""
from __future__ import annotations

import json
from collections.abc import Sequence

from ..model.topology import CommTopology


def render(tops: Sequence[CommTopology], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps([t.to_dict() for t in tops], indent=2, sort_keys=True)
    if not tops:
        return "No ring, tree or connection lines in these logs (NCCL_DEBUG=INFO prints them at init)."
    out: list[str] = []
    for t in tops:
        out.append(f"communicator {t.comm}: {t.nranks or len(t.hosts)} ranks, {len(set(t.hosts.values()))} host(s)")
        out.append("  hops: " + (", ".join(f"{k} {v}" for k, v in sorted(t.hops.items())) or "none logged"))
        out.append(f"  rings checked: {t.rings_checked}" + (f"; problems: {'; '.join(t.ring_problems)}"
                                                            if t.ring_problems else ", all visit every rank once"))
        if t.socket_cross_node:
            out.append(f"  ! {t.socket_cross_node} inter-node hops over NET/Socket (TCP)")
        if t.shm_intra_node:
            out.append(f"  ! {t.shm_intra_node} intra-node hops over SHM (P2P disabled or unavailable)")
        if t.no_gdr_net:
            out.append(f"  ! {t.no_gdr_net} NET hops without GPUDirect RDMA")
    return "\n".join(out)
