"""The diff of two runs: what changed between a GOOD and a BAD run, most suspicious first.

Each run is analysed on its own (model + rules).  From each model a set of *facts* is
taken: versions, the ``NCCL_*`` settings NCCL echoed, bootstrap / socket interfaces,
the network chosen, IB devices, GPUDirect RDMA use, channels and rings, init time per
phase, nccl-tests bandwidth.  A fact is compared by its values, not by host names (the
two runs usually ran on different nodes): ``ib0`` on every host vs ``ib0`` on one and
``docker0`` on the other is a change; ``ib0`` on node000 vs ``ib0`` on node017 is not.

Ranking: a change the BAD run's findings point at comes first (a wrong interface points
at ``NCCL_SOCKET_IFNAME`` and the bootstrap interface, a socket fallback at the network,
IB and GDR, a version mismatch at the versions), in the order of those findings; then
the rest by how often such a change breaks a job.  The runs are analysed by
:func:`ncclsleuth.api.diff`; the renderers are in :mod:`ncclsleuth.renderers.diff`.
"""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import field
from typing import Any

from ..model.stats import number
from ..rules.findings import Finding
from ..util.classes import dataclass
from . import Report

# What a finding category of the BAD run points at: change keys (exact) or prefixes ending in '*'.
POINTS_AT: dict[str, tuple[str, ...]] = {
    "wrong_interface": ("env:NCCL_SOCKET_IFNAME", "bootstrap interface", "socket interfaces", "env:NCCL_SOCKET_FAMILY",
                        "env:NCCL_IB_HCA", "network"),
    "network_blocked": ("env:NCCL_SOCKET_IFNAME", "bootstrap interface", "socket interfaces", "network",
                        "env:NCCL_SOCKET_*", "env:NCCL_IB_*"),
    "socket_fallback": ("network", "IB devices", "GPUDirect RDMA", "env:NCCL_NET*", "env:NCCL_IB_*", "net plugins",
                        "transports", "socket interfaces"),
    "version_mismatch": ("NCCL version", "CUDA version"),
    "roce_gid": ("env:NCCL_IB_GID_INDEX", "env:NCCL_IB_TC", "env:NCCL_IB_*", "IB devices"),
    "ib_link_error": ("IB devices", "env:NCCL_IB_*", "network"),
    "gdr_peermem": ("GPUDirect RDMA", "env:NCCL_NET_GDR*", "env:NCCL_IB_*"),
    "p2p_topology": ("env:NCCL_P2P*", "env:NCCL_NVLS*", "env:NCCL_SHM*", "transports", "channels", "rings"),
    "topology_file": ("env:NCCL_TOPO_FILE", "env:NCCL_TOPO_*", "channels", "rings"),
    "shm_limit": ("env:NCCL_SHM*", "transports"),
    "slow_init": ("init time*", "bootstrap interface", "env:NCCL_SOCKET_IFNAME", "network"),
    "low_bandwidth": ("nccl-tests*", "network", "GPUDirect RDMA", "channels", "env:NCCL_*CHANNELS", "IB devices",
                      "transports"),
    "config_inconsistency": ("env:*", "network", "GPUDirect RDMA"),
    "bogus_setting": ("env:*",),
    "collective_timeout": ("ranks", "hosts", "env:NCCL_SOCKET_IFNAME", "network"),
    "duplicate_gpu": ("ranks", "hosts"),
}

# How suspicious a change is when no finding points at it.
BASE: dict[str, int] = {"version": 40, "interface": 38, "env": 30, "network": 35, "ib": 25, "gdr": 25,
                        "topology": 15, "scale": 20, "init": 12, "bandwidth": 12, "findings": 5}


@dataclass
class Run:
    """One side of the diff: what was read and what the rules said."""

    path: str
    report: Report
    facts: dict[str, tuple[str, dict[str, list[str]]]]  # key -> (area, value -> hosts)
    numbers: dict[str, float]
    files_read: int

    @property
    def findings(self) -> list[Finding]:
        return self.report.findings


@dataclass
class Change:
    key: str
    area: str
    good: str
    bad: str
    score: float
    why: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "area": self.area, "good": self.good, "bad": self.bad,
                "score": round(self.score, 1), "why": self.why, "detail": self.detail}


@dataclass
class DiffResult:
    good: Run
    bad: Run
    changes: list[Change]

    def to_dict(self) -> dict[str, Any]:
        g, b = self.good, self.bad
        return {"good": {"path": g.path, "verdict": g.report.verdict.title if g.report.verdict else None,
                         "findings": [f.rule_id for f in g.findings]},
                "bad": {"path": b.path, "verdict": b.report.verdict.title if b.report.verdict else None,
                        "verdict_category": b.report.verdict.category if b.report.verdict else None,
                        "findings": [f.rule_id for f in b.findings]},
                "changes": [c.to_dict() for c in self.changes]}


# --------------------------------------------------------------------------- facts of one run


def _by_value(model: Any, get: Callable[[Any], str | None]) -> dict[str, list[str]]:
    out: dict[str, set[str]] = {}
    for p in model.processes.values():
        v = get(p)
        if v is None or v == "":
            continue
        out.setdefault(v, set()).add(p.host or p.source)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _ifaces(ifs: Any) -> str | None:
    return ",".join(i.name for i in ifs) if ifs else None


def _gdr(p: Any) -> str | None:
    if not p.net_conns:
        return None
    if p.gdr_conns == p.net_conns:
        return "on"
    return "off" if not p.gdr_conns else "partial"


def _env(name: str) -> Callable[[Any], str | None]:
    return lambda p: p.env.get(name)


def run_facts(model: Any) -> tuple[dict[str, tuple[str, dict[str, list[str]]]], dict[str, float]]:
    """(facts, numbers) of one run: facts compare as sets of values, numbers as magnitudes."""
    facts: dict[str, tuple[str, dict[str, list[str]]]] = {}

    def put(key: str, area: str, vals: dict[str, list[str]]) -> None:
        if vals:
            facts[key] = (area, vals)

    versions = _by_value(model, lambda p: p.nccl_version)
    cuda = _by_value(model, lambda p: p.cuda_version)
    for ev in model.versions_unattached:  # the bare banner of old versions (rank 0 only)
        versions.setdefault(ev.version, [])
        if getattr(ev, "cuda", None):
            cuda.setdefault(ev.cuda, [])
    put("NCCL version", "version", versions)
    put("CUDA version", "version", cuda)
    names = sorted({k for p in model.processes.values() for k in p.env})
    for name in names:
        put("env:" + name, "env", _by_value(model, _env(name)))
    put("bootstrap interface", "interface", _by_value(model, lambda p: _ifaces(p.bootstrap)))
    put("socket interfaces", "interface", _by_value(model, lambda p: _ifaces(p.socket_ifaces)))
    put("network", "network", _by_value(model, lambda p: p.network or ("IB (no device)" if p.ib_none else None)))
    put("IB devices", "ib", _by_value(model, lambda p: ",".join(sorted(f"{d.hca}:{d.port}/{d.link}"
                                                                       for d in p.ib_devices)) or None))
    put("net plugins", "network", _by_value(model, lambda p: ",".join(sorted(set(p.plugins))) or None))
    put("GPUDirect RDMA", "gdr", _by_value(model, _gdr))
    comms = [c for c in model.comms.values() if c.key != "unknown"] or list(model.comms.values())
    big = max(comms, key=lambda c: (c.nranks or 0, len(c.rings), len(c.ranks)), default=None)
    numbers: dict[str, float] = {}
    if big is not None:
        if big.rings:
            facts["channels"] = ("topology", {str(len(big.rings)): []})
            shapes = Counter("same order" if o == tuple(range(len(o))) else "reordered" for o in big.rings.values())
            facts["rings"] = ("topology", {", ".join(f"{k} x{v}" for k, v in sorted(shapes.items())): []})
        if big.transports:
            facts["transports"] = ("topology", {", ".join(sorted(big.transports)): []})
        tim = [r for r in big.ranks.values() if r.timed is not None]
        if tim:
            totals = [r.init_total for r in tim]
            numbers["init time total (median s)"] = statistics.median(totals)
            numbers["init time total (max s)"] = max(totals)
            phases: dict[str, list[float]] = {}
            for r in tim:
                for name, v in r.init_phases:
                    phases.setdefault(name, []).append(v)
            for name, vs in phases.items():
                numbers[f"init time {name} (median s)"] = statistics.median(vs)
                numbers[f"init time {name} (max s)"] = max(vs)
    nranks = max((c.nranks or 0 for c in model.comms.values()), default=0)
    if nranks:
        numbers["ranks"] = nranks
    if model.hosts:
        numbers["hosts"] = len(model.hosts)
    avg = [ev.busbw for ev in model.events.get("nccltests_avg_bw", ())]
    if avg:
        numbers["nccl-tests avg busbw (GB/s)"] = statistics.median(avg)
    rows = [max(r.busbw, r.ip_busbw or 0.0) for r in model.nccltests_rows]
    if rows:
        numbers["nccl-tests peak busbw (GB/s)"] = max(rows)
    return facts, numbers


# --------------------------------------------------------------------------- comparing


def _show(vals: dict[str, list[str]] | None) -> str:
    if not vals:
        return "(not logged)"
    if len(vals) == 1:
        (v, hosts), = vals.items()
        return v if len(hosts) <= 1 else f"{v} (all {len(hosts)} hosts)"
    parts = []
    for v, hosts in sorted(vals.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        on = ", ".join(hosts[:4]) + (f" +{len(hosts) - 4}" if len(hosts) > 4 else "")
        parts.append(f"{v} on {on}")
    return "; ".join(parts)


def _matches(key: str, pattern: str) -> bool:
    return key.startswith(pattern[:-1]) if pattern.endswith("*") else key == pattern


def _pointer(key: str, bad: Run) -> tuple[int, Finding, int] | None:
    """(finding index, finding, pattern index) of the first BAD finding that points at ``key``."""
    for i, f in enumerate(f for f in bad.findings if f.severity in ("error", "warning")):
        for j, pat in enumerate(POINTS_AT.get(f.category, ())):
            if _matches(key, pat):
                return i, f, j
    return None


def _numeric_change(key: str, g: float, b: float) -> bool:
    if key in ("ranks", "hosts"):
        return g != b
    if key.startswith("init time"):
        return abs(b - g) >= 0.1 and (b > 1.5 * g or g > 1.5 * b)
    if key.startswith("nccl-tests"):
        return abs(b - g) > 0.1 * max(g, b)
    return g != b


def compare(good: Run, bad: Run) -> list[Change]:
    changes: list[Change] = []

    def add(key: str, area: str, gv: str, bv: str, detail: dict[str, Any]) -> None:
        ptr = _pointer(key, bad)
        score: float
        if ptr is not None:
            i, f, j = ptr
            score = 1000 - 100 * i - j
            why = f"{'top ' if i == 0 else ''}BAD finding {f.rule_id} ({f.category}) points here"
        else:
            score, why = BASE.get(area, 10) + (1 if key == "NCCL version" else 0), ""
            if "(not logged)" in (gv, bv):  # one run did not get that far (or logs less): weaker evidence
                score /= 2
                why = "not logged in the " + ("GOOD" if gv == "(not logged)" else "BAD") + " run"
        changes.append(Change(key, area, gv, bv, score, why, detail))

    for key in sorted(set(good.facts) | set(bad.facts)):
        area = (good.facts.get(key) or bad.facts[key])[0]
        gv = good.facts.get(key, (area, {}))[1]
        bv = bad.facts.get(key, (area, {}))[1]
        if set(gv) == set(bv):
            continue
        add(key, area, _show(gv), _show(bv), {"good": gv, "bad": bv})
    for key in sorted(set(good.numbers) | set(bad.numbers)):
        g, b = good.numbers.get(key), bad.numbers.get(key)
        area = ("init" if key.startswith("init") else "bandwidth" if key.startswith("nccl-tests") else "scale")
        if g is None or b is None:
            if key.startswith("init time") and "total" not in key:
                continue  # a phase only one NCCL version reports
            add(key, area, "(not logged)" if g is None else number(g), "(not logged)" if b is None else number(b),
                {"good": g, "bad": b})
        elif _numeric_change(key, g, b):
            add(key, area, number(g), number(b), {"good": g, "bad": b, "ratio": round(b / g, 2) if g else None})
    gids = {f.rule_id: f for f in good.findings}
    bids = {f.rule_id: f for f in bad.findings}
    for rid in sorted(set(bids) - set(gids)):
        f = bids[rid]
        changes.append(Change(f"finding {rid}", "findings", "-", f"{f.severity}: {f.title}",
                              BASE["findings"] + (2 if f.severity == "error" else 1 if f.severity == "warning" else 0),
                              "only in the BAD run", {"category": f.category}))
    for rid in sorted(set(gids) - set(bids)):
        f = gids[rid]
        changes.append(Change(f"finding {rid}", "findings", f"{f.severity}: {f.title}", "-", BASE["findings"] - 2,
                              "only in the GOOD run", {"category": f.category}))
    changes.sort(key=lambda c: (-c.score, c.key))
    return changes
