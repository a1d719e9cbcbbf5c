"""One input -> its own compact :class:`~.job.JobModel`: the unit of work of every engine.

Files are independent until the model merges them, so each is read (block reader),
parsed (fast path: ``keep_text=False``) and folded into a per-file model of its own;
the engines (this process, forked workers, a process pool, Dask) all run this unit and
merge its results in input order (:func:`~.merge.merge`).  A big file may be parsed in
pieces instead (:func:`parse_piece`, :mod:`ncclsleuth.parallel.split`): their records
replayed in order build the model this unit builds.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ingest import dumps
from ..ingest.blocks import BlockReader, Firsts, RangeReader, Span
from ..ingest.sources import InputFile, Notice
from ..parse.grammar import ShapeCache
from ..parse.lines import Carry, FileParser
from . import places
from .job import JobModel

if TYPE_CHECKING:  # a file parsed whole (every paste, every per-rank file) never loads the pieces' code
    from ..events import Event
    from ..parse.pieces import Piece


def _made_again(source: str, line: int, where: int, kind: str) -> Event:
    """A line kept by its place made an event again (:func:`ncclsleuth.parse.again.event`), with the
    shape cache the files were read with where there is one (warm: its shapes in memory)."""
    from ..parse import again  # imported when a fact first quotes such a line, not at every start

    return again.event(source, line, where, kind, _CACHES.get(True) or _CACHES.get(False))


#: the lines a model keeps by their place are made events again by the parser (the model does not
#: import the parse stage; every model that keeps places is built here or merged from those)
places.make_again = _made_again


def parse_one(inp: InputFile, cache: bool = True, shapes: ShapeCache | None = None,
              drop: frozenset[str] = frozenset()) -> tuple[JobModel, list[Notice], bool]:
    """One input file -> (its own JobModel, its notices, whether it was read).

    This is the unit of parallel work: it returns a compact per-file model (aggregates
    and the events rules look at), never the raw lines.  ``drop``: event kinds the model
    does not keep one by one (``UNREAD_KINDS`` for analyze), which lets the parser skip making
    events of those without a handler.
    """
    form, inp = dumps.sniff(inp)  # opened once: the dump reader or the block reader reads on
    if form in ("pickle", "json"):  # a Flight Recorder dump by its first bytes, not a text log
        loaded = dumps.load(inp, form)
        if not loaded.as_text:
            return _dump_one(inp, loaded)
        inp = dumps.as_log(inp, loaded)
    model = JobModel(drop)
    reader = BlockReader(inp)
    src = inp.display
    # events go to the model as they are read, per-connection lines (the most numerous of an
    # INFO log) without event objects
    fp = FileParser(src, shapes or worker_cache(cache), keep_text=False, use_catalog=False, sink=model,
                    drop=drop)
    fp.tail_from(reader)  # the tail's blocks as offsets where the file can be read again
    model.add_source(src)
    parse = fp.parse_block
    ras = None
    if form == "ras":  # an ncclras report: its lines have no prefix, its own parser reads them
        from ..parse.rasreport import RasReportParser

        ras = RasReportParser(src)
    for first, block in reader:
        parse(first, block, reader.byte_at, reader.block_lines, reader.raw)
        if ras is not None:
            for rev in ras.feed(first, block):
                model.add(rev)
    for ev in fp.finish():
        model.add(ev)
    for ev in fp.tail():  # where the file's output stops (its last line and progress line)
        model.add(ev)
    model.settle()
    model.lines += reader.lines
    return model, reader.notices, bool(reader.lines or not reader.notices)


def _dump_one(inp: InputFile, loaded: dumps.Loaded) -> tuple[JobModel, list[Notice], bool]:
    """A Flight Recorder dump's own model: its records, folded when models merge
    (:mod:`.flight`), or only its notice when it was refused."""
    from ..parse.frdump import normalise
    from .flight import FlightRecords

    model = JobModel()
    src = inp.display
    model.add_source(src)
    if loaded.data is None:
        return model, loaded.notices, False
    if loaded.form == "ras_json":  # ncclras -f json
        from ..parse.rasreport import events_from_json

        text = (loaded.text or b"").decode("utf-8", "replace")
        for ev in events_from_json(loaded.data, text, src):
            model.add(ev)
        model.lines += text.count("\n")
        return model, loaded.notices, True
    model.flight = FlightRecords(pending=[normalise(loaded.data, src, loaded.form)])
    return model, loaded.notices, True


def parse_piece(inp: InputFile, spans: list[Span], firsts: Firsts, k: int, shapes: ShapeCache,
                drop: frozenset[str], resume: Carry | None = None) -> Piece:
    """Piece ``k`` of ``inp`` (its byte range in ``spans``, its first line in ``firsts``) parsed by
    one parser with a :class:`Recorder`, from a fresh state; or, from ``resume`` (the true state
    at piece ``k``), pieces ``k`` and on up to the first piece end where nothing is open."""
    from ..parse.pieces import CUT_NOTICE, Piece, Recorder

    probe = JobModel(drop)
    rec = Recorder(probe)
    fp = FileParser(inp.display, shapes, keep_text=False, use_catalog=False, sink=rec, drop=drop)
    fp.piece_tail()
    if resume is not None:
        fp.resume(resume)
    notices: list[Notice] = []
    bad = nul = cut = lines = 0
    ends: list[tuple[int, int, tuple[int, ...], int]] = []
    until = k
    for i in range(k, len(spans) if resume is not None else k + 1):
        until = i
        reader = RangeReader(inp, spans[i].start, spans[i].end, firsts.first(i))
        for first, block in reader:
            ends.append((first, len(block), fp.ranks_seen(), reader.at))
            fp.parse_block(first, block, reader.byte_at, reader.block_lines, reader.raw)
        if reader.pos >= spans[i].end:  # read to its end: the next piece starts on the line after its last
            firsts.learn(i + 1, reader.lines + 1)
        notices.extend(n for n in reader.notices if not (cut and CUT_NOTICE in n.message))  # the file's first only
        b, n, c = reader.repairs
        bad, nul, cut, lines = bad + b, nul + n, cut + c, reader.lines
        if not fp.is_open():
            break
    if until == len(spans) - 1:
        for ev in fp.finish():
            rec.add(ev)
    early, unnamed, named = fp.piece_flags()
    return Piece(k, rec.ops, fp.carry(), fp.is_open(), early, unnamed, named, ends, lines,
                 (bad, nul, cut), notices, resume is not None, until)


_CACHES: dict[bool, ShapeCache] = {}


def worker_cache(enabled: bool) -> ShapeCache:
    """The process's shape cache (``enabled`` or not): shared by every file it parses, and
    inherited warm by forked workers."""
    c = _CACHES.get(enabled)
    if c is None:
        c = _CACHES[enabled] = ShapeCache(enabled=enabled)
    return c
