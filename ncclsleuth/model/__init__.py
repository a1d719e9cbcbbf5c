"""The job model: what the events of all files say about the job as a whole.

Built incrementally (``add(event)`` per event, ``merge`` of per-file models), so a
10,000-rank job is never held as a list of millions of events: high-volume kinds
(per-connection transport lines, ring dumps, error traces, plain text) are folded
into aggregates, and the kinds rules match on are kept, with a cap per kind and
process so a repetitive log cannot grow memory without bound.

Derived facts that rules need are computed in :mod:`ncclsleuth.model.facts`.
"""
from __future__ import annotations

from .job import Comm, JobModel, Process, RankState

__all__ = ["JobModel", "Process", "Comm", "RankState"]
