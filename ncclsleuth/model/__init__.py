"""The job model: what the events of all files say about the job as a whole.

Built incrementally (``add(event)`` per event, :func:`.merge.merge` of per-file models
built by :func:`.build.parse_one`), so a 10,000-rank job is never held as a list of
millions of events: high-volume kinds (per-connection transport lines, ring dumps,
error traces, plain text) are folded into aggregates, and the kinds rules match on are
kept, with a cap per kind and process so a repetitive log cannot grow memory without
bound.

Derived facts that rules need are in :mod:`.facts`; the job summary in :mod:`.summary`,
the post-mortem's figures in :mod:`.figures`, the topology graphs in :mod:`.topology`
and what ``watch`` adds (when each process was last heard of) in :mod:`.live`.
"""
from __future__ import annotations

from .job import Comm, JobModel, Process, RankState

__all__ = ["JobModel", "Process", "Comm", "RankState"]
