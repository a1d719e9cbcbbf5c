"""``--jobs N`` on a big file: its byte ranges parsed by this process and the forked workers.

The common input of a big job is one file holding every rank (a Slurm ``slurm-N.out``, one
``kubectl logs`` dump).  A plain file (not compressed, not a Flight Recorder dump or an
``ncclras`` report, not an odd encoding) of at least ``piece_bytes`` bytes is cut into
pieces at block starts (:func:`~ncclsleuth.ingest.blocks.block_start`: the pieces read the
blocks the whole file's reader reads), whose first line numbers are found as the pieces are
parsed (:class:`~ncclsleuth.ingest.blocks.Firsts`); the pieces go to the workers like runs
of files, and the lead process assembles the file's model from them in order
(:mod:`ncclsleuth.parse.pieces`), so the report is the one of the file parsed whole.  Other
files go in runs as in :mod:`.local`.
"""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..ingest import dumps
from ..ingest.blocks import Firsts, RangeReader, Span, block_start
from ..ingest.decode import COMPRESSED_MAGIC, MAX_LINE_BYTES, looks_binary, open_regular, repair_notes
from ..ingest.sources import InputFile, Notice
from ..model.build import parse_piece, worker_cache
from ..model.job import JobModel
from ..parse.anchors import PREFILTER_BYTES
from ..parse.grammar import ShapeCache
from ..parse.lines import Carry, FileParser, tail_cap
from ..parse.pieces import CUT_NOTICE, Piece, StepSampler, replay, taken, whole
from ..parse.tail import Kept
from .forked import available, run_in_order
from .local import Result, _parse_task, _runs, in_order

#: the size of a piece: a file of at least twice this many bytes is parsed in pieces of
#: about this size (smaller pieces cost more in kept end blocks sent back than they gain)
PIECE_BYTES = 8 << 20
#: at most this many pieces per process: the lead process assembles the model and runs
#: the rules after the last piece, so pieces small enough that its share of the parsing
#: shrinks to fit (claimed as the processes are free) keep the processes finishing together
PIECES_PER_JOB = 8


def _splittable(inp: InputFile, size: int, piece_bytes: int) -> bool:
    """A plain local text file big enough to cut (compressed files cannot be seeked)."""
    if type(inp) is not InputFile or inp.path == "-" or "://" in inp.path or size < 2 * piece_bytes:
        return False
    try:
        with open_regular(inp.path) as f:
            head = f.read(8192)
    except OSError:
        return False
    odd = head.startswith((b"\xff\xfe", b"\xfe\xff")) or (b"\n" not in head and b"\r" in head)
    return not (odd or looks_binary(head) or dumps.sniff_bytes(head) is not None
                or head.startswith(COMPRESSED_MAGIC))


def spans(path: str, size: int, n: int) -> list[Span]:
    """``n`` pieces (fewer where block starts coincide) of a file, with their first line numbers
    counted here (what :func:`cut`'s table finds as the pieces are parsed)."""
    cuts, firsts = cut(path, size, n)
    return [Span(s.start, s.end, firsts.first(k)) for k, s in enumerate(cuts)]


def cut(path: str, size: int, n: int) -> tuple[list[Span], Firsts]:
    """``n`` pieces (fewer where block starts coincide) of a file, and the table of their first
    line numbers, found as they are parsed (:class:`~ncclsleuth.ingest.blocks.Firsts`): each
    span's own ``first`` is 0, not known here, but the first piece's."""
    from ..ingest import blocks

    block = blocks.BLOCK
    with open_regular(path) as f:
        starts = [0]
        for i in range(1, n):
            s = block_start(f, size * i // n, block)
            if s is not None and s > starts[-1]:
                starts.append(s)
    ends = [*starts[1:], size]
    return [Span(a, b, int(a == 0)) for a, b in zip(starts, ends)], Firsts(path, starts)


def plan(files: list[InputFile], jobs: int, piece_bytes: int = PIECE_BYTES) -> list[tuple[Any, ...]] | None:
    """The work items: ``("run", files)`` and ``("piece", file, spans, firsts, k)``; None when no file is
    worth cutting (or processes cannot fork)."""
    if jobs <= 1 or not available():
        return None
    sizes = []
    for f in files:
        try:
            sizes.append(os.path.getsize(f.path) if type(f) is InputFile and f.path != "-" else 0)
        except OSError:
            sizes.append(0)
    big = [i for i, (f, s) in enumerate(zip(files, sizes)) if _splittable(f, s, piece_bytes)]
    if not big:
        return None
    items: list[tuple[Any, ...]] = []
    small: list[InputFile] = []
    for i, f in enumerate(files):
        if i not in big:
            small.append(f)
            continue
        items.extend(("run", r) for r in (_runs(small, jobs) if small else []))
        small = []
        n = max(2, min(sizes[i] // piece_bytes, jobs * PIECES_PER_JOB))
        sp, firsts = cut(f.path, sizes[i], n)
        items.extend(("piece", f, sp, firsts, k) for k in range(len(sp)))
    items.extend(("run", r) for r in (_runs(small, jobs) if small else []))
    return items


def _work(item: tuple[Any, ...], cache: bool, drop: frozenset[str]) -> Any:
    if item[0] == "run":
        return _parse_task((item[1], cache, drop))
    _, f, sp, firsts, k = item
    return parse_piece(f, sp, firsts, k, worker_cache(cache), drop)


class Assembler:
    """The model of one file from its pieces, fed in order (a piece already covered by a
    parse here after a fallback is skipped)."""

    def __init__(self, inp: InputFile, spans: list[Span], firsts: Firsts, shapes: ShapeCache,
                 drop: frozenset[str]) -> None:
        self.inp, self.spans, self.firsts, self.shapes, self.drop = inp, spans, firsts, shapes, drop
        self.source = inp.display
        self.model = JobModel(drop)
        self.model.add_source(self.source)
        self.state = Carry()
        self.steps = StepSampler(self.state)
        self.tail = FileParser(self.source, shapes, keep_text=False, use_catalog=False)
        #: (first line, characters, byte offset) of the blocks the file's tail is read from
        self.kept: deque[tuple[int, int, int]] = deque()
        self.kept_chars = 0
        self.next = 0
        self.lines = 0
        self.repairs = [0, 0, 0]
        self.notices: list[Notice] = []
        #: pieces parsed again here (their state at the start was not a fresh parser's)
        self.reparsed = 0

    def feed(self, p: Piece) -> None:
        """Take piece ``p`` (the next in order) or parse it again here."""
        if p.index < self.next:
            return
        after = taken(self.state, p) if p.index else p.carry
        if after is None or (p.open_end and p.index < len(self.spans) - 1):
            p = self._again(p.index)
            after = p.carry
        self._take(p, after)

    def _again(self, k: int) -> Piece:
        """Pieces from ``k`` parsed here, continuing from the file's state at ``k``, up to the
        first piece end where nothing is open."""
        self.reparsed += 1
        return parse_piece(self.inp, self.spans, self.firsts, k, self.shapes, self.drop, self.state)

    def _take(self, p: Piece, after: Carry) -> None:
        replay(self.model, self.source, p.ops, whole if p.resumed else self.steps)
        if p.resumed:
            self.steps = StepSampler(p.carry)
        before = self.state.ranks
        for first, chars, seen, at in p.ends:
            self._keep(first, chars, before | frozenset(seen), at)
        self.state = after
        self.state.step_counts, self.state.steps_done = dict(self.steps.counts), self.steps.done
        self.lines = p.lines
        cuts = self.repairs[2]
        self.repairs = [a + b for a, b in zip(self.repairs, p.repairs)]
        self.notices.extend(n for n in p.notices if not (cuts and CUT_NOTICE in n.message))
        self.next = p.until + 1

    def _keep(self, first: int, chars: int, ranks: frozenset[int], at: int) -> None:
        """Which blocks the whole file's parser would keep for the tail (``FileParser._keep_block``),
        by their sizes: the texts are read again once, at the end."""
        kept = self.kept
        kept.append((first, chars, at))
        self.kept_chars += chars
        cap = tail_cap(ranks)
        while self.kept_chars - kept[0][1] >= cap and len(kept) > 1:
            self.kept_chars -= kept.popleft()[1]

    def _end_blocks(self) -> Kept:
        """The kept end blocks, read again (a range reader from the first: the same blocks), those
        older than the newest ``TAIL_CHARS`` kept as their offsets in the file, as the whole file's
        parser keeps them, and read once more one at a time by the tail's scan: an interleaved
        file's tail is up to 8 M characters, which held as text were ~20 MB more at the peak of an
        8,000-rank file's ``--jobs 2`` build than its ``--jobs 1`` one."""
        if not self.kept:
            return Kept()
        first, _, at = self.kept[0]
        reader = RangeReader(self.inp, at, self.spans[-1].end, first)
        blocks = Kept(reader, source=reader)
        if [b[0] for b in blocks] != [k[0] for k in self.kept]:  # the file changed meanwhile
            blocks = Kept(blocks[-len(self.kept):])
        return blocks

    def done(self) -> tuple[JobModel, list[Notice], bool]:
        """The file's model (as ``parse_one`` makes it) and its notices."""
        self.tail.end_blocks(self._end_blocks())
        for ev in self.tail.tail(self.state.ranks):
            self.model.add(ev)
        self.model.settle()
        self.model.lines += self.lines
        reader = _Notes(self.inp)
        reader.notices = self.notices
        bad, nul, cut = self.repairs
        repair_notes(reader, bad, nul, cut, MAX_LINE_BYTES)
        return self.model, reader.notices, True


class _Notes:
    """Where ``repair_notes`` says what was repaired in the whole file."""

    def __init__(self, inp: InputFile) -> None:
        self.inp = inp
        self.notices: list[Notice] = []

    def _note(self, msg: str, severity: str = "warning") -> None:
        self.notices.append(Notice(self.inp.display, msg, severity))


def split_results(items: list[tuple[Any, ...]], jobs: int, cache: bool,
                  meanwhile: Callable[[], None] | None = None,
                  drop: frozenset[str] = frozenset(),
                  fits: Callable[[JobModel], bool] | None = None) -> Iterator[Result]:
    """Per-run and per-file results in input order, the big files' pieces assembled here
    (``fits``: as for :func:`.local.parallel_results`)."""
    PREFILTER_BYTES.preload()  # the workers inherit RE2 (each reads PARALLEL_MIN_BYTES / jobs or more)
    workers = min(jobs - 1, len(items) - 1)
    results = run_in_order(len(items), lambda i: _work(items[i], cache, drop), workers, meanwhile,
                           worker_done=lambda: worker_cache(cache).save())
    into: Assembler | None = None
    try:
        # not ``zip(items, results)``: zip keeps its last (item, result) pair for reuse until the
        # next result is in, and a piece's recorded events (most of them ones the model does not
        # keep) lived on through the parse of the next
        for item in items:
            got = next(results)
            if item[0] == "run":
                yield from in_order(got, item[1], cache, drop, fits)
                del got
                continue
            _, f, sp, firsts, k = item
            if k == 0:
                into = Assembler(f, sp, firsts, worker_cache(cache), drop)
            assert into is not None
            into.feed(got)
            del got  # replayed: its events are the model's now, or garbage
            if k == len(sp) - 1:
                yield into.done()
                into = None
    finally:
        results.close()  # a generator: stops the workers if the caller stopped early
