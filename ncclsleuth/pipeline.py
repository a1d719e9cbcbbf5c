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
    """Processes pay off only for several files and enough bytes (start-up costs ~0.2 s)."""
    if jobs <= 1 or len(files) < 2:
        return False
    total = 0
    for f in files:
        try:
            total += os.path.getsize(f.path)
        except OSError:
            pass
    return total > PARALLEL_MIN_BYTES


def build_model(paths: list[str], cache: bool = True, jobs: int | None = 1, progress=None,  # type: ignore[no-untyped-def]
                engine=None):
    """Parse every input into one :class:`JobModel`; returns (model, notices, files_read).

    Each file is parsed into its own model and merged in input order, whether in this
    process or in ``jobs`` worker processes, so results do not depend on ``jobs``.

    ``engine`` is another source of the per-file results (remote inputs, a Dask
    cluster): ``engine(paths, cache)`` returns an iterable of ``parse_one`` results in
    input order, whose ``notices`` attribute (discovery notices, complete once iterated)
    goes first in the notices, as :func:`discover`'s do here.
    """
    with paused():
        return _build_model(paths, cache, jobs, progress, engine)


def _build_model(paths: list[str], cache: bool, jobs: int | None, progress, engine):  # type: ignore[no-untyped-def]
    from .model import JobModel
    from .model.job import merge

    model = JobModel()
    files_read = 0
    jobs = default_jobs() if jobs is None else jobs
    results: Iterator[tuple[Any, list[Notice], bool]]
    source = None
    if engine is not None:
        pool = None
        notices: list[Notice] = []
        source = engine(paths, cache)
        results = iter(source)
    elif _worth_parallel((found := discover(paths)).files, jobs):
        notices = list(found.notices)
        import concurrent.futures as cf

        pool = cf.ProcessPoolExecutor(max_workers=jobs)
        size = max(1, min(256, len(found.files) // (jobs * 8)))
        runs = [found.files[i:i + size] for i in range(0, len(found.files), size)]
        results = pool.map(_parse_task, [(run, cache) for run in runs])
    else:
        notices = list(found.notices)
        pool = None
        results = (parse_one(f, cache) for f in found.files)
    try:
        for part, file_notices, read in results:
            merge(model, part)
            notices.extend(file_notices)
            files_read += int(read)  # a count: one file serially, a run of files from a worker
            if progress is not None:
                progress(part)
    finally:
        if pool is not None:
            pool.shutdown()
        close = getattr(source, "close", None)
        if close is not None:
            close()
    if source is not None:
        notices[:0] = getattr(source, "notices", [])
    return model, notices, files_read


def analyze(paths: list[str], rules=None, cache: bool = True, jobs: int | None = 1,  # type: ignore[no-untyped-def]
            progress=None, engine=None):
    """The main job: paths -> :class:`~ncclsleuth.report.Report` (and how many files were read)."""
    from .rules.engine import build_report, load_rules

    if rules is None:
        rules, _ = load_rules()
    model, notices, files_read = build_model(paths, cache, jobs, progress, engine)
    report = build_report(model, rules, [n.to_dict() for n in notices])
    return report, files_read
