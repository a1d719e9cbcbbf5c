"""One input -> its own compact :class:`~.job.JobModel`: the unit of work of every engine.

Files are independent until the model merges them, so each is read (block reader),
parsed (fast path: ``keep_text=False``) and folded into a per-file model of its own;
the engines (this process, forked workers, a process pool, Dask) all run this unit and
merge its results in input order (:func:`~.merge.merge`).
"""
from __future__ import annotations

from ..ingest.blocks import BlockReader
from ..ingest.sources import InputFile, Notice
from ..parse.grammar import ShapeCache
from ..parse.lines import FileParser
from .job import JobModel


def parse_one(inp: InputFile, cache: bool = True, shapes: ShapeCache | None = None
              ) -> tuple[JobModel, list[Notice], bool]:
    """One input file -> (its own JobModel, its notices, whether it was read).

    This is the unit of parallel work: it returns a compact per-file model (aggregates
    and the events rules look at), never the raw lines.
    """
    model = JobModel()
    reader = BlockReader(inp)
    src = inp.display
    # events go to the model as they are read, per-connection lines (the most numerous of an
    # INFO log) without event objects
    fp = FileParser(src, shapes or worker_cache(cache), keep_text=False, use_catalog=False, sink=model)
    model.add_source(src)
    parse = fp.parse_block
    for first, block in reader:
        parse(first, block)
    for ev in fp.finish():
        model.add(ev)
    for ev in fp.tail():  # where the file's output stops (its last line and progress line)
        model.add(ev)
    model.lines += reader.lines
    return model, reader.notices, bool(reader.lines or not reader.notices)


_CACHES: dict[bool, ShapeCache] = {}


def worker_cache(enabled: bool) -> ShapeCache:
    """The process's shape cache (``enabled`` or not): shared by every file it parses, and
    inherited warm by forked workers."""
    c = _CACHES.get(enabled)
    if c is None:
        c = _CACHES[enabled] = ShapeCache(enabled=enabled)
    return c
