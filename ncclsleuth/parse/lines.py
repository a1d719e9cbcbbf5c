"""Lines -> typed events: envelope, anchor, grammar (through the shape cache), builder.

One :class:`FileParser` per input stream.  It is stateful only where a meaning spans
lines: a Python traceback becomes one event at its exception line, torchrun's
ChildFailedError block gives its ``key : value`` lines their meaning, the line after
PyTorch's ``Last error:`` is NCCL's last WARN, a message hard-wrapped onto indented
continuation lines is joined, and a diagnostic tool's output (ibstat, nvidia-smi topo -m,
systemctl status, a backtrace, ...) is read by its block reader (:mod:`.blocks`) from the
line the grammar recognises as its start.

Cheap filters first: an NCCL line is found with ``str.find``; any other line costs
one anchor regex search, and only lines with an anchor reach the grammar.
"""
from __future__ import annotations

import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field
from functools import partial
from typing import Any, Protocol

from .. import events as E
from ..ingest.decode import clean
from ..util import reread
from ..util.classes import dataclass
from ..util.rxstore import rx
from . import fastpath, learned, prefixed
from .anchors import PREFILTER, SHORT_RANGE, STEP_START, anchor_starts, block_search
from .blocks import LOOKBACK, LOOKBACK_CHARS, MAX_LOOKBACKS, OPENERS, Blocks
from .build import build
from .envelope import Record, peel
from .grammar import ShapeCache, fixed_key, info_key
from .prefixed import PLAIN_INFO
from .tail import TAIL_CHARS, TAIL_CHARS_MULTI, Kept, Source, ends, last_number, per_rank, progress, ranks_in

#: step-timing lines parsed per rank (a median needs a few dozen, not every step of a run)
STEP_SAMPLES_PER_RANK = 32
#: a rank's sampled step lines after its first handed to the model as (rank, ms), without events,
#: where their shape's learned plan allows (tests switch it off to compare)
LIGHT_STEPS = True
#: a kept line of a block that is not ASCII found by its bytes in the block's bytes (tests switch
#: it off to compare: the same references' texts)
RAW_REFS = True
#: characters between two kept lines of such a block from which the later one is found so (a rank
#: file's training output before its last lines); shorter gaps are counted, which costs less than a
#: search and a count where they are ASCII (an 8,000-rank file's init lines, one every few lines)
RAW_GAP = 16384
# Training-step timing lines (stragglers) carry no keyword of the prefilter; these
# literal-prefixed scans find them in a block at str.find speed.
STEP_SCANS = (rx(r"time: *\d+(?:\.\d+)?ms"), rx(r"elapsed time per iteration \(ms\)"))

#: a comment line of nccl-tests' output ("# nThread 1 ...", "#  Rank  0 ...", "#"): "#" then a blank or
#: the end, unlike a desync report's "\t   #1244 finished ranks:", which opened line-by-line mode
#: for the rest of the file
_TESTS_HEAD = rx(r"\s*#(?:[ \t]|$)")
_ROW = rx(r"\s*\d+\s+\d+\s+[a-z]\w*\s+[\w.-]+\s+[\d.-]")
_EXC = rx(r"(?:[\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt)\b")
_FKEY = rx(r"\s*(?:time|host|rank|exitcode|error_file|traceback)\s*:")
_PG_CLASSES = frozenset(c for c in E.REGISTRY.values()
                        if "pg" in c.FIELD_TYPES)
_TB_START = "Traceback (most recent call last):"
_MISS = object()
#: what ``_from_raw`` returns for a line handed to the sink's ``add_conn``
_FOLDED: Any = object()


class Sink(fastpath.Sink, Protocol):
    """Where the fast path puts what it reads (:class:`ncclsleuth.model.job.JobModel`)."""

    #: tree edges kept for channels below this one (the rest of a ``Trees`` line is not read)
    tree_channels: int

    def add_conn(self, source: str, line: int, host: str, pid: int, src: str, dst: str, via: str,
                 direction: str | None = None) -> str | None: ...

    def launched(self, host: str, pid: int, rank: int) -> None:
        """A process's launcher rank, from the prefix of a line it only counts (:mod:`.prefixed`)."""

    #: kinds of the events :meth:`placed` is told of
    placed_kinds: frozenset[str]

    def placed(self, ev: E.Event) -> None:
        """``ev``, given to :meth:`add`, now keeps its text by reference (its place in its file)."""

_FRAME = rx(r'File "[^"]*", line \d+, in (\S+)')
# Calls that block until every rank arrives: where a waiting rank's traceback points.
_SYNC = rx(r"\b(barrier|monitored_barrier|main_process_first|wait_for_everyone|all_reduce|all_gather\w*"
                   r"|broadcast\w*|reduce_scatter\w*|all_to_all\w*|init_process_group|new_group)\b")
#: lines whose own words mark them a problem, with no level field: Slurm's ``srun: error:`` and
#: ``slurmstepd: error:`` (its error() prefix), the C++ runtime's abort when an exception
#: escapes (libstdc++ ``__gnu_cxx::__verbose_terminate_handler``)
_MARKED = rx(r"(?:srun|slurmstepd|sbatch|salloc|srun\[\d+\]): error: |terminate called "
                     r"(?:after throwing an instance of|recursively|without an active exception)")
_ERRLIKE = rx(r"\b(?:[Ee]rror|ERROR|[Ff]ailed|FAILED|[Ee]xception|[Tt]imed? ?out|[Aa]bort)\b")
#: PyTorch's NCCL error text ends with ``"\nLast error:\n" + ncclGetLastError()`` (NCCLUtils
#: getNcclErrorDetailStr, torch 1.13..2.15): the text of NCCL's last WARN, without its prefix
_LAST_ERROR = "Last error:"
_NO_LAST_ERROR = "Unknown NCCL Error"
#: XLA quotes ncclGetLastError() too (jax-cuda12-pjrt 0.12: nccl_collectives.cc "NCCL operation %s
#: failed: %s. Last NCCL warning(error) log entry (may be unrelated) '%s'.", nccl_communicator.cc
#: "%s. Last NCCL error (maybe unrelated): %s"): (marker, what ends the quote)
_XLA_QUOTES = (("Last NCCL warning(error) log entry (may be unrelated) '", "'"),
               ("Last NCCL error (maybe unrelated): ", ""))
#: what cannot be NCCL's last WARN on the line after "Last error:" (it was empty: a new block starts)
_NOT_A_WARN = ("Exception raised from", "Traceback", "File ", "frame #", "terminate called", "[rank", "#")
#: continuation lines a hard-wrapped message may be joined with (a watchdog message broken
#: after "timeout:" and after its WorkNCCL(...) is three lines)
MAX_JOINS = 3


def _record_texts(text: str, records: list[Record]) -> list[str]:
    """The part of a line each of its glued records was read from (its evidence text).

    Each event keeps its own part, not the whole line: 20,000 records glued onto one 1 MB
    line would otherwise carry 20,000 copies of it into every rule and the report.  Bodies
    are found left to right from where the previous one ended (linear); a body that was
    rewritten (a Markdown link) is its own text.
    """
    out: list[str] = []
    pos = 0
    for i, rec in enumerate(records):
        at = text.find(rec.body, pos) if rec.body else -1
        if at < 0:
            out.append(rec.body)
            continue
        end = len(text) if i == len(records) - 1 else at + len(rec.body)
        out.append(text[pos:end].strip())
        pos = end
    return out


@dataclass
class _Tb:
    """A Python traceback being read: where it starts, its frames so far, the last frame and the
    program's own (not a library's) frame, and the call it was in."""

    start: int
    frames: int = 0
    last_frame: str | None = None
    text: str = ""
    user_frame: str | None = None
    call: str | None = None


# A frame of the program itself, not of the interpreter or an installed package: where
# the rank's own code stopped (the odd one out among ranks is found on this line).
_FRAME_AT = rx(r'File "([^"]*)", line (\d+), in (\S+)')
_LIB = rx(r"site-packages|dist-packages|/lib/python\d|^<|/torch/distributed/")


def _user_frame(body: str) -> str | None:
    m = _FRAME_AT.search(body)
    if m is None or _LIB.search(m.group(1)) or not m.group(1).endswith(".py"):
        return None  # a library's frame, or a launcher's entry point (bin/torchrun)
    return f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)} in {m.group(3)}"


@dataclass
class _Held:
    """A message whose line ends where more must follow (``...timeout:``), held until the next
    line says whether it continues there (indented) or not."""

    lineno: int
    text: str
    rec: Record
    events: list[E.Event]
    joins: int = 0


@dataclass
class ParseStats:
    """Counts for the coverage figure and the benchmark."""

    lines: int = 0
    records: int = 0
    nccl_records: int = 0
    nccl_unknown: int = 0  # nccl_other without a catalog match
    failed: int = 0  # lines the parser could not handle (kept as problem lines where they look like one)
    first_failure: str | None = None
    by_kind: dict[str, int] = field(default_factory=dict)


#: ``sys.getrefcount``; None where the interpreter has none (not CPython)
_GETREFCOUNT: Callable[[object], int] | None = getattr(sys, "getrefcount", None)


def _count_of_a_local() -> int:
    """What ``sys.getrefcount`` says of an object that only a local variable of its caller holds
    (0 without it)."""
    obj = object()
    return 0 if _GETREFCOUNT is None else _GETREFCOUNT(obj)


#: :func:`_held_elsewhere`'s count of an event that only its caller's local variable holds (that
#: local, the argument, ``getrefcount``'s own: 3 on CPython 3.11), measured here, not assumed
_ALONE = _count_of_a_local() + 1


def _held_elsewhere(ev: E.Event) -> bool:
    """Whether anything besides the caller's local variable holds ``ev``, which the model has just
    been given (:meth:`FileParser._templated`).

    Why: most events the fast path makes of an NCCL INFO log are read by a handler of the model
    and dropped (a ``comm_info`` line sets its communicator's size, an ``Init COMPLETE`` line marks
    its rank, a ring dump becomes a shared order): 79,000 of the 224,000 events of the 8,000-rank
    file.  Putting their text by reference (:meth:`FileParser._detach`: the line's byte offset, a
    hash of its text) was work for nothing.  A count too high only detaches as before; one too low
    (an interpreter that counts references otherwise) leaves a kept event holding its text instead
    of its place: the same text, more memory, the same report.  Without ``sys.getrefcount`` every
    event is detached, as before."""
    return _GETREFCOUNT is None or _GETREFCOUNT(ev) > _ALONE


def _utf8_ref(block: str, start: int, line: str, char: int, byte: int) -> tuple[int | None, int, int]:
    """The reference of ``line``, at character ``start`` of ``block`` (a block's bytes decoded as
    UTF-8: ``BlockReader.plain``), counting the bytes before it from character ``char``, at byte
    ``byte`` of the file, on (a block is read forwards: each line's bytes are counted once); with the
    (character, byte) counted to, for the next line."""
    before = block[char:start]
    byte += len(before) if before.isascii() else len(before.encode())
    return reread.ref(byte, len(line) if line.isascii() else len(line.encode()), line), start, byte


def _line_at(raw: bytes, data: bytes, start: int) -> int:
    """Where the first whole line of ``raw`` from byte ``start`` on that is ``data`` (not empty)
    starts (a line end before it or the start of ``raw``, one after it or the end), or -1."""
    n, size, find = len(data), len(raw), raw.find
    i = find(data, start)
    while i >= 0:
        if (i == 0 or raw[i - 1] == 10) and (i + n == size or raw[i + n] == 10):
            return i
        i = find(data, i + 1)
    return -1


def sample_step(counts: dict[int | None, int], rank: int | None) -> tuple[bool, bool]:
    """The step-line sampling of a file: (keep this rank's step line, sampling is done).  At most
    ``STEP_SAMPLES_PER_RANK`` per rank; a file of one rank is done once its rank has them.
    ``counts`` (per rank, so far) is updated.  One rule for the parser and for a file parsed in
    pieces (:class:`ncclsleuth.parse.pieces.StepSampler`)."""
    seen = counts.get(rank, 0)
    keep = seen < STEP_SAMPLES_PER_RANK
    if keep:
        counts[rank] = seen + 1
    return keep, len(counts) == 1 and min(counts.values()) >= STEP_SAMPLES_PER_RANK


def tail_cap(ranks: set[int] | frozenset[int]) -> int:
    """Characters of the end of a file kept for :mod:`.tail`: more where the file interleaves ranks."""
    return TAIL_CHARS_MULTI if len(ranks) >= 2 else TAIL_CHARS


@dataclass
class Carry:
    """What a file's parse carries past a line where nothing is open (no traceback, held
    message, tool block, ...): the state the parser of the next piece of the same file starts
    from (:meth:`FileParser.resume`, :mod:`.pieces`)."""

    #: lines parsed before (only whether any were matters, for the lookback text)
    lines: int = 0
    #: the end of the text before, for a block reader reading lines back
    tail: str = ""
    tail_cut: bool = False
    lookbacks: int = 0
    failure_block: str | None = None
    step_counts: dict[int | None, int] = field(default_factory=dict)
    steps_done: bool = False
    #: launcher ranks seen (two are enough: the file interleaves ranks)
    ranks: frozenset[int] = frozenset()


class FileParser:
    """Parses one stream of lines into events."""

    def __init__(self, source: str, cache: ShapeCache | None = None, keep_text: bool = True,
                 use_catalog: bool = True, sink: Sink | None = None,
                 drop: frozenset[str] = frozenset()) -> None:
        """``keep_text=False`` (analyze) drops lines that mean nothing as early as possible and
        emits no ``text`` events; ``use_catalog=False`` skips catalog ids (unused by rules).

        ``sink`` (analyze, with ``keep_text=False``): :meth:`parse_block` hands every event to
        ``sink.add`` as it is made, in line order, and plain per-connection lines (``Channel
        NN/M : a[x] -> b[y] via ...``, the most numerous line of an INFO log) to
        ``sink.add_conn`` without making events (``JobModel`` is such a sink).  Plain NCCL INFO
        lines then go by the plan of their shape (:mod:`.fastpath`), for a sink that does not
        keep the event kinds ``drop``."""
        self.source = source
        self.cache = cache or ShapeCache()
        self.keep_text = keep_text
        self.use_catalog = use_catalog
        self.sink = sink
        self._step_counts: dict[int | None, int] = {}
        self._steps_done = False
        #: whole-line templates for plain NCCL INFO lines (analyze only: parse keeps the full envelope path)
        self._templates = not keep_text
        self._tests = False
        self.stats = ParseStats()
        self._tb: dict[int | None, _Tb] = {}
        self._in_failure_block = False
        self._failure_block: str | None = None
        #: ranks whose last line was PyTorch's "Last error:" (the next line is NCCL's last WARN)
        self._last_error: set[int | None] = set()
        self._held: _Held | None = None
        self._catalog: dict[str, tuple[str | None, str | None]] = {}
        #: the last blocks read (at most TAIL_CHARS), for where the output stops (:mod:`.tail`)
        self._end_blocks = Kept()
        self._end_line: tuple[int, list[str]] | None = None  # line mode: (first, lines)
        #: launcher ranks seen on this file's events (two are enough: the file interleaves ranks)
        self._ranks: set[int] = set()
        self._plans = fastpath.plans_for(self.cache, drop) \
            if sink is not None and not keep_text and fastpath.ENABLED else None
        #: learned plans of the other lines the prefilter keeps (:mod:`.learned`), with the plans
        self._learned = self.cache.learned if self._plans is not None and learned.ENABLED else None
        self._probe: FileParser | None = None
        #: prefixed NCCL INFO lines by their plain line's plan: the shapes checked (:mod:`.prefixed`),
        #: where the sink is told launcher ranks; a scratch parser for the checks
        self._dress: dict[tuple[bytes, bytes], bool] | None = self.cache.dressed \
            if self._plans is not None and prefixed.ENABLED and hasattr(sink, "launched") else None
        self._dress_probe: FileParser | None = None
        self._dressing = prefixed.Dressed(sink) if self._dress is not None else None
        #: the tool block open (ibstat, topo -m, ...) and what its reader may read back:
        #: the last lines seen (line by line), or the block of text being scanned and the
        #: end of the one before it (the fast path)
        self._blocks = Blocks(source)
        self._seen: deque[tuple[int, str]] = deque(maxlen=LOOKBACK)
        self._btext: str | None = None
        self._bpos = 0
        self._tail = ""
        self._tail_cut = False
        self._lookbacks = 0
        #: what a piece of a file parsed on its own did that depends on the lines before it
        #: (:meth:`piece_flags`): read lines back before its start, met a failure-block field
        #: with no block name, named a block
        self._early_lookback = False
        self._field_unnamed = False
        self._block_named = False
        #: where sampled step lines go (a piece's sink samples them again for the whole file)
        self._on_steps = getattr(sink, "steps", None)
        #: where a rank's sampled step lines after its first go without their events (the sink's
        #: ``step_sample``: the model's), read by their shape's plan (:func:`.learned.step_reader`); None:
        #: every sampled line as its event (a piece's sink, or with ``LIGHT_STEPS`` off)
        self._step_sample = getattr(sink, "step_sample", None) if self._on_steps is None and LIGHT_STEPS else None
        #: a piece of a file keeps no end blocks (the file's are read again once: ncclsleuth.parallel.split)
        self._piece_tail = False
        #: evidence by reference (:mod:`ncclsleuth.util.reread`): the line being delivered (None:
        #: the block's lines keep their text), its number and where it starts in the block; the
        #: block, and a place in it whose byte offset is known (characters before a line are bytes
        #: where they are ASCII)
        self._cur: str | None = None
        self._cur_n = 0
        self._cur_start = 0
        self._rblock = ""
        self._rascii = True
        #: the step scan's (character, byte) count of the block (:meth:`_step_ref`)
        self._sbyte = (0, -1)
        self._rchar = 0
        self._rbyte = 0
        #: a block that is not ASCII: its bytes (``BlockReader.raw``, which decode to it), where a
        #: kept line after a long gap is found by its own bytes (:meth:`_raw_ref`; None: the
        #: characters are counted); where the block starts in its file; the line at ``_rchar``
        self._rraw: bytes | None = None
        self._rbase = 0
        self._rline = 0
        #: kinds whose place the sink is told of once their text is by reference (``placed``)
        self._placed: frozenset[str] = getattr(sink, "placed_kinds", frozenset())

    # ------------------------------------------------------------------ public
    def parse_lines(self, lines: Iterable[tuple[int, str]]) -> Iterator[E.Event]:
        """Events of all lines, then of anything left open at the end (a cut traceback)."""
        for lineno, text in lines:
            yield from self.parse_line(lineno, text)
        yield from self.finish()

    def parse_line(self, lineno: int, text: str) -> list[E.Event]:
        self.stats.lines += 1
        if not self.keep_text:
            self._keep_line(lineno, text)
        if not self.keep_text and not self._open() and PREFILTER.search(text) is None:
            self._seen.append((lineno, text))
            return []
        out = self._line(lineno, text)
        self._seen.append((lineno, text))
        return out

    def _detach(self, ev: E.Event) -> None:
        """``ev``'s text by reference, where it is exactly the line being delivered (the model has it now)."""
        line = self._cur
        if ev._text is not line or ev.line != self._cur_n or line is None:  # type: ignore[attr-defined]
            return
        start = self._cur_start
        if self._rascii:
            where = reread.ref(self._rbyte + start, len(line), line)
        elif self._rraw is not None and start - self._rchar > RAW_GAP \
                and (got := self._raw_ref(start, line, self._cur_n))[1] >= 0:  # a long gap: found, not counted
            where, self._rchar, self._rbyte, self._rline = got[0], start, self._rbase + got[1], self._cur_n
        else:
            where, self._rchar, self._rbyte = _utf8_ref(self._rblock, start, line, self._rchar, self._rbyte)
            self._rline = self._cur_n
        if where is not None:
            ev._text = where  # type: ignore[attr-defined]  # the slot behind Event.text
            if ev.kind in self._placed:  # a line a process keeps as evidence: it may keep the place
                self.sink.placed(ev)  # type: ignore[union-attr]  # only set with a sink

    def _raw_ref(self, start: int, line: str, n: int) -> tuple[int | None, int]:
        """The reference of ``line`` (line ``n``, at character ``start`` of a block that is not ASCII)
        and where it starts in the block's bytes, found by its bytes: the first whole line of those
        bytes that is ``line``'s from where the characters were counted to (byte ``_rbyte``, line
        ``_rline``) on, whose line ends before it say it is line ``n`` (an equal line before it is
        not); -1 where none is (not expected: the bytes decode to the block).  A search and a count
        of line ends in C instead of the characters before it copied and encoded: the long gap of a
        rank file's training output before its last lines, ~62 -> ~33 us a 56 KB file."""
        raw = self._rraw
        assert raw is not None  # the caller's condition
        data = line.encode()
        frm, left = self._rbyte - self._rbase, n - self._rline
        i = _line_at(raw, data, frm) if data else -1
        while i >= 0:
            left -= raw.count(b"\n", frm, i)
            if left <= 0:
                break
            frm, i = i, _line_at(raw, data, i + 1)
        if i < 0 or left < 0:
            return None, -1
        return reread.ref(self._rbase + i, len(data), line), i

    def parse_block(self, first: int, text: str, at: int = -1, lines: int = -1,
                    raw: bytes | None = None) -> list[E.Event]:
        """Events of a block of whole lines (``\n``-separated) starting at line ``first``.

        ``at``: where the block starts in its file, when it is the file's bytes there decoded
        (``BlockReader.byte_at``): in a file registered for reading again, the events the model
        gets of its lines keep their place in the file, not their text (:meth:`_detach`).
        ``lines``: its lines where the reader counted them (``BlockReader.block_lines``), else
        counted here (a count of a block's newlines is ~5% of parsing training output).
        ``raw``: the bytes ``text`` is, decoded (``BlockReader.raw``), for the prefilter's
        scans by RE2 (:mod:`.bytescan`).

        In analyze mode the prefilter runs over the whole block, so lines that cannot
        mean anything are skipped by the regex engine without a Python-level loop.
        """
        out: list[E.Event] = []
        self.stats.lines += lines if lines > 0 else text.count("\n") + 1
        if not self.keep_text:
            self._keep_block(first, text, lines)
        put = out.extend if self.sink is None else self._deliver
        if self.keep_text:
            for i, line in enumerate(text.split("\n")):
                put(self._line(first + i, line))
                self._seen.append((first + i, line))
            return out
        pos, n, size = 0, first, len(text)
        (search, short), find = block_search(text, raw), text.find
        if first == 1 and _ROW.match(text):  # an excerpt of nccl-tests output that starts at a result row
            self._tests = True
        self._btext = text
        plans = self._plans
        refer = at >= 0 and self.sink is not None and reread.ENABLED and reread.path_of(self.source) is not None
        if refer:
            self._rblock, self._rascii, self._rchar, self._rbyte = text, text.isascii(), 0, at
            self._rraw, self._rbase, self._rline = (None if self._rascii or not RAW_REFS else raw), at, first
        # the next plain NCCL INFO line (``info``: where its line starts), found by str.find: the
        # prefilter scans only the lines between two of them
        nxt = info = -1 if plans is None else -2
        runs = fastpath.RUNS
        # NCCL INFO lines behind a launcher's or a log collector's prefix (``srun --label``'s ``12: ``,
        # ``kubectl logs --timestamps``, ``[rank3]:``): the plain line's plan (:mod:`.prefixed`)
        wrapped = self._learned is not None or self._dress is not None
        dressing = self._dress is not None
        behind = False  # the last INFO line went by its plain line's plan, behind a prefix
        # looked up once a block, not once a line (~700,000 INFO lines in an 8,000-rank file)
        sink, source, templated = self.sink, self.source, self._templated
        fast_line, conn_run, short_range = fastpath.fast_line, fastpath.conn_run, SHORT_RANGE
        # where the lines this loop read one by one, or stopped at for a prefilter keyword, start
        # (NCCL INFO lines aside: "NCCL" tells those): the step scan skips them
        lined: list[int] = []
        # a meaning that spans lines opens only in ``_line`` (the fast paths' DONE lines open
        # nothing): the open state is asked again only after a line went there
        is_open = self._open()
        if nxt == -2 and not is_open:
            # one prefilter scan first, to where the block's first keyword is: "NCCL" is one, so no
            # NCCL INFO line starts before that keyword's line, and a block of training output with
            # no keyword is done without the str.find for " NCCL INFO " over all of it (~6% of the
            # parse of a noise log); the lines before it are skipped as the loop would skip them
            m0 = search(text)
            if m0 is None:
                pos = size + 1
            else:
                pos = text.rfind("\n", 0, m0.start()) + 1
                n += text.count("\n", 0, pos)
        while pos <= size:
            if is_open:  # line by line while a block is open
                end = find("\n", pos)
                end = size if end < 0 else end
                self._bpos = pos
                lined.append(pos)
                put(self._line(n, text[pos:end]))
                n, pos = n + 1, end + 1
                is_open = self._open()
                continue
            if nxt != -1 and info < pos:
                nxt = find(" NCCL INFO ", pos)
                if nxt < 0:
                    info = -1
                else:
                    info = text.rfind("\n", pos, nxt) + 1  # 0 where none: the line starts at pos
                    if info < pos:
                        info = pos
            # an INFO line right at the cursor: nothing between for the prefilter to find
            stop = size if info < 0 else info
            m = None if info == pos else short(text, pos, stop) if stop - pos < short_range else search(text, pos, stop)
            if m is None:
                if info < 0:
                    break
                if info != pos:
                    n += text.count("\n", pos, info)
                end = find("\n", nxt)
                end = size if end < 0 else end
                line = text[info:end]
                # behind a launcher's prefix (``srun --label``'s ``12: ``), where its plain line starts:
                # asked first where the last INFO line had one (a file has one on all its lines or none)
                k = -1
                if behind:
                    k = -1 if PLAIN_INFO.match(line) else prefixed.plain_at(line, nxt - info)
                    behind = k > 0
                if runs and text.startswith("Channel ", nxt + 11):  # perhaps a run of connection lines: at once
                    past = self._dressed_run(n, text, info, k, end) if k > 0 else \
                        conn_run(plans, sink, source, n, text, info)  # type: ignore[arg-type]
                    if past >= 0:
                        n += text.count("\n", info, past) + 1
                        pos = past + 1
                        continue
                if refer:
                    self._cur, self._cur_n, self._cur_start = line, n, info
                said = fastpath.SLOW if k > 0 else fast_line(plans, sink, source, n, line, templated)  # type: ignore[arg-type]
                if said and wrapped and (k >= 0 or not PLAIN_INFO.match(line)):  # a prefix before it
                    self._bpos = info
                    if k < 0 and dressing and prefixed.plain_at(line, nxt - info) > 0:
                        behind, pos = True, info  # this line again, behind its prefix first (a run too)
                        continue
                    behind = k > 0 and self._dressed(n, line, k)  # the plain line's plan (:mod:`.prefixed`)
                    if behind:
                        is_open = self._open()
                        n, pos = n + 1, end + 1
                        continue
                    if k > 0:  # the whole line's plan, as a line with no prefix this path takes
                        said = fast_line(plans, sink, source, n, line, templated)  # type: ignore[arg-type]
                    planned = self._by_plan(n, line, info_key) if said and self._learned is not None else None
                    if planned is not None:
                        put(planned)
                        is_open = self._open()
                        n, pos = n + 1, end + 1
                        continue
                if said:
                    self._bpos = info
                    evs = self._line(n, line)
                    is_open = self._open()
                    if said == fastpath.NONE and not is_open:  # a line that opens nothing
                        fastpath.learn(plans, self.cache, self.sink, line, evs)  # type: ignore[arg-type]
                    put(evs)
                n, pos = n + 1, end + 1
                continue
            start = text.rfind("\n", pos, m.start()) + 1
            if start < pos:
                start = pos
            n += text.count("\n", pos, start)
            end = find("\n", m.start())
            end = size if end < 0 else end
            self._bpos = start
            lined.append(start)
            line = text[start:end]
            if refer:
                self._cur, self._cur_n, self._cur_start = line, n, start
            planned = self._by_plan(n, line) if self._learned is not None else None
            put(self._line(n, line) if planned is None else planned)
            is_open = self._open()
            n, pos = n + 1, end + 1
        self._btext = None
        self._cur, self._rblock = None, ""
        self._keep_tail(text)
        steps = self._step_lines(first, text, lined, at if refer else -1)
        if steps:
            (self._on_steps or put)(steps)
        return out

    # ------------------------------------------------------------------ prefixed NCCL INFO lines
    def _saw_rank(self, rank: int | None) -> None:
        """A line of launcher rank ``rank`` made an event (or went by its plain line's plan): the tail
        reads a file of two ranks or more as interleaved (:meth:`tail`); two are all it asks for."""
        if rank is not None and len(self._ranks) < 2:
            self._ranks.add(rank)

    def _dressed_run(self, lineno: int, text: str, start: int, k: int, end: int) -> int:
        """A run of one process's connection lines from ``start`` (line ``lineno``, ending at ``end``)
        behind one prefix of ``k`` characters, the same on each line, handed to the dressed sink at
        once as ``fastpath.conn_run`` hands a plain run; the text position past it, or -1 where it
        starts none (then the line goes alone).

        What :meth:`_dressed` asks of each line is asked once: of the prefix at the first line
        (:func:`prefixed.fields`: the prefix and the plain line's ``host:pid:tid [dev]`` are the same
        on every line, and the envelope's wrappers end before the plain line's message), and of each
        distinct text from the source rank on (``prefixed.plain_end``, and its plain shape checked
        with this prefix's shape before, by a line of its own)."""
        assert self._dress is not None and self._plans is not None  # the caller's condition
        if k <= 0 or not text.startswith(text[start:start + k], end + 1):  # the next line: another prefix
            return -1
        m = prefixed.run_behind(k).match(text, start)
        if m is None:
            return -1
        line = text[start:end]
        got = prefixed.fields(line, k)
        if got is None:
            return -1
        rank, ts, shape = got
        # a line's characters before its text from the source rank on: the prefix, then the plain
        # line's ``host:pid:tid [dev] NCCL INFO Channel NN/CC : `` (the same on every line of the run)
        dress, most = self._dress, prefixed.MAX_CHARS - (m.end(5) + 3 - start)

        def ok(rest: str, key: bytes) -> bool:
            return len(rest) <= most and prefixed.plain_end(rest) and dress.get((shape, key)) is True

        cuts = fastpath.run_cuts(self._plans, text, start, m.end(), k, m.end(2) - start - k, ok)
        if cuts is None:
            return -1
        dressed = self._dressing.at(line, rank, ts)  # type: ignore[union-attr]  # set with _dress
        dressed.conn_lines(self.source, lineno, m.group(2), cuts[0], cuts[1])
        self._saw_rank(rank)
        return m.end()

    def _dressed(self, lineno: int, line: str, k: int) -> bool:
        """Whether the plain NCCL INFO line at ``line[k:]``, after its prefix, went by its plan (or,
        with no plan yet, the full way, and its plan was learned), its events given the prefix's
        launcher rank, time and the whole line (:mod:`.prefixed`); False where the prefix is not one
        the envelope only peels, or the shape's check failed: nothing was done."""
        assert self._dress is not None and self._plans is not None  # the caller's condition
        got = prefixed.fields(line, k)
        if got is None:
            return False
        rank, ts, shape = got
        plain = line[k:]
        key = info_key(plain)
        ok = self._dress.get((shape, key))
        if ok is None:  # the shape's first line: the full way and the dressed plain line's, compared
            ok = prefixed.agrees(line, k, rank, ts, partial(self._dress_probe_line, lineno))
            if len(self._dress) < prefixed.MAX_SHAPES:
                self._dress[shape, key] = ok
        if not ok:
            return False
        sink = self.sink
        dressed = self._dressing.at(line, rank, ts)  # type: ignore[union-attr]  # set with _dress
        self.sink = dressed  # the sink of the plan's calls (``_templated``)
        try:
            said = fastpath.fast_line(self._plans, dressed, self.source, lineno, plain, self._templated)
            if said == fastpath.SLOW:  # nothing done: the full way, for the whole line
                return False
            if said == fastpath.NONE:  # no plan yet: the full way of the plain line, and its plan learned
                evs = self._line(lineno, plain)
                if not self._open():
                    fastpath.learn(self._plans, self.cache, sink, plain, evs)  # type: ignore[arg-type]
                self._deliver(evs)
        finally:
            self.sink = sink
        self._saw_rank(rank)
        return True

    def _dress_probe_line(self, lineno: int, text: str) -> list[E.Event] | None:
        """The full parser's events of line ``text`` on a scratch parser with no sink; None where
        that moved its state (it opened something, was held, failed)."""
        probe = self._dress_probe
        if probe is None:
            probe = self._dress_probe = FileParser(self.source, cache=self.cache, keep_text=False,
                                                   use_catalog=self.use_catalog)
        state = probe._state()
        out = probe._line(lineno, text)
        if probe._state() != state:
            self._dress_probe = None
            return None
        return out

    # ------------------------------------------------------------------ learned plans
    def _by_plan(self, lineno: int, text: str, shape: Callable[[str], bytes] = fixed_key) -> list[E.Event] | None:
        """The events of a line the prefilter kept, by its shape's learned plan (:mod:`.learned`);
        None where the full path must parse it (no plan: then it may learn one).  ``shape``: the
        line's shape key, :func:`~.grammar.info_key` for an NCCL INFO line behind a prefix (its
        pointers and commIds are a new hex run on every line: one shape each by ``fixed_key``)."""
        if not learned.plannable(text):
            return None
        key = shape(text)
        table = self._learned
        assert table is not None
        plan = table.get(key)
        if plan is None:
            others = learned.due(self.cache.learn_seen, len(table), key, text, shape)
            return None if others is None else self._learn(key, lineno, text, others)
        cls = plan.cls if plan is not learned.SLOW else None
        if plan is learned.SLOW or (cls is None and len(self._ranks) < 2):
            return None  # slow; or a line of no event, whose rank (the tail counts ranks) is not known
        stats = self.stats
        r, nr, nu = plan.stats
        stats.records += r
        stats.nccl_records += nr
        stats.nccl_unknown += nu
        if cls is None:
            return []
        ev = plan.make(self.source, lineno, text)
        by = stats.by_kind
        by[ev.kind] = by.get(ev.kind, 0) + 1
        self._saw_rank(ev.rank)
        return [ev]

    def _state(self) -> tuple[Any, ...]:
        """What a line of no meaning beyond itself leaves as it was (see :meth:`_learn`)."""
        return (len(self._tb), self._in_failure_block, self._failure_block, self._held is None,
                len(self._last_error), self._tests, self._blocks.open is None, self._block_named,
                self._field_unnamed, self._early_lookback, self._lookbacks, self.stats.failed)

    def _counts(self) -> tuple[int, int, int, int]:
        s = self.stats
        return s.records, s.nccl_records, s.nccl_unknown, sum(s.by_kind.values())

    def _learn(self, key: bytes, lineno: int, text: str, others: tuple[str, ...]) -> list[E.Event]:
        """Parse the line the full way and learn its shape's plan from what that did (and from
        ``others``, earlier lines of the shape)."""
        state, counts = self._state(), self._counts()
        evs = self._line(lineno, text)
        after = self._counts()
        moved = tuple(b - a for a, b in zip(counts, after))
        table = self._learned
        assert table is not None
        kinds = sum(1 for ev in evs if ev.kind != "text")
        if self._state() != state or moved[3] != kinds or self.cache.learnings >= learned.MAX_LEARNINGS:
            table[key] = learned.SLOW
            return evs
        self.cache.learnings += 1
        probe = self._probe
        if probe is None:
            probe = self._probe = FileParser(self.source, cache=self.cache, keep_text=False,
                                             use_catalog=self.use_catalog)
        probe._failure_block = self._failure_block

        def parse(line: str) -> list[E.Event] | None:
            before_state, before = probe._state(), probe._counts()
            out = probe._line(lineno, line)
            if probe._state() != before_state or tuple(b - a for a, b in zip(before, probe._counts())) != moved:
                self._probe = None  # its state moved: a fresh one next time
                return None
            return out

        plan = learned.derive(text, evs, (moved[0], moved[1], moved[2]), parse, others)
        table[key] = learned.SLOW if plan is None else plan
        return evs

    def _open(self) -> bool:
        """True while a meaning spans lines: every line counts, keyword or not."""
        return bool(self._tb or self._in_failure_block or self._tests or self._held is not None or self._last_error
                    or self._blocks.open is not None)

    def _keep_tail(self, text: str) -> None:
        """The end of the text scanned so far, for a block reader reading lines back."""
        if len(text) >= LOOKBACK_CHARS:
            self._tail, self._tail_cut = text[-LOOKBACK_CHARS:], len(text) > LOOKBACK_CHARS
            return
        tail = self._tail + "\n" + text if self._tail or self.stats.lines > text.count("\n") + 1 else text
        if len(tail) > LOOKBACK_CHARS:
            tail, self._tail_cut = tail[-LOOKBACK_CHARS:], True
        self._tail = tail

    def _deliver(self, events: list[E.Event]) -> None:
        add = self.sink.add  # type: ignore[union-attr]  # only set with a sink
        for ev in events:
            add(ev)
            if self._cur is not None:
                self._detach(ev)

    def _step_lines(self, first: int, text: str, lined: list[int], at: int = -1) -> list[E.Event]:
        """Step-timing lines the prefilter skipped (one literal scan per format), sampled.

        A median needs a few dozen steps, not every step of a long run: at most
        ``STEP_SAMPLES_PER_RANK`` per rank are parsed, and a file of one rank stops being
        scanned once its rank has them.  Lines the main loop handled have had their parse there
        (taking them again here counted every such step twice): those it read one by one
        (while a traceback, a tool's block or nccl-tests output was open) or for a prefilter
        keyword (``lined``: their starts), and NCCL INFO lines.  That is every line the prefilter
        matches in ("NCCL" is one of its keywords, and the main loop leaves none of the others
        unread), told here by a set lookup and one ``in``, not by the prefilter again on each
        sampled step line (~2% of a per-rank file's parse, 32 of them a file).

        ``at``: where the block starts in its file, where its lines may be kept by reference
        (:meth:`parse_block`): a rank's first step line (the one the model keeps, as the evidence
        of its step times) keeps its place, not its text (:meth:`_step_ref`).
        """
        out: list[E.Event] = []
        if self._steps_done:
            return out
        done = set(lined)
        # the model's way: each sampled line given at once, in line order (the rest of the block's
        # events are delivered; nothing comes between this scan and its events' delivery)
        at_once = self.sink.add if self._step_sample is not None else None  # type: ignore[union-attr]
        for scan in STEP_SCANS:
            counted, n = 0, first
            self._sbyte = (0, at)  # (character, byte) of the block this scan has counted to
            for m in scan.finditer(text):
                start = text.rfind("\n", 0, m.start()) + 1
                end = text.find("\n", m.start())
                line = text[start:] if end < 0 else text[start:end]
                if start in done or "NCCL" in line:
                    continue  # the main loop has handled it
                n += text.count("\n", counted, start)
                counted = start
                ev = self._step_event(n, line, at_once is not None)
                if ev is None:  # not a step line, or one given to the model without its event
                    if self._steps_done:
                        return out
                    continue
                keep, self._steps_done = sample_step(self._step_counts, ev.rank)
                if keep:
                    if at >= 0 and self._step_counts[ev.rank] == 1:
                        self._step_ref(ev, text, start, line)
                    if at_once is not None:  # in line order with the samples the model is given at once
                        at_once(ev)
                    else:
                        out.append(ev)
                if self._steps_done:
                    return out
        return out

    def _light_step(self, line: str, read: Any) -> bool:
        """Step line ``line`` handed to the model's ``step_sample`` as the (rank, ms) its plan's
        ``read`` cuts, without its event, where its rank has had its first sampled line (the model
        quotes that one: it goes as its event); False: not done, the line goes the event's way."""
        rank, ms = read(line)
        if not self._step_counts.get(rank, 0):
            return False
        self._saw_rank(rank)
        keep, self._steps_done = sample_step(self._step_counts, rank)
        if keep:
            self._step_sample(rank if rank is not None else self.source, ms)  # type: ignore[misc]  # set: the caller's condition
        return True

    def _step_ref(self, ev: E.Event, text: str, start: int, line: str) -> None:
        """``ev``'s text by reference: the step line ``line``, at character ``start`` of block
        ``text`` (its bytes decoded, from byte ``self._sbyte``'s on: a block of progress bars is
        not ASCII, and its bytes are counted from where the scan last counted them)."""
        if ev._text is not line:  # type: ignore[attr-defined]  # the slot behind Event.text
            return
        char, byte = self._sbyte
        if self._rascii:
            where = reread.ref(byte + start, len(line), line)  # char: 0 (counted only where not ASCII)
        else:
            where, char, byte = _utf8_ref(text, start, line, char, byte)
            self._sbyte = (char, byte)
        if where is not None:
            ev._text = where  # type: ignore[attr-defined]

    def end_event(self, kind: str, lineno: int, line: str) -> E.Event | None:
        """The ``last_line`` or ``progress`` event of line ``line``, made from the line alone as
        :meth:`tail` made it for a file of one rank (:mod:`.again` makes a kept one again with this)."""
        fields: dict[str, Any] = {}
        if kind == "progress":
            p = progress(line)
            if p is None:
                return None
            fields = {"step": p.step, "total": p.total, "elapsed_s": p.elapsed_s, "unit": p.unit}
        return self._make(E.Progress if kind == "progress" else E.LastLine, peel(line)[0], lineno, line, fields)

    def step_event(self, lineno: int, line: str) -> E.Event | None:
        """The step-timing event of line ``line``, made from the line alone (as the step scan
        made it: :mod:`.again` makes a kept step line's event again with this)."""
        return self._step_full(lineno, line)

    def _step_event(self, lineno: int, line: str, light: bool = False) -> E.Event | None:
        """A step-timing line, by its shape's learned plan where it has one (:mod:`.learned`,
        with :meth:`_step_full` for the probe), else the full way; ``light``: None where the line
        went to the model without its event instead (:meth:`_light_step`, the plan's ``read``).

        Every rank's file samples ``STEP_SAMPLES_PER_RANK`` of them and a job's ranks print
        the same few shapes: at 16,384 per-rank files, 524,288 lines that each took the
        envelope, the shape cache and the builder (~10 us, a fifth of such a file's parse)."""
        if self._learned is None or not learned.plannable(line):
            return self._step_full(lineno, line)
        key = fixed_key(line)
        plans = self.cache.step_plans
        plan = plans.get(key)
        if plan is None:
            return self._step_learn(key, lineno, line)
        if plan is learned.SLOW:
            return self._step_full(lineno, line)
        if light and plan.read is not None and self._light_step(line, plan.read):
            return None
        ev: E.Event = plan.make(self.source, lineno, line)
        self._saw_rank(ev.rank)
        return ev

    def _step_learn(self, key: bytes, lineno: int, line: str) -> E.Event | None:
        """A step line of a shape with no plan yet: the full way; when its plan is due
        (:func:`.learned.due`, as for the other lines), it is derived on a scratch parser (the
        probes' ranks are not this file's)."""
        ev = self._step_full(lineno, line)
        cache = self.cache
        others = learned.due(cache.step_seen, len(cache.step_plans), key, line)
        if others is None:
            return ev
        if ev is None or cache.learnings >= learned.MAX_LEARNINGS:
            cache.step_plans[key] = learned.SLOW
            return ev
        cache.learnings += 1
        scratch = FileParser(self.source, cache=cache, keep_text=False, use_catalog=self.use_catalog)

        def probe(variant: str) -> list[E.Event] | None:
            got = scratch._step_full(lineno, variant)
            return None if got is None else [got]

        plan = learned.derive(line, [ev], (0, 0, 0), probe, others)
        cache.step_plans[key] = learned.SLOW if plan is None or plan.cls is None else \
            plan._replace(read=learned.step_reader(plan))
        return ev

    def _step_full(self, lineno: int, line: str) -> E.Event | None:
        """A step-timing line: the grammar (through the shape cache) from where the step text
        starts, the envelope only when something precedes it (a [rankN]: prefix)."""
        m = STEP_START.search(line)
        if m is None:
            return None
        res = self.cache.parse(line[m.start():].rstrip())
        if res is None:
            return None
        cls, fields = build(res[0], res[1])
        if cls is not E.StepTime:
            return None
        rec = peel(line)[0] if m.start() else Record(line, "other")
        return self._make(cls, rec, lineno, line, fields)

    def _line(self, lineno: int, text: str) -> list[E.Event]:
        held = self._held
        if held is not None:
            try:
                if self._join(held, text):
                    return []
            except Exception:  # noqa: BLE001 - a continuation that breaks the parser is a line of its own
                pass
            self._held = None
            return held.events + self._line(lineno, text)
        try:
            if "\r" in text or "\x1b" in text:  # progress redraws and colours (block reader leaves them)
                out: list[E.Event] = []
                for seg in clean(text):
                    out.extend(self._record_line(lineno, seg))
                return out
            return self._record_line(lineno, text)
        except Exception as exc:  # noqa: BLE001 - one garbled line must never abort a run
            return self._unparsable(lineno, text, exc)

    def _unparsable(self, lineno: int, text: str, exc: Exception) -> list[E.Event]:
        """Keep a line that broke the parser: counted, and kept as a problem line if it looks like one."""
        self.stats.failed += 1
        if self.stats.first_failure is None:
            self.stats.first_failure = f"line {lineno}: {type(exc).__name__}: {exc}"
        if _ERRLIKE.search(text) or " WARN " in text:
            return [E.WarnText(source=self.source, line=lineno, text=text, message=text.strip()[:500])]
        return []

    def _record_line(self, lineno: int, text: str) -> list[E.Event]:
        closed: list[E.Event] = []
        if self._blocks.open is not None:  # a tool's block (ibstat, topo -m, ...): its reader first
            evs, mine = self._blocks.feed(lineno, text)
            if mine:
                self._count(evs)
                return evs if evs or not self.keep_text else [E.Text(source=self.source, line=lineno, text=text)]
            closed = evs  # the block ended before this line: its last events, then the line's
        out = self._record_line_events(lineno, text)
        return closed + out if closed else out

    def _record_line_events(self, lineno: int, text: str) -> list[E.Event]:
        if self._templates and " NCCL INFO " in text:  # plain NCCL INFO lines: from the line's template
            hit = self.cache.line_fields(text)
            ev = self._from_raw(lineno, text, hit[0], hit[1]) if hit is not None else None
            if ev is not None:  # None: no template, or not a kind of its own (through the envelope below)
                return [ev] if ev is not _FOLDED else []
        if not text.strip():
            return []
        if _TESTS_HEAD.match(text):
            self._tests = True  # nccl-tests output: its result rows are only numbers
        out: list[E.Event] = []
        records = peel(text)
        texts = _record_texts(text, records) if len(records) > 1 else (text,)
        for rec, own in zip(records, texts):
            self.stats.records += 1
            if rec.family == "nccl":
                ev = self._nccl(rec, lineno, own)
            else:
                rest, ev = self._quoted(rec, lineno, own, out)
                if rest is not None:
                    ev = self._other(rest, lineno, own, out)
            if ev is not None and (self.keep_text or ev.kind != "text"):
                out.append(ev)
                k = ev.kind
                self.stats.by_kind[k] = self.stats.by_kind.get(k, 0) + 1
                if k in OPENERS:  # the first line of a tool's block: its reader takes the next lines
                    evs = self._blocks.start(ev, partial(self._recent, lineno))
                    self._count(evs)
                    out.extend(evs)
        if len(records) == 1 and len(out) == 1 and records[0].family == "other" and self._holds(records[0], out[0]):
            self._held = _Held(lineno, text, records[0], out)
            return []
        return out

    def _count(self, events: list[E.Event]) -> None:
        by = self.stats.by_kind
        for ev in events:
            by[ev.kind] = by.get(ev.kind, 0) + 1

    def _recent(self, lineno: int) -> list[tuple[int, str]]:
        """The lines before line ``lineno`` a block reader may read back: the last
        ``LOOKBACK`` of them, whole lines only, at most ``LOOKBACK_CHARS`` characters; the
        same on the fast path (from the text being scanned and the end of the block before
        it) as line by line."""
        self._lookbacks += 1
        if self._lookbacks > MAX_LOOKBACKS:  # a flood of headerless port lines: read none back
            return []
        if self._btext is not None:
            start, cut = self._bpos, self._tail_cut
            if start > 0:  # the lines of this block before the current one (and the block before)
                before = self._tail + "\n" + self._btext[:start - 1] if self._tail else self._btext[:start - 1]
            else:
                before = self._tail
            if len(before) > LOOKBACK_CHARS:
                before, cut = before[-LOOKBACK_CHARS:], True
            lines = before.split("\n") if before or start > 0 else []
            if cut and lines:
                lines = lines[1:]  # the first line may be cut
            lines = lines[-LOOKBACK:]
            pairs = [(lineno - len(lines) + i, ln) for i, ln in enumerate(lines)]
            if len(before) <= LOOKBACK_CHARS and not cut:
                self._early_lookback = True  # a piece's lookback may miss lines of the piece before
        else:
            pairs = list(self._seen)
        total = sum(len(t) + 1 for _, t in pairs)
        while pairs and total > LOOKBACK_CHARS:
            total -= len(pairs[0][1]) + 1
            pairs.pop(0)
        return pairs

    # ------------------------------------------------------------------ text inside other text
    def _quoted(self, rec: Record, lineno: int, text: str, out: list[E.Event]
                ) -> tuple[Record | None, E.Event | None]:
        """NCCL's last WARN quoted by the layer above: the line after PyTorch's ``Last error:``,
        the rest of a line holding it, or XLA's quote.  Returns the record left to parse as
        usual (None: nothing left) and the event of the quoted message (or None)."""
        body = rec.body
        if self._last_error and rec.rank in self._last_error:
            self._last_error.discard(rec.rank)
            msg = body.strip()
            if msg and rec.level is None and not msg.startswith(_NOT_A_WARN):
                return None, self._inner(rec, lineno, text, msg)
        k = body.find(_LAST_ERROR)
        if k >= 0:
            msg = body[k + len(_LAST_ERROR):].strip()
            if not msg:
                self._last_error.add(rec.rank)
            elif not msg.startswith(_NO_LAST_ERROR):
                ev = self._inner(rec, lineno, text, msg)
                if not body[:k].strip():
                    return None, ev
                out.append(ev)
            return (rec._replace(body=body[:k].rstrip()) if body[:k].strip() else None), None
        if "Last NCCL " in body:
            for marker, end in _XLA_QUOTES:
                k = body.find(marker)
                if k >= 0:
                    msg = body[k + len(marker):]
                    cut = msg.rfind(end) if end else -1
                    msg = (msg[:cut] if cut > 0 else msg).strip()
                    if msg:
                        out.append(self._inner(rec, lineno, text, msg))
                    return rec._replace(body=body[:k].rstrip()), None
        return rec, None

    def _inner(self, rec: Record, lineno: int, text: str, msg: str) -> E.Event:
        """The event of an NCCL WARN message quoted on this line (a WARN: a problem line)."""
        return self._nccl(Record(msg, "nccl", "WARN", rec.host, rec.pid, rec.tid, rec.dev, rec.rank, rec.ts,
                                 None, rec.pg), lineno, text)

    # ------------------------------------------------------------------ hard-wrapped messages
    def _holds(self, rec: Record, ev: E.Event) -> bool:
        """A message whose line ends with ':' or ',' may go on on the next line (hard-wrapped)."""
        return ev.kind not in ("text", "traceback") and rec.body.rstrip().endswith((":", ",")) \
            and not self._tb and not self._in_failure_block and not self._tests

    def _join(self, held: _Held, text: str) -> bool:
        """Join an indented continuation line to the held message when the message parses
        with it and says more; the event keeps the first line's number and text."""
        if held.joins >= MAX_JOINS or text[:1] not in (" ", "\t") or not text.strip():
            return False
        rec = held.rec._replace(body=f"{held.rec.body.rstrip()} {text.strip()}")
        ev = self._other(rec, held.lineno, held.text, [])
        old = held.events[0]
        if ev is None or type(ev) is not type(old) or _said(ev) <= _said(old):
            return False
        held.rec, held.events, held.joins = rec, [ev], held.joins + 1
        return True

    def _templated(self, lineno: int, text: str, plan: tuple[Any, ...]) -> bool:
        """The ``EVENT`` or ``MADE`` plan's line (:mod:`.fastpath`): its event from its template
        (or its learned maker), handed to the sink, as ``_record_line_events`` does first; False
        where that makes no event (the caller then parses the line the full way, which tries the
        template again and goes on)."""
        what = plan[0]
        if what == fastpath.MADE or what == fastpath.TREES:
            try:
                ev = plan[1](self.source, lineno, text) if what == fastpath.MADE else \
                    fastpath.trees_event(plan, self.source, lineno, text, self.sink.tree_channels)  # type: ignore[union-attr]
            except ValueError:  # a cut that does not convert: the template's way
                ev = None
            if ev is None:
                return self._templated(lineno, text, plan[3] if what == fastpath.MADE else plan[7])
            stats = self.stats
            stats.records += 1
            stats.nccl_records += 1
            self.sink.add(ev)  # type: ignore[union-attr]
            if self._cur is not None and _held_elsewhere(ev):
                self._detach(ev)
            return True
        rule, fill, seen = plan[1], plan[2], plan[3]
        try:
            ev = self._from_raw(lineno, text, rule, fill(text))
        except Exception:  # noqa: BLE001 - the full way handles (and counts) a line that breaks
            return False
        if ev is None or ev is _FOLDED:
            return ev is _FOLDED
        if seen is not None:
            seen[0] += 1
            if seen[0] == seen[2]:
                self._learn_maker(lineno, text, plan, ev)
        self.sink.add(ev)  # type: ignore[union-attr]  # plans exist only with a sink
        if self._cur is not None and _held_elsewhere(ev):
            self._detach(ev)
        return True

    def _learn_maker(self, lineno: int, text: str, plan: tuple[Any, ...], ev: E.Event) -> None:
        """Give an ``EVENT`` shape a maker (:func:`.learned.derive`, with the template as the probe:
        what the plan makes of every line of the shape now), or leave it as it is for good."""
        rule, fill, seen = plan[1], plan[2], plan[3]

        def probe(line: str) -> list[E.Event] | None:
            try:
                got = self._event_of(lineno, line, rule, fill(line))
            except Exception:  # noqa: BLE001 - a variant the template cannot make: no maker
                return None
            return None if got is None or got is _FOLDED else [got]

        maker = None
        if learned.ENABLED and self.cache.learnings < learned.MAX_LEARNINGS:
            self.cache.learnings += 1
            maker = learned.derive(text, [ev], (1, 1, 0), probe, (seen[1],))
        key = info_key(text)
        if self._plans is not None and self._plans.get(key) is plan:
            self._plans[key] = (fastpath.EVENT, rule, fill, None) if maker is None or maker.cls is None \
                else (fastpath.MADE, maker.make, maker, (fastpath.EVENT, rule, fill, None))

    def _from_raw(self, lineno: int, text: str, rule: str, raw: dict[str, Any]) -> E.Event | None:
        """The event of a templated line (``_FOLDED`` when the connection sink took it), counted."""
        ev = self._event_of(lineno, text, rule, raw)
        if ev is not None and ev is not _FOLDED:
            self.stats.records += 1
            self.stats.nccl_records += 1
        return ev

    def _event_of(self, lineno: int, text: str, rule: str, raw: dict[str, Any]) -> E.Event | None:
        """:meth:`_from_raw` but for the counts."""
        host, pid, tid, dev = raw.pop("_host"), raw.pop("_pid"), raw.pop("_tid"), raw.pop("_dev")
        if rule == "channel_conn" and self.sink is not None:
            self.sink.add_conn(self.source, lineno, host, int(pid), raw["src"], raw["dst"], raw["via"],
                               raw.get("direction"))
            return _FOLDED
        if rule == "trees" and self._plans is not None:  # edges the model would not keep are never made
            raw["tree"] = _channels_below(raw.get("tree", []), self.sink.tree_channels)  # type: ignore[union-attr]
        cls, fields = build(rule, raw)
        if cls is E.NcclOther:
            return None
        return cls(source=self.source, line=lineno, text=text, host=host, pid=int(pid), tid=int(tid),
                   dev=int(dev), level="INFO", **fields)

    def finish(self) -> list[E.Event]:
        """What is left open at the end: a tool block, a held message, a cut traceback."""
        out: list[E.Event] = self._blocks.close()
        if self._held is not None:
            out.extend(self._held.events)
            self._held = None
        self._last_error.clear()
        for rank, tb in sorted(self._tb.items(), key=lambda kv: kv[1].start):
            if tb.frames:
                out.append(E.Traceback(source=self.source, line=tb.start, text=tb.text, rank=rank,
                                       exc_type="", message="(traceback cut off: no exception line)",
                                       start_line=tb.start, frames=tb.frames, last_frame=tb.last_frame,
                                       user_frame=tb.user_frame, call=tb.call))
        self._tb.clear()
        return out

    # ------------------------------------------------------------------ pieces of one file
    def is_open(self) -> bool:
        """Whether a meaning spans the last line parsed (the next piece cannot start fresh)."""
        return self._open()

    def carry(self) -> Carry:
        """The per-file state after the last line parsed (see :class:`Carry`)."""
        return Carry(self.stats.lines, self._tail, self._tail_cut, self._lookbacks, self._failure_block,
                     dict(self._step_counts), self._steps_done, frozenset(self._ranks))

    def resume(self, c: Carry) -> None:
        """Start from ``c``: this parser then reads the next piece as the one parser of the
        whole file would have (nothing was open there)."""
        self.stats.lines = c.lines
        self._tail, self._tail_cut, self._lookbacks = c.tail, c.tail_cut, c.lookbacks
        self._failure_block = c.failure_block
        self._step_counts, self._steps_done = dict(c.step_counts), c.steps_done
        self._ranks = set(c.ranks)

    def piece_tail(self) -> None:
        """Keep no end blocks: a piece's parser (the file's tail is found once, from the blocks
        the whole file's parser would have kept: :meth:`ranks_seen`, :meth:`end_blocks`)."""
        self._piece_tail = True

    def ranks_seen(self) -> tuple[int, ...]:
        """The launcher ranks seen so far (two at most): what decides the tail's cap."""
        return tuple(self._ranks)

    def tail_from(self, source: Source) -> None:
        """Keep the end blocks as offsets into ``source`` where it can read them again
        (:class:`~.tail.Kept`): ``source`` yields this parser's blocks, in order."""
        self._end_blocks = Kept(source=source)

    def end_blocks(self, blocks: Iterable[tuple[int, str]]) -> None:
        """The end blocks the whole file's parser would have kept (the file was parsed in pieces):
        a :class:`~.tail.Kept` as it is (its blocks may be offsets, read again when scanned)."""
        self._end_blocks = blocks if isinstance(blocks, Kept) else Kept(blocks)

    def piece_flags(self) -> tuple[bool, bool, bool]:
        """(lines read back before the piece's start, a failure-block field with no block
        name, a block named): what makes a piece parsed on its own depend on the one before."""
        return self._early_lookback, self._field_unnamed, self._block_named

    # ------------------------------------------------------------------ the end of the file
    def _keep_block(self, first: int, text: str, lines: int = -1) -> None:
        if self._piece_tail:
            return
        tail = self._end_blocks
        tail.append(first, text, lines)
        tail.trim(tail_cap(self._ranks))

    def _keep_line(self, lineno: int, text: str) -> None:
        """Line mode: consecutive lines gathered into blocks for the tail."""
        cur = self._end_line
        if cur is None or cur[0] + len(cur[1]) != lineno or len(cur[1]) >= 512:
            if cur is not None:
                self._keep_block(cur[0], "\n".join(cur[1]))
            cur = self._end_line = (lineno, [])
        cur[1].append(text)

    def tail(self, ranks: frozenset[int] | None = None) -> list[E.Event]:
        """Where the output stops (analyze, after :meth:`finish`): the last line and the last
        progress line, per rank where the file interleaves ranks (:mod:`.tail`).  Not a line's
        meaning but the model's input: ``parse`` (``keep_text``) keeps no tail.  ``ranks``: the
        launcher ranks the file's parse saw (its end blocks were kept with :meth:`keep_block`)."""
        if ranks is not None:
            self._ranks = set(ranks)
        if self._end_line is not None:
            self._keep_block(self._end_line[0], "\n".join(self._end_line[1]))
            self._end_line = None
        blocks = self._end_blocks
        if not blocks:
            return []
        self._end_blocks = Kept(source=blocks.source)  # watch calls finish() again after more lines
        one_rank = not (len(self._ranks) >= 2 or self._mixed(blocks))
        end: int | None = None
        if not one_rank:
            last, prog = per_rank(blocks)
            found = [(f, E.LastLine) for f in last.values()] + [(f, E.Progress) for f in prog.values()]
        else:
            end = last_number(blocks)  # counted once, for ends() and place()
            one, p = ends(blocks, end)
            found = ([(one, E.LastLine)] if one else []) + ([(p, E.Progress)] if p else [])
        # a file of one rank's two lines by reference (a folder of 100,000 per-rank files kept
        # 100,000 of each, ~500 bytes a rank of text): where the parse could refer to its lines
        refer = one_rank and reread.ENABLED and reread.path_of(self.source) is not None
        out: list[E.Event] = []
        for f, cls in sorted(found, key=lambda t: t[0].line):
            rec = peel(f.text)[0]
            fields: dict[str, Any] = {}
            if f.progress is not None:
                fields = {"step": f.progress.step, "total": f.progress.total, "elapsed_s": f.progress.elapsed_s,
                          "unit": f.progress.unit}
            ev = self._make(cls, rec, f.line, f.text, fields)
            where = blocks.place(f.line, f.text, end) if refer else None
            ref = reread.ref(where[0], where[1], f.text) if where is not None else None
            if ref is not None and ev._text is f.text:  # type: ignore[attr-defined]  # the slot behind Event.text
                ev._text = ref  # type: ignore[attr-defined]
            out.append(ev)
        return out

    @staticmethod
    def _mixed(blocks: Kept) -> bool:
        """Whether the end of the file shows lines of two ranks (launcher prefixes)."""
        text = blocks[-1][1]
        tail = text[-16384:]  # its first segment is read as a line, as the other lines
        return len(ranks_in(tail, 0, len(tail))) > 1

    # ------------------------------------------------------------------ NCCL lines
    def _nccl(self, rec: Record, lineno: int, text: str) -> E.Event:
        """An NCCL record.  A WARN whose line does not read ``NCCL WARN <message>`` (quoted by
        the layer above, pasted without the word NCCL) carries its message as ``inner``."""
        self.stats.nccl_records += 1
        body = rec.body
        inner = body if rec.level == "WARN" and "NCCL WARN" not in text else None
        res = self.cache.parse(body) if body else None
        if res is None and body:
            at = anchor_starts(body)
            if at and at[0] > 0:
                res = self.cache.parse(body[at[0]:])
        if res is not None:
            cls, fields = build(res[0], res[1])
            if cls is not E.NcclOther:
                if inner is not None:
                    fields["inner"] = inner
                return self._make(cls, rec, lineno, text, fields)
        cat_id, subsys = self._catalog_of(body, rec.level) if self.use_catalog else (None, None)
        if cat_id is None:
            self.stats.nccl_unknown += 1
        return self._make(E.NcclOther, rec, lineno, text,
                          {"message": body, "subsys": subsys, "catalog_id": cat_id, "inner": inner})

    def _catalog_of(self, body: str, level: str | None) -> tuple[str | None, str | None]:
        key = re.sub(r"\d+", "#", body)
        hit = self._catalog.get(key)
        if hit is None:
            from . import catalog  # parse only: analyze does not use catalog ids

            fmt = catalog.lookup(body, level)
            hit = (fmt.id, fmt.subsys.split("|")[0].replace("NCCL_", "")) if fmt else \
                  (None, catalog.subsystem_guess(body))
            if len(self._catalog) < 100_000:
                self._catalog[key] = hit
        return hit

    # ------------------------------------------------------------------ other lines
    def _other(self, rec: Record, lineno: int, text: str, out: list[E.Event]) -> E.Event | None:
        body = rec.body
        tb = self._tb.get(rec.rank)
        if body.endswith(_TB_START):
            self._tb[rec.rank] = _Tb(start=lineno, text=text)
            if len(body) == len(_TB_START):
                return self._make(E.Text, rec, lineno, text, {})
            body = body[: -len(_TB_START)]
        elif body.startswith("File "):
            fm = _FRAME.match(body)
            if fm is not None or tb is not None:
                if tb is None:  # frames of an excerpt that lost its "Traceback" line
                    tb = self._tb[rec.rank] = _Tb(start=lineno, text=text)
                tb.frames += 1
                tb.last_frame = body.strip()
                uf = _user_frame(body)
                if uf is not None:
                    tb.user_frame = uf
                return self._sync_or_text(rec, lineno, text, fm.group(1) if fm else "", body)
        elif tb is not None and text[:1].isspace() and not _EXC.match(body):
            return self._sync_or_text(rec, lineno, text, body, body)
        ev = self._anchored(rec, body, lineno, text)
        if (ev is None or not ev.is_problem) and _EXC.match(body):
            # an exception line is a problem whatever is found inside it (a "NCCL version 2.21.5"
            # at the end of an NCCL error whose other fields did not parse)
            ev = self._parse_at(rec, body, 0, lineno, text) or ev
        if tb is not None and ev is not None and not text[:1].isspace() and (
                isinstance(ev, E.ExceptionLine) or _EXC.match(body.strip()) or getattr(ev, "exc_type", None)):
            exc = ev if isinstance(ev, E.ExceptionLine) else None
            m = _EXC.match(body.strip()) if exc is None else None
            if exc is not None:
                exc_type, message = exc.exc_type, exc.message
            elif m is not None:  # "torch.OutOfMemoryError: CUDA out of memory. ..."
                exc_type, message = m.group(0), body.strip()[m.end():].lstrip(": ").strip()
            else:
                exc_type, message = getattr(ev, "exc_type", None) or ev.kind, body.strip()
            out.append(E.Traceback(source=self.source, line=lineno, text=text, rank=rec.rank, ts=rec.ts,
                                   exc_type=exc_type or "", message=message, start_line=tb.start,
                                   frames=tb.frames, last_frame=tb.last_frame, user_frame=tb.user_frame,
                                   call=tb.call))
            del self._tb[rec.rank]
            if exc is not None:
                return None  # the traceback event carries the exception line
        if ev is None:
            if rec.level in ("ERROR", "FATAL") or (rec.level == "WARNING" and _ERRLIKE.search(body)) \
                    or _MARKED.match(body):
                return self._make(E.WarnText, rec, lineno, text, {"message": body})
            return self._make(E.Text, rec, lineno, text, {})
        return ev

    def _sync_or_text(self, rec: Record, lineno: int, text: str, where: str, code: str) -> E.Event:
        m = _SYNC.search(where)
        if m is None:
            return self._make(E.Text, rec, lineno, text, {})
        tb = self._tb.get(rec.rank)
        if tb is not None:
            tb.call = m.group(1)  # the innermost one wins
        return self._make(E.SyncCall, rec, lineno, text, {"call": m.group(1), "code": code.strip()})

    def _anchored(self, rec: Record, body: str, lineno: int, text: str) -> E.Event | None:
        if self._in_failure_block and _FKEY.match(body):
            ev = self._parse_at(rec, body, len(body) - len(body.lstrip()), lineno, text)
            if ev is not None:
                return ev
        if body[:1] == " " or body[:1].isdecimal():
            if _ROW.match(body):
                ev = self._parse_at(rec, body, len(body) - len(body.lstrip()), lineno, text)
                if ev is not None:
                    return ev
        wrapper = None
        for at in anchor_starts(body):
            ev = self._parse_at(rec, body, at, lineno, text)
            if ev is not None:
                if not ev.wraps_message:
                    return ev
                wrapper = wrapper or ev  # a message known inside it says more: keep looking
        if wrapper is not None:
            return wrapper
        if body.startswith("=====") or body.startswith("-----"):
            self._in_failure_block = self._in_failure_block and body.startswith("-")
        return None

    def _parse_at(self, rec: Record, body: str, at: int, lineno: int, text: str) -> E.Event | None:
        res = self.cache.parse(body[at:].rstrip())
        if res is None:
            return None
        cls, fields = build(res[0], res[1], body[:at])
        if cls is E.NcclOther:
            return None
        if cls is E.FailureBlockHead:
            self._in_failure_block = True
            self._failure_block = fields.get("block")
            self._block_named = True
        elif cls is E.FailureField and not self._failure_block:
            self._field_unnamed = True
        elif cls is E.FailureField:
            fields["block"] = self._failure_block
        return self._make(cls, rec, lineno, text, fields)

    # ------------------------------------------------------------------ construction
    def _make(self, cls: type[E.Event], rec: Record, lineno: int, text: str, fields: dict[str, Any]) -> E.Event:
        self._saw_rank(rec.rank)
        if rec.pg is not None and cls in _PG_CLASSES:
            fields.setdefault("pg", rec.pg)
            if rec.pg_rank is not None and "pg_rank" in cls.FIELD_TYPES:
                fields.setdefault("pg_rank", rec.pg_rank)
        return cls(source=self.source, line=lineno, text=text, host=rec.host, pid=rec.pid, tid=rec.tid,
                   dev=rec.dev, rank=rec.rank, ts=rec.ts, level=rec.level, **fields)


#: the index tokens of a ``Trees`` line that lists its channels in order (NCCL prints 0..n-1)
def _channels_below(tokens: list[str], n: int) -> list[str]:
    """The (``[index]``, spec) token pairs of a ``Trees`` line for channels below ``n``.

    NCCL prints channels 0, 1, ... in order (``src/init.cc``: ``for (int c=0; c<comm->nChannels;
    c++)`` into a 1,024-character line, 2.4-2.30), so the pairs below ``n`` are the first ``n``:
    one list comparison says so; any other order, or a line cut inside a pair, is walked pair by
    pair."""
    index = tokens[0::2]
    if not len(tokens) % 2 and index == fastpath.IN_ORDER[:len(index)]:
        return tokens[:2 * n]
    out: list[str] = []
    for i in range(0, len(tokens) - 1, 2):
        if int(tokens[i].strip("[]")) < n:
            out += tokens[i:i + 2]
    return out


def _said(ev: E.Event) -> int:
    """How many of an event's own fields hold a value (a joined message must say more)."""
    base = E.Event.FIELDS
    return sum(1 for name in ev.FIELDS if name not in base and getattr(ev, name) not in (None, "", (), 0))
