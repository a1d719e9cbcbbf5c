"""The stages wired together: discover inputs, read each file, parse it into events.

Files are independent until the model merges them, so each file is parsed on its own
(:func:`parse_file`); the analyzer and the parallel runner build on that unit.
"""
from __future__ import annotations

import gc
import os
import sys
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


# Work sharing between this process and the workers: one shared counter (_Claims) hands out the
# next run of files to whichever process asks first, so no process sits idle while
# another still has runs to parse.  Each worker parses run after run on its own and puts
# each result on a queue (a feeder thread writes it to the pipe, so the worker never
# waits for this process to read); this process reads the queue only when it needs the
# next result in order.  No executor: with ProcessPoolExecutor each task round-tripped
# through a manager thread here, which needed the GIL from this thread's parsing, and
# the worker sat 1-4 ms idle between runs.


class _Claims:
    """Hands out run indices 0..n-1, each once, to this process and its workers.

    With fork, the counter is 4 bytes of anonymous shared memory under a lock, which the
    workers inherit.  ``multiprocessing.Value`` does the same through ctypes and a heap
    arena in a temporary file: 11 ms of imports and set-up, 1.5% of a 1M-line job's
    serial time.  Other start methods pickle the arguments, so they get the Value.
    """

    def __init__(self, ctx, n: int) -> None:  # type: ignore[no-untyped-def]
        self.n = n
        if ctx.get_start_method() == "fork":
            import mmap

            self.lock, self.mem, self.value = ctx.Lock(), mmap.mmap(-1, 4), None
        else:
            self.lock, self.mem, self.value = None, None, ctx.Value("i", 0)

    def next(self) -> int | None:
        """The next unclaimed index, or None when all are claimed."""
        if self.mem is None:
            with self.value.get_lock():
                i = self.value.value
                if i < self.n:
                    self.value.value = i + 1
        else:
            with self.lock:
                i = int.from_bytes(self.mem[:4], "little")
                if i < self.n:
                    self.mem[:4] = (i + 1).to_bytes(4, "little")
        return i if i < self.n else None


def _worker_loop(claims: _Claims, runs: list[list[InputFile]], cache: bool, out) -> None:  # type: ignore[no-untyped-def]
    """Worker process: parse unclaimed runs until none is left.

    A run that fails here is handed back (``("failed", i)``) rather than reported: this
    process parses it again, so a bug raises there with its own traceback, and a worker
    that dies (killed, out of memory) costs time, not results.
    """
    i = None
    try:
        while (i := claims.next()) is not None:
            out.put((i, _parse_task((runs[i], cache))))
        i = None
        _worker_cache(cache).save()  # templates learned here go to disk too (no-op when none)
    except KeyboardInterrupt:
        return
    except Exception:  # noqa: BLE001 - handed back: the parent parses the run and raises there
        if i is not None:
            out.put(("failed", i))


def _runs(files: list[InputFile], jobs: int) -> list[list[InputFile]]:
    """Contiguous runs of files, shrinking towards the end (guided scheduling): big runs
    keep the per-run cost low, small last runs keep the processes finishing together."""
    out, i = [], 0
    while i < len(files):
        size = max(1, min(256, (len(files) - i) // (jobs * 4)))
        out.append(files[i:i + size])
        i += size
    return out


def _start_method() -> str:
    """fork where there is one: workers inherit the imported modules and cached templates
    (spawn or forkserver would import everything again, ~0.1 s a worker)."""
    import multiprocessing as mp

    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def _parallel_results(files: list[InputFile], jobs: int, cache: bool, meanwhile=None):  # type: ignore[no-untyped-def]
    """Per-run results in input order from ``jobs - 1`` worker processes and this one.

    This process claims runs like a worker whenever the next result in order is not
    ready, so ``--jobs 2`` keeps two cores busy with two processes, and this process's
    share is never pickled.  Results arriving early wait in ``ready`` (a few runs).
    ``meanwhile()`` runs here once the workers have started.
    """
    import multiprocessing as mp
    import queue

    ctx = mp.get_context(_start_method())
    runs = _runs(files, jobs)
    claims = _Claims(ctx, len(runs))
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker_loop, args=(claims, runs, cache, out), daemon=True)
             for _ in range(jobs - 1)]
    for p in procs:
        p.start()
    ready: dict[int, Any] = {}
    handed_back: set[int] = set()

    def take(item: Any) -> None:
        if item[0] == "failed":
            handed_back.add(item[1])
        elif item[0] >= k and item[0] not in ready:
            ready[item[0]] = item[1]

    try:
        if meanwhile is not None:
            meanwhile()
        for k in range(len(runs)):
            while k not in ready:
                try:
                    while True:
                        take(out.get_nowait())
                except queue.Empty:
                    pass
                if k in ready:
                    break
                i = k if k in handed_back else claims.next()
                if i is not None:
                    handed_back.discard(i)
                    ready[i] = _parse_task((runs[i], cache))
                    continue
                try:  # every run is claimed and a worker has run k: wait for it
                    take(out.get(timeout=0.5))
                except queue.Empty:
                    if any(p.exitcode not in (None, 0) for p in procs):
                        handed_back.add(k)  # its worker died: parse run k here
            yield ready.pop(k)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join()
        out.close()


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
