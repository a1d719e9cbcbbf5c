"""Runs of files shared between this process and forked workers (``--jobs N``).

Merging is associative (first-wins settings, summed counts, capped concatenations), so
each worker merges a contiguous run of files into one model before sending it back,
and the parent merges the runs in order: the model a sequential merge gives, from a
few hundred models instead of one per rank file.  Except at the bounds of what the model
tracks (``model.merge.fits``): a run that would meet one is merged file by file here.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from ..ingest.sources import InputFile, Notice
from ..model.build import parse_one, worker_cache
from ..model.job import JobModel
from ..model.merge import merge
from ..parse.anchors import PREFILTER_BYTES
from ..util.gcpause import paused
from .forked import available, run_in_order

#: below this many input bytes one process is faster than starting workers
PARALLEL_MIN_BYTES = 8 * 1024 * 1024

Result = tuple[JobModel, list[Notice], int]


def worth_parallel(files: list[InputFile], jobs: int) -> bool:
    """Processes pay off only for several files and enough bytes, where fork exists."""
    if jobs <= 1 or len(files) < 2 or not available():
        return False
    total = 0
    for f in files:  # until there is enough: a stat each of 16,384 rank files was 40 ms before any work
        try:
            total += os.path.getsize(f.path)
        except OSError:
            pass
        if total > PARALLEL_MIN_BYTES:
            return True
    return False


def _parse_task(args: tuple[list[InputFile], bool, frozenset[str]]) -> Result:
    """Worker task: a contiguous run of files merged into one model before it is sent back."""
    files, cache, drop = args
    model = JobModel(drop)
    notices: list[Notice] = []
    read = 0
    # acyclic events: collection passes are pure overhead.  Paused, not turned off: the lead parses
    # runs too, and its caller's collector must be as it was after
    with paused():
        for inp in files:
            part, file_notices, ok = parse_one(inp, cache, drop=drop)
            merge(model, part)
            notices.extend(file_notices)
            read += int(ok)
    return model, notices, read


def _runs(files: list[InputFile], jobs: int) -> list[list[InputFile]]:
    """Contiguous runs of files, shrinking towards the end (guided scheduling): big runs
    keep the per-run cost low, small last runs keep the processes finishing together."""
    out, i = [], 0
    while i < len(files):
        size = max(1, min(256, (len(files) - i) // (jobs * 4)))
        out.append(files[i:i + size])
        i += size
    return out


def parallel_results(files: list[InputFile], jobs: int, cache: bool,
                     meanwhile: Callable[[], None] | None = None,
                     drop: frozenset[str] = frozenset(),
                     fits: Callable[[JobModel], bool] | None = None) -> Iterator[Result]:
    """Per-run results in input order from this process and ``jobs - 1`` forked workers
    (:mod:`.forked`); ``meanwhile()`` runs here once the workers have started; ``drop``: as
    for :func:`~ncclsleuth.model.build.parse_one`; ``fits(run model)``: whether the caller's
    model takes the run whole (asked when the run is next, after the runs before it are
    merged), else the run's files are parsed here and come one by one."""
    PREFILTER_BYTES.preload()  # the workers inherit RE2 (each reads PARALLEL_MIN_BYTES / jobs or more)
    runs = _runs(files, jobs)
    workers = min(jobs - 1, len(runs) - 1)  # this process takes a run too: no idle worker
    results = run_in_order(len(runs), lambda i: _parse_task((runs[i], cache, drop)), workers, meanwhile,
                           worker_done=lambda: worker_cache(cache).save())
    try:
        for run in runs:  # not zip(runs, results): zip holds its last result until the next is in
            got = next(results)
            yield from in_order(got, run, cache, drop, fits)
            del got  # merged: the run model's shell and the events the job model did not keep
    finally:
        results.close()  # a generator: stops the workers if the caller stopped early


def in_order(got: Result, run: list[InputFile], cache: bool, drop: frozenset[str],
             fits: Callable[[JobModel], bool] | None) -> Iterator[Result]:
    """A run's result, or where the caller's model cannot take it whole (a bound would decide
    what is kept), its files' own results, parsed here: what ``--jobs 1`` merges."""
    if fits is None or len(run) == 1 or fits(got[0]):
        yield got
        return
    for f in run:
        yield parse_one(f, cache, drop=drop)
