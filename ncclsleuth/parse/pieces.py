"""A file's parse in pieces: what a piece parsed on its own records, and whether it is the one parse's.

``--jobs N`` parses a big file in pieces (byte ranges at block starts, in several
processes: :mod:`ncclsleuth.parallel.split`).  A piece after the first is parsed on its
own, from its first line, with a :class:`Recorder` for a sink: what the parser would have
asked of the job model (events, connection lines, touched processes) is recorded, not
done, and :func:`replay` later does it to the file's one model in order, so every model
state that spans lines (a process's communicator, counted connections, failure blocks,
tracks, retention counts) is simply the model's own.

What a piece cannot know is the parser's state at its start.  :func:`taken` says whether
a piece's parse is the one a single parser continuing from the state before it
(:class:`~.lines.Carry`) would have made: nothing may be open at the start (the piece
before ended with no traceback, held message, tool block, ``Last error:`` or nccl-tests
table open), and what it did may not depend on the lines before it (a tool block reading
lines back past its start, a failure-block field with no block name, more lookbacks than
the file allows); the per-file state that goes on (the ranks seen, the lookback text and
count, the failure-block name) is joined, and the step lines it sampled on its own are
sampled again for the whole file (:class:`StepSampler`).  A piece that is not taken is
parsed again by the caller, continuing from the state at its start.
"""
from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import events as E
from ..ingest.sources import Notice
from .blocks import LOOKBACK_CHARS, MAX_LOOKBACKS
from .fastpath import Cut
from .lines import Carry, Sink, sample_step

#: the words of a reader's notice of its first cut line (a file says its first one only)
CUT_NOTICE = "bytes: cut at"
#: record codes (an event is recorded as itself)
_TOUCH, _CONN, _ADD_CONN, _STEPS, _RUN, _LAUNCHED = 0, 1, 2, 3, 4, 5
#: records pickled together when a piece crosses a pipe (:class:`OpChunks`): ~250 KB pickled,
#: ~1 MB of objects read back at a time
OPS_CHUNK = 4096


class OpChunks:
    """A shipped piece's records, pickled a chunk of ``OPS_CHUNK`` at a time and read back one
    chunk at a time as :func:`replay` reaches it.

    A piece is ~8 MB of its file, more where the file is big (at most ``PIECES_PER_JOB`` pieces
    a process: 16 pieces of ~29 MB for a 460 MB file and ``--jobs 2``); read back whole, its
    records (~100,000 events of such a file, most of which the model does not keep) were all
    alive at once in the lead process: on that file the lead's peak of traced objects was 108 MB
    against ``--jobs 1``'s 69 MB for the same model.  Equal texts are shared within a chunk only,
    so the bytes grow a little."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    @classmethod
    def of(cls, ops: list[Any]) -> OpChunks:
        return cls([pickle.dumps(ops[i:i + OPS_CHUNK], protocol=pickle.HIGHEST_PROTOCOL)
                    for i in range(0, len(ops), OPS_CHUNK)])

    def lists(self) -> Iterator[list[Any]]:
        """The records, a chunk's list at a time, each chunk's bytes let go as it is read."""
        chunks = self.chunks
        chunks.reverse()
        while chunks:
            yield pickle.loads(chunks.pop())


class Asked(Protocol):
    """What a parser asks its sink before it hands a line over (``JobModel`` answers)."""

    tree_channels: int

    def needs_event(self, kind: str) -> bool: ...

    def keeps_line(self, kind: str, text: str) -> bool: ...


class Recorder:
    """A parser's sink that records what :class:`ncclsleuth.model.job.JobModel` would be asked to do.

    ``touch`` answers True and ``conn_seen`` False, so the parser hands over everything
    a first sight needs; :func:`replay` asks the real model.  Repeated texts are shared
    (one object each), so the records pickle small.
    """

    def __init__(self, model: Asked) -> None:
        """``model``: the job model the records are for, which answers what the parser asks of
        its sink before handing a line over (``needs_event``, ``keeps_line``, ``tree_channels``)."""
        self.ops: list[Any] = []
        self.needs_event = model.needs_event
        self.keeps_line = model.keeps_line
        self.tree_channels = model.tree_channels
        self._hp: dict[str, str] = {}
        self._conn: dict[str, tuple[str, str, str, str]] = {}
        self._texts: dict[str, str] = {}

    def add(self, ev: E.Event) -> None:
        self.ops.append(ev)

    #: none: a replayed event keeps its text by reference by then, and the model's ``add`` keeps
    #: the place of an evidence line itself (``JobModel._said``)
    placed_kinds: frozenset[str] = frozenset()

    def placed(self, ev: E.Event) -> None:
        """Not asked (:attr:`placed_kinds` is empty)."""

    def steps(self, evs: list[E.Event]) -> None:
        """Step lines sampled per rank in this piece: sampled again for the whole file."""
        self.ops.append((_STEPS, evs))

    def add_conn(self, source: str, line: int, host: str, pid: int, src: str, dst: str, via: str,
                 direction: str | None = None) -> str | None:
        self.ops.append((_ADD_CONN, line, host, pid, src, dst, via, direction))
        return None  # the model's answer (its communicator) is the replay's

    def touch(self, line: int, hp: str, kind: str) -> bool:
        self.ops.append((_TOUCH, line, self._hp.setdefault(hp, hp), kind))
        return True

    def bind(self, source: str, line: int, hp: str) -> None:  # touch never says it is needed
        raise AssertionError("Recorder.touch answers True")

    def conn_seen(self, line: int, hp: str, rest: str) -> bool:
        return False

    def conn_lines(self, source: str, first: int, hp: str, rests: list[str], cuts: dict[str, Cut]) -> None:
        """A run of connection lines, recorded as one (the model takes it at once, as the
        whole file's parse does); equal texts as one object each, so they pickle once."""
        texts = self._texts
        self.ops.append((_RUN, first, self._hp.setdefault(hp, hp), [texts.setdefault(r, r) for r in rests], cuts))

    def launched(self, host: str, pid: int, rank: int) -> None:
        self.ops.append((_LAUNCHED, host, pid, rank))

    def add_conn_first(self, source: str, line: int, hp: str, rest: str, src: str, dst: str, via: str) -> None:
        t = self._conn.get(rest)
        if t is None:
            t = self._conn[rest] = (rest, src, dst, via)
        self.ops.append((_CONN, line, self._hp.setdefault(hp, hp), t))


@dataclass
class Piece:
    """What parsing one piece of a file on its own gave (pickled back from a worker)."""

    index: int
    #: what its parser asked of its sink (:class:`Recorder`); :class:`OpChunks` once it has crossed a pipe
    ops: list[Any] | OpChunks
    #: the parser's per-file state at the piece's end, as parsed on its own
    carry: Carry
    #: whether a meaning spans the piece's last line (the next piece cannot be taken as parsed)
    open_end: bool
    #: see FileParser.piece_flags
    early_lookback: bool
    field_unnamed: bool
    block_named: bool
    #: per block read: (first line, characters, the ranks the parser had seen before it, byte
    #: offset), for the file's tail (found once, from the blocks its one parser would keep)
    ends: list[tuple[int, int, tuple[int, ...], int]]
    lines: int
    repairs: tuple[int, int, int]
    notices: list[Notice] = field(default_factory=list)
    #: parsed from the true state at its start (in the lead, after a fallback): taken as is
    resumed: bool = False
    #: the last piece it covers (a resumed parse goes on to where nothing is open)
    until: int = -1

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a worker's piece on its way to the lead): its records a chunk at a time
        (:class:`OpChunks`)."""
        state = dict(self.__dict__)
        if type(self.ops) is list:
            state["ops"] = OpChunks.of(self.ops)
        return state


def replay(model: Sink, source: str, ops: list[Any] | OpChunks,
           steps: Callable[[list[E.Event]], list[E.Event]]) -> None:
    """Do to ``model`` what a piece's parser asked of its sink, in order (``steps``: the
    step lines of a sampled run that the whole file's sampling keeps).

    ``ops`` is consumed: each op is taken out of it as it is done (a shipped piece's are read
    back a chunk at a time: :class:`OpChunks`), so that what the model does not keep (most of a
    piece's events) is freed at once, not held to the piece's end among what the model keeps."""
    for part in ops.lists() if isinstance(ops, OpChunks) else (ops,):
        _replay(model, source, part, steps)


def _replay(model: Sink, source: str, ops: list[Any], steps: Callable[[list[E.Event]], list[E.Event]]) -> None:
    add, touch, bind, seen, first = model.add, model.touch, model.bind, model.conn_seen, model.add_conn_first
    ops.reverse()
    pop = ops.pop
    while ops:
        op = pop()
        if type(op) is not tuple:
            add(op)
            continue
        code = op[0]
        if code == _CONN:
            _, line, hp, (rest, src, dst, via) = op
            if not seen(line, hp, rest):
                first(source, line, hp, rest, src, dst, via)
        elif code == _TOUCH:
            _, line, hp, kind = op
            if not touch(line, hp, kind):
                bind(source, line, hp)
                touch(line, hp, kind)
        elif code == _RUN:
            model.conn_lines(source, *op[1:])
        elif code == _STEPS:
            for ev in steps(op[1]):
                add(ev)
        elif code == _LAUNCHED:
            model.launched(*op[1:])
        else:
            model.add_conn(source, *op[1:])


def whole(evs: list[E.Event]) -> list[E.Event]:
    """A resumed parse's step lines: sampled for the whole file already."""
    return evs


class StepSampler:
    """The whole file's step-line sampling over pieces sampled on their own: the first
    ``STEP_SAMPLES_PER_RANK`` per rank of the file, and none once a file of one rank has them
    (:func:`~.lines.sample_step`, as ``FileParser._step_lines``)."""

    def __init__(self, carry: Carry) -> None:
        self.counts = dict(carry.step_counts)
        self.done = carry.steps_done

    def __call__(self, evs: list[E.Event]) -> list[E.Event]:
        out = []
        for ev in evs:
            if self.done:
                break
            keep, self.done = sample_step(self.counts, ev.rank)
            if keep:
                out.append(ev)
        return out


def _joined_tail(before: Carry, piece: Carry) -> tuple[str, bool]:
    """The lookback text at a piece's end for the whole file (``FileParser._keep_tail``)."""
    if piece.tail_cut or len(piece.tail) >= LOOKBACK_CHARS:
        return piece.tail, piece.tail_cut
    tail = before.tail + "\n" + piece.tail if before.tail or before.lines else piece.tail
    if len(tail) > LOOKBACK_CHARS:
        return tail[-LOOKBACK_CHARS:], True
    return tail, before.tail_cut


def taken(before: Carry, p: Piece) -> Carry | None:
    """The whole file's state after piece ``p`` parsed on its own, when its parse is the one
    a single parser continuing from ``before`` would have made; None when it is not."""
    c = p.carry
    if p.early_lookback or (p.field_unnamed and before.failure_block):
        return None
    if c.lookbacks and before.lookbacks + c.lookbacks > MAX_LOOKBACKS:
        return None
    if c.steps_done and set(before.step_counts) - set(c.step_counts):
        return None  # it stopped sampling when the file's other ranks would have gone on
    tail, cut = _joined_tail(before, c)
    ranks = before.ranks | c.ranks
    return Carry(before.lines + c.lines, tail, cut, before.lookbacks + c.lookbacks,
                 c.failure_block if p.block_named else before.failure_block, {}, False,
                 frozenset(sorted(ranks)[:2]) if len(ranks) > 2 else ranks)
