"""The end of a file: its last line and its last training-progress line (per rank).

Whole-job reasoning asks where each rank's output stops ("rank 3 printed nothing after
step 9, the others reached step 10") and how far its training got.  Both are at the end
of the output, so nothing is added to the per-line path: the parser keeps the last blocks
it read (at most :data:`TAIL_CHARS`) and this module looks at them once per file.

* A file of one rank (a per-rank log, ``torchrun --log-dir``): its last non-empty line,
  and its last progress line, found backwards from the end by ``str.rfind`` of a few
  literals and one regex per candidate line (a few microseconds per file).
* A file that interleaves ranks (``[rankN]:``, ``[defaultN]:``, srun ``N: ``, Open MPI
  ``[1,N]<stdout>:`` prefixes): every line of the tail, the last line and the last
  progress line of each rank prefix.

Progress lines are what training loops print: ``step 14 loss 0.9``, ``Step [200/500]``,
``iter 83123: loss ...``, Megatron's ``iteration 100/ 500000 |``, ``global_step=120`` and
tqdm bars (``47%|...| 1695000/3634744 [30:09<33:25, 967.30 examples/s]``, with elapsed
time).  ``optimizer.step()``, ``steps: 16`` and ``global_step`` inside words are not.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from re import escape as re_escape
from typing import Protocol, overload

from ..util.classes import NamedTuple
from ..util.rxstore import rx
from .envelope import ISO_TIME, POD_TAG

#: characters of the end of a file kept for this scan (a few thousand lines)
TAIL_CHARS = 256 * 1024
#: the same for a file that interleaves ranks: every rank's last progress line comes before
#: the burst of failure lines all ranks print at the end (1,024 ranks x ~2 KB of timeouts)
TAIL_CHARS_MULTI = 8 * 1024 * 1024
#: candidate lines tried per file of one rank before giving up
_TRIES = 64
#: lines back from the end of its block a found line is placed in the file (:meth:`Kept.place`)
_PLACE_LINES = 4096

_STEP = rx(r"(?<![\w.])(?i:global_step|step|iter(?:ation)?)\b\s*[:=#]?\s*\[?\s*(\d+)(?:\s*/\s*(\d+))?")
_BAR = rx(r"(\d+)/(\d+) +\[(?:(\d+):)?(\d+):(\d\d)<")
_ANCHORS = ("step", "Step", "STEP", "iter", "Iter", "ITER", "<")
#: launcher prefixes that say which rank printed a line (as the envelope reads them), after what a
#: log collector puts before them: ``kubectl logs``' ``--prefix`` pod tag and ``--timestamps`` time
#: (a torchrun pod's ``2025-11-29T11:31:50.123456789Z [default3]:...``: read from the line's start
#: only, every rank's lines had been one's, and where a rank stopped was lost)
_RANK = rx(f"(?:{POD_TAG})?(?:{ISO_TIME}:? )?"
           r"(?:\[(?:default|rank ?|trainer|worker|RANK |Rank )(\d+)(?:\|\d+)?\]|(\d{1,6}): (?=\S)"
           r"|\[\d+,(\d+)\]<std)")


class Source(Protocol):
    """Where the blocks of a file's parse come from, when they can be read again
    (:class:`ncclsleuth.ingest.blocks.BlockReader` of a plain file)."""

    rereadable: bool
    at: int
    pos: int

    def again(self, start: int, end: int, first: int) -> str: ...


class Kept(Sequence[tuple[int, str]]):
    """The end blocks kept for this scan, oldest first, at most ``cap`` characters past the first.

    The newest ``TAIL_CHARS`` are kept as text: a block of ASCII as it is, any other as UTF-8,
    decoded when read (one progress-bar ``█`` makes CPython store a block at 2 bytes a
    character, 4 for an emoji).  With a ``source`` that can read its blocks again (a plain
    local file), older blocks are kept as their byte offsets and read again when this scan
    reads them: the tail of an interleaved file is up to 8 M characters, held through the
    whole parse, and a file of one rank (or a short one) is still opened once.  Blocks are
    read back one at a time (``reversed`` walks from the newest), never all at once."""

    __slots__ = ("_items", "chars", "_source", "_hot", "_hot_chars", "_plain", "_dropped", "_end")

    def __init__(self, blocks: Iterable[tuple[int, str]] = (), source: Source | None = None) -> None:
        #: (first line, the text or its offset, characters, the offset or -1)
        self._items: list[tuple[int, str | bytes | int, int, int]] = []
        self.chars = 0
        self._source = source
        self._hot = 0  # the first block kept as it was read
        self._hot_chars = 0
        #: block number (its index plus the blocks dropped before it) -> its byte offset and bytes
        #: where its text is the file's bytes there decoded (``BlockReader.byte_at``,
        #: ``block_bytes``): where a line found in it can be read again (:meth:`place`)
        self._plain: dict[int, tuple[int, int]] = {}
        self._dropped = 0
        #: the number of the newest block's last line where its lines were counted when it came
        #: (:meth:`append`), else -1 (:meth:`last_number` counts them)
        self._end = -1
        for first, text in blocks:
            self.append(first, text)
            self._cool()

    def append(self, first: int, text: str, lines: int = -1) -> None:
        """Keep a block (read next): then :meth:`trim` to the cap.  ``lines``: its lines, where the
        reader counted them (``BlockReader.block_lines``: ``text.count("\n") + 1``), so that the
        number of the last line is not counted again (a scan of the block: ~27 us a 56 KB rank file)."""
        self._end = first + lines - 1 if lines > 0 else -1
        src = self._source
        if src is not None and src.rereadable:
            plain = getattr(src, "byte_at", -1)
            if plain >= 0:
                self._plain[self._dropped + len(self._items)] = (plain, getattr(src, "block_bytes", -1))
        self._items.append((first, text, len(text), src.at if src is not None and src.rereadable else -1))
        self.chars += len(text)
        self._hot_chars += len(text)

    def trim(self, cap: int) -> None:
        """Drop the oldest blocks while the rest still hold ``cap`` characters; keep those past the
        newest ``TAIL_CHARS`` by offset (or as UTF-8)."""
        items = self._items
        while len(items) > 1 and self.chars - items[0][2] >= cap:
            n = items.pop(0)[2]
            self._plain.pop(self._dropped, None)
            self._dropped += 1
            self.chars -= n
            if self._hot:
                self._hot -= 1
            else:
                self._hot_chars -= n
        self._cool()

    def _cool(self) -> None:
        """Blocks older than the newest ``TAIL_CHARS``: their offset where the source can read them
        again, else their text as UTF-8 where it is not ASCII (done here, not for every block read:
        most are dropped before)."""
        items = self._items
        while self._hot_chars - items[self._hot][2] >= TAIL_CHARS:
            f, text, n, off = items[self._hot]
            if off >= 0:
                items[self._hot] = (f, off, n, off)
            elif isinstance(text, str) and not text.isascii():
                items[self._hot] = (f, text.encode("utf-8", "surrogatepass"), n, off)
            self._hot_chars -= n
            self._hot += 1

    @property
    def source(self) -> Source | None:
        return self._source

    def place(self, line: int, text: str, end: int | None = None) -> tuple[int, int] | None:
        """Where line number ``line``, which says ``text``, lies in the file: (byte offset, bytes),
        found back from the end of the newest kept block that holds it, if that block is still
        kept as text and is the file's bytes decoded; None otherwise (the line keeps its text).
        Asked for a file of one rank's last line and last progress line (:func:`ends`): a few
        lines back, at most :data:`_PLACE_LINES`; not for every rank of an interleaved file (each
        would walk back from the end).  ``end``: the number of the newest block's last line,
        where the caller counted it (:func:`last_number`)."""
        newest = len(self._items) - 1
        for i in range(newest, self._hot - 1, -1):
            first, kept, _, _ = self._items[i]
            if first > line:
                continue
            plain = self._plain.get(self._dropped + i)
            if plain is None or not isinstance(kept, str):
                return None
            last = end if end is not None and i == newest else first + kept.count("\n")
            if line > last or last - line > _PLACE_LINES:
                return None
            stop = len(kept)
            for _ in range(last - line):
                stop = kept.rfind("\n", 0, stop)
            start = kept.rfind("\n", 0, stop) + 1
            if kept[start:stop] != text:
                return None
            at, size = plain
            if kept.isascii():  # O(1): CPython knows it
                return at + start, len(text)
            if size < 0:
                return None
            # the bytes from the line to the block's end, not the block's before it (the lines
            # asked for are near the end; a progress bar makes every block non-ASCII)
            return at + size - len(kept[start:].encode("utf-8", "surrogatepass")), \
                len(text.encode("utf-8", "surrogatepass"))
        return None

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> tuple[int, str]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[int, str]]: ...

    def __getitem__(self, i: int | slice) -> tuple[int, str] | Sequence[tuple[int, str]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        items = self._items
        first, kept, _, _ = items[i]
        if isinstance(kept, str):
            return first, kept
        if isinstance(kept, bytes):
            return first, kept.decode("utf-8", "surrogatepass")
        assert self._source is not None  # offsets are kept only with a source
        j = i % len(items) + 1
        end = items[j][3] if j < len(items) and items[j][3] >= 0 else self._source.pos
        return first, self._source.again(kept, end, first)

    def __reversed__(self) -> Iterator[tuple[int, str]]:
        for i in range(len(self._items) - 1, -1, -1):
            yield self[i]


class Progress(NamedTuple):
    step: int
    total: int | None
    elapsed_s: int | None
    unit: str  # step | iter | bar


class Found(NamedTuple):
    """One line the scan picked: its number, text, and what it says (progress lines)."""

    line: int
    text: str
    progress: Progress | None = None


def progress(line: str) -> Progress | None:
    """The progress a line reports, or None."""
    seg = line[line.rfind("\r") + 1:] if "\r" in line else line
    m = _BAR.search(seg)
    if m is not None:
        h, mi, s = m.group(3), m.group(4), m.group(5)
        return Progress(int(m.group(1)), int(m.group(2)), int(h or 0) * 3600 + int(mi) * 60 + int(s), "bar")
    m = _STEP.search(seg)
    if m is not None:
        word = seg[m.start():m.start() + 4].lower()
        return Progress(int(m.group(1)), int(m.group(2)) if m.group(2) else None, None,
                        "iter" if word == "iter" else "step")
    return None


def rank_of(line: str) -> int | None:
    """The rank a launcher prefix at the start of the line names."""
    m = _RANK.match(line)
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


def _lines_back(blocks: Sequence[tuple[int, str]], end: int | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) of the kept blocks, last line first (``end``: the number of the last
    block's last line, where the caller counted it)."""
    for first, text in reversed(blocks):
        n = first + text.count("\n") if end is None else end
        end = None  # given for the last block only
        stop = len(text)
        while stop >= 0:
            start = text.rfind("\n", 0, stop) + 1
            yield n, text[start:stop]
            n -= 1
            stop = start - 1


def ends(blocks: Sequence[tuple[int, str]], end: int | None = None) -> tuple[Found | None, Found | None]:
    """The last line and the last progress line of a file of one rank, both numbered from the
    end of the last block: its line ends counted once (a scan of ~64 KB a file, which
    16,384 per-rank files paid twice); ``end``: the number of its last line, where the caller
    counted it (:func:`last_number`)."""
    if not blocks:
        return None, None
    if end is None:
        end = last_number(blocks)
    return last_line(blocks, end), last_progress(blocks, end)


def last_number(blocks: Sequence[tuple[int, str]]) -> int:
    """The number of the last line of the kept blocks (they are not empty): as :class:`Kept`
    remembers it where the reader counted the newest block's lines, else counted."""
    if isinstance(blocks, Kept) and blocks._end >= 0:
        return blocks._end
    first, text = blocks[-1]
    return first + text.count("\n")


def last_line(blocks: Sequence[tuple[int, str]], end: int | None = None) -> Found | None:
    """The last non-empty line (``end``: as for :func:`_lines_back`)."""
    for n, s in _lines_back(blocks, end):
        if s.strip():
            return Found(n, s)
    return None


#: characters before a position the last progress anchor is looked for in first (then 4x wider)
_WINDOW = 4096


def _last_anchor(text: str, pos: int) -> int:
    """Where the last of the ``_ANCHORS`` that ends by ``pos`` starts (-1: none), as the largest
    ``text.rfind(a, 0, pos)``: looked for in the last ``_WINDOW`` characters first, then in
    windows 4x wider.  An anchor a log never prints (``STEP``, ``ITER``) cost a scan of the whole
    kept tail each, 7 scans a file (~10% of parsing 16,384 per-rank files).  An occurrence that
    starts before a window is before any found in it, so the first window with one gives the
    same answer as the whole text."""
    width = _WINDOW
    while True:
        lo = pos - width if pos > width else 0
        cand = max(text.rfind(a, lo, pos) for a in _ANCHORS)
        if cand >= 0 or lo == 0:
            return cand
        width *= 4


def last_progress(blocks: Sequence[tuple[int, str]], end: int | None = None) -> Found | None:
    """The last progress line of a file of one rank (literal search backwards; ``end``: as for
    :func:`_lines_back`, then its line is numbered from the end, where it most often is)."""
    tries = 0
    last = end  # the last block's last line number (the blocks are walked from it)
    for first, text in reversed(blocks):
        pos = len(text)
        while tries < _TRIES:
            cand = _last_anchor(text, pos)
            if cand < 0:
                break
            start = text.rfind("\n", 0, cand) + 1
            stop = text.find("\n", cand)
            line = text[start:] if stop < 0 else text[start:stop]
            tries += 1
            p = progress(line)
            if p is not None:
                n = first + text.count("\n", 0, start) if last is None else last - text.count("\n", start)
                return Found(n, line, p)
            pos = start
            if pos == 0:
                break
        last = None
    return None


#: any of the progress anchors in a line (one search instead of one per literal)
_ANY_ANCHOR = rx("|".join(re_escape(a) for a in _ANCHORS))


#: characters of a tail looked at together by :func:`per_rank` (a few hundred lines)
_CHUNK = 64 * 1024
#: a launcher prefix at the start of a line after the first (a literal first: the regex engine
#: looks for newlines, in C, and tries the prefix only there).  Every prefix starts with ``[`` or
#: a digit (the pod tag, the time, each alternative of ``_RANK``): the lookahead refuses any other
#: line at its first character, before the optional pod tag and time are tried and undone (a
#: rank file's 16 KB tail, 227 lines: 52 -> 32 us)
_NL_RANK = rx("\n(?=[\\[\\d])(?:" + _RANK.pattern + ")")


def ranks_in(text: str, start: int, end: int) -> set[int]:
    """The ranks whose prefix starts a line of ``text[start:end]`` (``start`` a line start)."""
    ranks = {int(a or b or c) for a, b, c in set(_NL_RANK.findall(text, start, end))}
    m = _RANK.match(text, start)
    if m is not None:
        ranks.add(int(next(g for g in m.groups() if g is not None)))
    return ranks


def per_rank(blocks: Sequence[tuple[int, str]]) -> tuple[dict[int | None, Found], dict[int | None, Found]]:
    """Each rank prefix's last line and last progress line (``None``: lines without one).

    Up to ``TAIL_CHARS_MULTI`` (100,000 lines of an interleaved file) is read back in chunks of
    ``_CHUNK`` characters.  Once the lines without a prefix have both answers, a chunk whose
    prefixed lines (found by one regex pass, in C) belong only to ranks already answered is
    skipped unread; any other chunk is read line by line: its lines come from one ``split``, a
    blank line is told by ``isspace`` (no copy), the rank by one regex match, the anchors by one
    search.  The answers are those of reading every line (``tests/test_members.py``)."""
    last: dict[int | None, Found] = {}
    prog: dict[int | None, Found] = {}
    match, anchor = _RANK.match, _ANY_ANCHOR.search
    for first, text in reversed(blocks):
        end, idx = len(text), text.count("\n")  # the chunk [start, end), idx: its last line's index
        while True:
            start = 0 if end <= _CHUNK else text.rfind("\n", 0, end - _CHUNK) + 1
            top = idx - text.count("\n", start, end)  # the index of the chunk's first line
            ranks = ranks_in(text, start, end) if None in last and None in prog else None
            if ranks is None or any(r not in last or r not in prog for r in ranks):
                lines = text[start:end].split("\n")
                for i in range(len(lines) - 1, -1, -1):
                    s = lines[i]
                    if not s or s.isspace():
                        continue
                    m = match(s)
                    r = None if m is None else int(next(g for g in m.groups() if g is not None))
                    if r not in last:
                        last[r] = Found(first + top + i, s)
                    if r not in prog and anchor(s) is not None:
                        p = progress(s)
                        if p is not None:
                            prog[r] = Found(first + top + i, s, p)
            if start == 0:
                break
            end, idx = start - 1, top - 1
    return last, prog
