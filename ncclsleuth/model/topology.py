"""Rings, trees and transport hops as networkx graphs, per communicator.

Built on demand (``ncclsleuth topology``, the post-mortem pictures), never for every
rank during ``analyze``: the model keeps compact hop aggregates and this module turns
them into graphs.  networkx is imported here only, to keep start-up light.
"""
from __future__ import annotations

from dataclasses import field
from typing import Any

from ..util.classes import dataclass
from .job import Comm, JobModel, tree_pairs


@dataclass
class CommTopology:
    """What the graph of one communicator says."""

    comm: str
    nranks: int | None
    hosts: dict[int, str]
    hops: dict[str, int] = field(default_factory=dict)
    rings_checked: int = 0
    ring_problems: list[str] = field(default_factory=list)
    socket_cross_node: int = 0
    shm_intra_node: int = 0
    no_gdr_net: int = 0
    graph: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"comm": self.comm, "nranks": self.nranks, "hops": self.hops, "rings_checked": self.rings_checked,
                "ring_problems": self.ring_problems, "socket_cross_node_hops": self.socket_cross_node,
                "shm_intra_node_hops": self.shm_intra_node, "net_hops_without_gdr": self.no_gdr_net}


def comm_rank_hosts(c: Comm) -> dict[int, str]:
    """Rank within this communicator -> host (``members.rank_hosts`` maps global ranks)."""
    return {r: st.host for r, st in c.ranks.items() if st.host}


def build(c: Comm) -> CommTopology:
    """The graph of one communicator: ring edges, tree edges, and connection hops."""
    import networkx as nx

    g: nx.MultiDiGraph[int] = nx.MultiDiGraph(comm=c.key)
    hosts = comm_rank_hosts(c)
    for r in range(c.nranks or 0):
        g.add_node(r, host=hosts.get(r, ""))
    t = CommTopology(c.key, c.nranks, hosts, graph=g)
    for ch, order in sorted(c.rings.items()):
        for a, b in zip(order, order[1:] + order[:1]):
            g.add_edge(a, b, kind="ring", channel=ch)
        t.rings_checked += 1
        problem = check_ring(order, c.nranks, truncated=c.ring_truncated)
        if problem:
            t.ring_problems.append(f"channel {ch}: {problem}")
    for ch, pairs in sorted(c.trees.items()):
        for me, up in tree_pairs(pairs):
            if up >= 0:
                g.add_edge(me, up, kind="tree", channel=ch)
    for (src, dst), (label, _net, gdr, n) in sorted(c.hop_items()):
        g.add_edge(src, dst, kind="conn", transport=label, gdr=bool(gdr), channels=n)
        t.hops[label] = t.hops.get(label, 0) + 1
        same_host = hosts.get(src) is not None and hosts.get(src) == hosts.get(dst)
        if label == "NET/Socket" and not same_host:
            t.socket_cross_node += 1
        if label == "SHM" and same_host:
            t.shm_intra_node += 1
        if label.startswith("NET/") and label != "NET/Socket" and not gdr:
            t.no_gdr_net += 1
    return t


def check_ring(order: tuple[int, ...], nranks: int | None, truncated: bool = False) -> str | None:
    """Why a ring dump is not a ring over all ranks (None when it is)."""
    if len(set(order)) != len(order):
        return "visits a rank twice"
    if nranks and not truncated and len(order) < nranks and nranks <= 20:
        missing = sorted(set(range(nranks)) - set(order))
        return f"misses ranks {missing[:10]}"
    return None


def analyze_topology(model: JobModel) -> list[CommTopology]:
    return [build(c) for c in sorted(model.comms.values(), key=lambda c: (-(c.nranks or 0), c.key))
            if c.rings or c.trees or c.hops]


#: what ``topology --export`` writes, by suffix (.svg/.png through Graphviz's ``dot``)
EXPORT_SUFFIXES = (".graphml", ".dot", ".gv", ".svg", ".png")


class ExportError(ValueError):
    """The graph cannot be written to that file (a suffix we do not write, no Graphviz)."""


def export(t: CommTopology, path: str) -> None:
    """GraphML (``.graphml``), Graphviz DOT (``.dot``/``.gv``), or SVG/PNG drawn by
    Graphviz's ``dot`` when it is installed; any other suffix is refused."""
    import os

    suffix = os.path.splitext(path)[1].lower()
    if suffix not in EXPORT_SUFFIXES:
        raise ExportError(f"{path}: cannot write {suffix or 'a file without suffix'} "
                          f"(use {', '.join(EXPORT_SUFFIXES)})")
    g = _plain_graph(t)
    if suffix == ".graphml":
        import networkx as nx

        nx.write_graphml(g, path)
        return
    dot = _dot(t, g)
    if suffix in (".dot", ".gv"):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(dot)
        return
    _draw(dot, suffix[1:], path)


def _plain_graph(t: CommTopology) -> Any:
    import networkx as nx

    g: nx.DiGraph[int] = nx.DiGraph()
    for n, d in t.graph.nodes(data=True):
        g.add_node(n, **d)
    for a, b, d in t.graph.edges(data=True):
        g.add_edge(a, b, **{k: (str(v) if not isinstance(v, (int, float, str)) else v) for k, v in d.items()})
    return g


def _dot(t: CommTopology, g: Any) -> str:
    lines = [f'digraph "{t.comm}" {{']
    for n, d in g.nodes(data=True):
        lines.append(f'  {n} [label="{n}\\n{d.get("host", "")}"];')
    for a, b, d in g.edges(data=True):
        lines.append(f'  {a} -> {b} [label="{d.get("transport", d.get("kind", ""))}"];')
    return "\n".join(lines) + "\n}\n"


def _draw(dot: str, fmt: str, path: str) -> None:
    """The picture, by Graphviz (``dot -T{fmt}``); without Graphviz, say how to get it."""
    import shutil
    import subprocess

    exe = shutil.which("dot")
    if exe is None:
        raise ExportError(f"{path}: writing .{fmt} needs Graphviz's 'dot' (apt-get install graphviz, "
                          "brew install graphviz); .dot and .graphml need nothing")
    try:
        subprocess.run([exe, f"-T{fmt}", "-o", path], input=dot.encode(), check=True, capture_output=True,
                       timeout=120)
    except (subprocess.SubprocessError, OSError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        raise ExportError(f"{path}: dot failed: {err.decode(errors='replace').strip() or exc}") from None
