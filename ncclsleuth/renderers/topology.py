"""Rings, trees and transport hops per communicator (``ncclsleuth topology``) as text or JSON."""
from __future__ import annotations

import json
from collections.abc import Sequence

from ..model.stats import some
from ..model.topology import CommTopology


def render(tops: Sequence[CommTopology], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps([t.to_dict() for t in tops], indent=2, sort_keys=True)
    if not tops:
        return "No ring, tree or connection lines in these logs (NCCL_DEBUG=INFO prints them at init)."
    # communicators that read alike (a job's per-host splits: 1,000 of them at 8,000 ranks, 3,003
    # lines) are said once, with how many and which
    groups: dict[tuple[str, ...], list[CommTopology]] = {}
    for t in tops:
        groups.setdefault(_said(t), []).append(t)
    out: list[str] = []
    for said, same in groups.items():
        head, t = said[0], same[0]
        if len(same) == 1:
            out.append(f"communicator {t.comm}: {head}")
        else:
            out.append(f"{len(same):,} communicators of {head} each: {some([x.comm for x in same], COMMS_NAMED)}")
        out.extend(said[1:])
    return "\n".join(out)


#: communicators named in a group of communicators that read alike
COMMS_NAMED = 3


def _said(t: CommTopology) -> tuple[str, ...]:
    """What the text says of one communicator, but its name: its size, then its lines."""
    lines = [f"{t.nranks or len(t.hosts)} ranks, {len(set(t.hosts.values()))} host(s)",
             "  hops: " + (", ".join(f"{k} {v}" for k, v in sorted(t.hops.items())) or "none logged"),
             f"  rings checked: {t.rings_checked}" + (f"; problems: {'; '.join(t.ring_problems)}"
                                                       if t.ring_problems else ", all visit every rank once")]
    if t.socket_cross_node:
        lines.append(f"  ! {t.socket_cross_node} inter-node hops over NET/Socket (TCP)")
    if t.shm_intra_node:
        lines.append(f"  ! {t.shm_intra_node} intra-node hops over SHM (P2P disabled or unavailable)")
    if t.no_gdr_net:
        lines.append(f"  ! {t.no_gdr_net} NET hops without GPUDirect RDMA")
    return tuple(lines)
