"""Facts about settings that must agree across the job: NCCL versions, NCCL_* variables."""
from __future__ import annotations

from collections import Counter, defaultdict

from ... import events as E
from ..job import JobModel, Process
from .base import Record, fact


class NcclVersionMismatch(Record):
    version: str  # the minority's
    majority: str
    hosts: str
    count: int


class ConfigMinority(Record):
    setting: str
    value: str  # the minority's
    majority: str
    hosts: str
    nhosts_minority: int
    nhosts_majority: int


@fact(NcclVersionMismatch)
def nccl_version_mismatch(model: JobModel) -> list[NcclVersionMismatch]:
    """NCCL versions that differ across processes (the minority is named)."""
    vers = model.nccl_versions()
    attached = {ev.version for ev in model.versions_unattached}
    if len(vers) + len(attached - set(vers)) < 2:
        return []
    counts = Counter({v: len(ps) for v, ps in vers.items()})
    for v in sorted(attached - set(vers)):  # sorted: a set's order changes with the hash seed
        counts[v] += 1
    major = counts.most_common(1)[0][0]
    out: list[NcclVersionMismatch] = []
    for v, n in counts.items():
        if v == major:
            continue
        procs = vers.get(v, [])
        # the lines quoted only (a process keeps the place of its line: made again when asked)
        evs = [p.evidence["nccl_version"] for p in procs[:8]] or \
              [ev for ev in model.versions_unattached if ev.version == v]
        hosts = sorted({p.host for p in procs if p.host}) or \
            sorted({at[0] for p in procs if (at := p.said_at("nccl_version"))} or {ev.source for ev in evs})
        major_ev = ([p.evidence["nccl_version"] for p in vers.get(major, [])[:1]] or
                    [ev for ev in model.versions_unattached if ev.version == major])[:1]
        out.append({"version": v, "majority": major, "hosts": ", ".join(hosts[:8]), "count": n,
                    "evidence": evs[:8] + major_ev})
    return out


_CONSISTENT_ENV = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_IB_GID_INDEX", "NCCL_NET",
                   "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NET_GDR_LEVEL", "NCCL_ALGO", "NCCL_PROTO",
                   "NCCL_CROSS_NIC", "NCCL_IB_TC", "NCCL_BUFFSIZE", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE")


@fact(ConfigMinority)
def config_minority(model: JobModel) -> list[ConfigMinority]:
    """Settings where a minority of hosts differs from the majority (env, GDR, IB device count)."""
    out: list[ConfigMinority] = []
    procs = [p for p in model.processes.values() if p.host]
    if len({p.host for p in procs}) < 2:
        return out
    # processes grouped by their values of the watched settings: a handful of groups
    # however many ranks, so the per-setting pass below does not touch every process
    groups: dict[tuple[str | None, ...], tuple[set[str], Process]] = {}
    for p in procs:
        sig = tuple(map(p.env.get, _CONSISTENT_ENV))
        g = groups.get(sig)
        if g is None:
            groups[sig] = ({p.host or "?"}, p)
        else:
            g[0].add(p.host or "?")
    for i, name in enumerate(_CONSISTENT_ENV):
        vals: dict[str, set[str]] = defaultdict(set)
        evs: dict[str, E.Event] = {}
        for sig, (hosts, first) in groups.items():
            val = sig[i]
            v = val if val is not None else "(unset)"
            vals[v] |= hosts
            if "env:" + name in first.evidence:  # a set value always has its env line
                evs.setdefault(v, first.evidence["env:" + name])
        out.extend(_minority(name, vals, evs))
    ibn: dict[str, set[str]] = defaultdict(set)
    ibev: dict[str, E.Event] = {}
    for p in procs:
        if p.ib_devices:
            key = str(len(p.ib_devices))
            ibn[key].add(p.host or "?")
            if key not in ibev:  # the first process's line (made again where it keeps its place)
                ibev[key] = p.evidence["net_ib_devices"]
    out.extend(_minority("number of NET/IB devices", ibn, ibev))
    gdr: dict[str, set[str]] = defaultdict(set)
    for p in procs:
        if p.net_conns:
            gdr["GDR on" if p.gdr_conns else "GDR off"].add(p.host or "?")
    out.extend(_minority("GPUDirect RDMA on NET hops", gdr, {}, allow_no_evidence=True))
    return out


def _minority(name: str, vals: dict[str, set[str]], evs: dict[str, E.Event],
              allow_no_evidence: bool = False) -> list[ConfigMinority]:
    if len(vals) < 2:
        return []
    major = max(vals, key=lambda v: len(vals[v]))
    out: list[ConfigMinority] = []
    for v, hosts in vals.items():
        if v == major or len(hosts) >= len(vals[major]):
            continue
        ev = [e for e in (evs.get(v), evs.get(major)) if e is not None]
        if not ev and not allow_no_evidence:
            continue
        out.append({"setting": name, "value": v, "majority": major, "hosts": ", ".join(sorted(hosts)[:8]),
                    "nhosts_minority": len(hosts), "nhosts_majority": len(vals[major]), "evidence": ev})
    return out
