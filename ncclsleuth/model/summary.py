"""The job summary printed under the findings: ranks, hosts, versions, network, init."""
from __future__ import annotations

from collections import Counter
from typing import Any

from ..events import REGISTRY
from .job import JobModel, Process

#: the kinds any program's output can hold (tracebacks, plain text, step times, ...): a
#: file of only these is not the output of NCCL, PyTorch distributed or nccl-tests
_GENERIC = frozenset(k for k, cls in REGISTRY.items() if cls.__module__.endswith(".generic"))


def recognised_lines(model: JobModel) -> int:
    """Lines NCCL, PyTorch distributed or nccl-tests wrote (0: not a log of theirs)."""
    return sum(n for k, n in model.kind_counts.items() if k not in _GENERIC)


def _os_processes(procs: list[Process]) -> int:
    """The processes the logs show: each (host, pid), and a file's lines with no pid as one
    process only where no line of that file names its pid.  A per-rank file's PyTorch lines
    (``[rank3]:[W1129 ...]``: no pid) are the process its NCCL lines name: counted as another,
    a job of 2,048 ranks in per-rank files had 4,096 processes."""
    with_pid = {p.source for p in procs if p.pid is not None}
    return sum(1 for p in procs if p.pid is not None or p.source not in with_pid)


def summarize(model: JobModel) -> dict[str, Any]:
    """Plain-builtins summary of the job (stable keys: part of the JSON schema)."""
    procs = list(model.processes.values())
    versions = Counter(p.nccl_version for p in procs if p.nccl_version)
    for ev in model.versions_unattached:
        versions[ev.version] += 0 if ev.version in versions else 1
    cuda = Counter(p.cuda_version for p in procs if p.cuda_version)
    nets: dict[str, set[str]] = {}  # sets: a list scanned per process was quadratic in hosts
    for p in procs:
        if p.network:
            nets.setdefault(p.network, set()).add(p.host or "?")
    ib = sorted({f"{d.hca}/{d.link}" for p in procs for d in p.ib_devices})
    comms = []
    for c in sorted(model.comms.values(), key=lambda c: (-(c.nranks or 0), c.key)):
        if c.key == "unknown":
            continue
        totals = [r.init_total for r in c.ranks.values() if r.timed is not None]
        comms.append({"comm": c.key, "nranks": c.nranks, "ranks_seen": len(c.ranks),
                      "init_complete": sum(1 for r in c.ranks.values() if r.done is not None),
                      "init_max_s": round(max(totals), 3) if totals else None,
                      "channels": len(c.rings) or None,
                      "transports": dict(sorted(c.transports.items()))})
    nranks = max((c.nranks or 0 for c in model.comms.values()), default=0)
    launcher = {p.launcher_rank for p in procs if p.launcher_rank is not None}
    avg_bw = [ev for ev in model.events.get("nccltests_avg_bw", ())]
    return {
        "files": len(model.sources),
        "lines": model.lines,
        "recognised_lines": recognised_lines(model),
        "hosts": model.hosts,
        "processes": _os_processes(procs),
        "ranks": nranks or len(launcher) or _dump_ranks(model) or None,
        "nccl_versions": dict(sorted(versions.items())),
        "cuda_versions": dict(sorted(cuda.items())),
        "network": {k: sorted(v) for k, v in sorted(nets.items())},
        "ib_devices": ib,
        "communicators": comms[:32],
        "communicators_total": len(comms),
        "nccltests_avg_busbw": [e.busbw for e in avg_bw][:8],  # type: ignore[attr-defined]
        "events": dict(sorted(model.kind_counts.items())),
    }


def _dump_ranks(model: JobModel) -> int | None:
    """The rank count of Flight Recorder dumps, where the inputs hold some."""
    if model.flight is None:
        return None
    from .facts.flight import expected_world

    return expected_world(model)
