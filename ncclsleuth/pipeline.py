"""The stages wired together: discover inputs, read each file, parse it into events.

Files are independent until the model merges them, so each file is parsed on its own
(:func:`parse_file`); the analyzer and the parallel runner build on that unit.
"""
from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import events as E
from .gcpause import paused
from .grammar import ShapeCache
from .ingest import InputFile, LineReader, Notice, discover
from .parse import FileParser


def parse_file(inp: InputFile, cache: ShapeCache) -> tuple[Iterator[E.Event], LineReader]:
    """Events of one input (lazy) and the reader holding its notices."""
    reader = LineReader(inp)
    fp = FileParser(inp.display, cache)
    return fp.parse_lines(reader), reader


@dataclass
class EventRun:
    """Iterable over the events of many inputs; notices fill in as files are read."""

    paths: list[str]
    cache: bool = True
    notices: list[Notice] = field(default_factory=list)
    files_read: int = 0

    def __iter__(self) -> Iterator[E.Event]:
        found = discover(self.paths)
        self.notices.extend(found.notices)
        shapes = ShapeCache(enabled=self.cache)
        for inp in found.files:
            events, reader = parse_file(inp, shapes)
            yield from events
            self.notices.extend(reader.notices)
            if reader.lines or not reader.notices:
                self.files_read += 1
        shapes.save()


def iter_events(paths: list[str], cache: bool = True) -> EventRun:
    """All events of ``paths`` in file order, streaming."""
    return EventRun(paths, cache)


# --------------------------------------------------------------------------- analyze


def parse_one(inp: InputFile, cache: bool = True, shapes: ShapeCache | None = None):  # type: ignore[no-untyped-def]
    """One input file -> (its own JobModel, its notices, whether it was read).

    This is the unit of parallel work: it returns a compact per-file model (aggregates
    and the events rules look at), never the raw lines.
    """
    from .model import JobModel

    from .fastread import BlockReader

    model = JobModel()
    reader = BlockReader(inp)
    fp = FileParser(inp.display, shapes or _worker_cache(cache), keep_text=False, use_catalog=False,
                    fold_conns=True)
    model.add_source(inp.display)
    add, add_conn, src = model.add, model.add_conn, inp.display
    for first, block in reader:
        for ev in fp.parse_block(first, block):
            if type(ev) is tuple:
                add_conn(src, *ev[1:])
            else:
                add(ev)
    for ev in fp.finish():
        add(ev)
    model.lines += reader.lines
    return model, reader.notices, bool(reader.lines or not reader.notices)


_CACHES: dict[bool, ShapeCache] = {}


def _worker_cache(enabled: bool) -> ShapeCache:
    c = _CACHES.get(enabled)
    if c is None:
        c = _CACHES[enabled] = ShapeCache(enabled=enabled)
    return c


def _parse_task(args: tuple[list[InputFile], bool]):  # type: ignore[no-untyped-def]
    """Worker task: a contiguous run of files merged into one model before it is sent back.

    Merging is associative (first-wins settings, summed counts, capped concatenations),
    so merging runs of files in the worker and the runs in order in the parent gives the
    model a sequential merge gives; the parent then merges a few hundred models, not one
    per rank file.
    """
    from .model import JobModel
    from .model.job import merge

    files, cache = args
    gc.disable()  # as in the parent: acyclic events, collection passes are pure overhead here
    model = JobModel()
    notices: list[Notice] = []
    read = 0
    for inp in files:
        part, file_notices, ok = parse_one(inp, cache)
        merge(model, part)
        notices.extend(file_notices)
        read += int(ok)
    return model, notices, read


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)


#: below this many input bytes one process is faster than starting workers
PARALLEL_MIN_BYTES = 8 * 1024 * 1024


def _worth_parallel(files: list[InputFile], jobs: int) -> bool:
    """Processes pay off only for several files and enough bytes, where fork exists."""
    from .workers import available

    if jobs <= 1 or len(files) < 2 or not available():
        return False
    total = 0
    for f in files:
        try:
            total += os.path.getsize(f.path)
        except OSError:
            pass
    return total > PARALLEL_MIN_BYTES


def build_model(paths: list[str], cache: bool = True, jobs: int | None = 1, progress=None,  # type: ignore[no-untyped-def]
                engine=None, meanwhile=None):
    """Parse every input into one :class:`JobModel`; returns (model, notices, files_read).

    Each file is parsed into its own model and merged in input order, whether in this
    process or in ``jobs`` worker processes, so results do not depend on ``jobs``.

    ``engine`` is another source of the per-file results (remote inputs, a Dask
    cluster): ``engine(paths, cache)`` returns an iterable of ``parse_one`` results in
    input order, whose ``notices`` attribute (discovery notices, complete once iterated)
    goes first in the notices, as :func:`discover`'s do here.

    ``meanwhile()`` is called once before the first result: right after the worker
    processes start, so that work done there (loading the rule pack) overlaps their
    parsing, or before any parsing when there are no workers (a broken rule file is
    reported at once, not after a 2 GB log was read).
    """
    with paused():
        return _build_model(paths, cache, jobs, progress, engine, meanwhile)


def _build_model(paths: list[str], cache: bool, jobs: int | None, progress, engine, meanwhile):  # type: ignore[no-untyped-def]
    from .model import JobModel
    from .model.job import merge

    model = JobModel()
    files_read = 0
    jobs = default_jobs() if jobs is None else jobs
    results: Iterator[tuple[Any, list[Notice], bool]]
    source = None
    if engine is not None:
        notices: list[Notice] = []
        source = engine(paths, cache)
        results = iter(source)
    elif _worth_parallel((found := discover(paths)).files, jobs):
        notices = list(found.notices)
        results = source = _parallel_results(found.files, jobs, cache, meanwhile)  # closed below: stops the pool
        meanwhile = None
    else:
        notices = list(found.notices)
        results = (parse_one(f, cache) for f in found.files)
    if meanwhile is not None:
        meanwhile()
    try:
        for part, file_notices, read in results:
            merge(model, part)
            notices.extend(file_notices)
            files_read += int(read)  # a count: one file serially, a run of files from a worker
            if progress is not None:
                progress(part)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
    if engine is not None:
        notices[:0] = getattr(source, "notices", [])
    else:
        _worker_cache(cache).save()
    return model, notices, files_read


def _runs(files: list[InputFile], jobs: int) -> list[list[InputFile]]:
    """Contiguous runs of files, shrinking towards the end (guided scheduling): big runs
    keep the per-run cost low, small last runs keep the processes finishing together."""
    out, i = [], 0
    while i < len(files):
        size = max(1, min(256, (len(files) - i) // (jobs * 4)))
        out.append(files[i:i + size])
        i += size
    return out


def _parallel_results(files: list[InputFile], jobs: int, cache: bool, meanwhile=None):  # type: ignore[no-untyped-def]
    """Per-run results in input order from this process and ``jobs - 1`` forked workers
    (:mod:`ncclsleuth.workers`); ``meanwhile()`` runs here once the workers have started."""
    from .workers import run_in_order

    runs = _runs(files, jobs)
    workers = min(jobs - 1, len(runs) - 1)  # this process takes a run too: no idle worker
    yield from run_in_order(len(runs), lambda i: _parse_task((runs[i], cache)), workers, meanwhile,
                            worker_done=lambda: _worker_cache(cache).save())


def analyze(paths: list[str], rules=None, cache: bool = True, jobs: int | None = 1,  # type: ignore[no-untyped-def]
            progress=None, engine=None):
    """The main job: paths -> :class:`~ncclsleuth.report.Report` (and how many files were read).

    ``rules``: a list of rules, a function returning one, or None for the shipped pack.
    A function (or the default) is called while the workers parse (see ``meanwhile`` in
    :func:`build_model`), so loading the rule pack and its modules overlaps parsing.
    """
    loaded: list[Any] = []

    def load() -> None:
        if rules is None:
            from .rules.engine import load_rules

            loaded.append(load_rules()[0])
        else:
            loaded.append(rules() if callable(rules) else rules)

    with paused():  # one pause: re-enabled in between, gc would first walk the whole model (~1 s at 16k ranks)
        model, notices, files_read = build_model(paths, cache, jobs, progress, engine, meanwhile=load)
        from .rules.engine import build_report

        report = build_report(model, loaded[0], [n.to_dict() for n in notices])
    return report, files_read
