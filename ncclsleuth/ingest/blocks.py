"""Block reading for analyze: decoded text in 64 KB blocks instead of one line at a time.

Per-line Python work is what limits a log parser written in Python; at NCCL_DEBUG=INFO
plus training output, most lines mean nothing to the diagnosis.  The block reader
decodes a block at once and hands it to :meth:`FileParser.parse_block`, which lets the
regex engine skip over uninteresting lines inside the block without a Python loop.

Unusual files (UTF-16, CR-only line ends, binary) are handed to the line reader in
:mod:`.decode`, which owns those repairs; this module only does the fast,
common case (UTF-8 or Latin-ish text, possibly gzip/bz2/xz), with the same line cap
and notices.
"""
from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ..util.rxstore import rx
from .decode import (
    MAX_LINE_BYTES,
    Caps,
    LineReader,
    cap_note,
    decompress,
    guarded,
    looks_binary,
    open_regular,
    repair_notes,
)
from .sources import InputFile, Notice

#: Bytes read per block.  64 KB keeps every per-block buffer (the read, the decoded text)
#: under glibc's 128 KB mmap threshold, so freed blocks are reused from the heap.  With
#: 1 MB blocks each buffer was a fresh mmap or a re-grown heap top: 36,000-60,000 page
#: faults on a 1M-line job against 4,000-7,000, and 0.76-0.82 s against 0.69-0.70 s
#: (a 240 MB single-rank log: 1.67 s against 1.43 s).
BLOCK = 64 << 10
_SNIFF = 8192
#: a CRLF in a block of bytes: the regex engine's literal search finds it ~3x faster than
#: ``b"\r\n" in b`` in a progress bar's output, where CRs are many and CRLFs none (1.4 against
#: 4.3 ms per 4.9 MB)
_CRLF = rx(rb"\r\n")


class BlockReader:
    """Iterates ``(first_line_number, text_block)``; each block ends at a line end.

    ``text_block`` holds whole lines separated by ``\\n`` (no trailing newline), CRLF
    normalised.  Line numbers count ``\\n``-terminated lines, as the line reader does.
    """

    def __init__(self, inp: InputFile, block: int | None = None, max_line: int = MAX_LINE_BYTES) -> None:
        self.inp = inp
        self.block = block or BLOCK  # read when made: tests make it small to cut small files into pieces
        self.max_line = max_line
        self.notices: list[Notice] = []
        self.lines = 0
        self.bytes_read = 0
        self._fallback: LineReader | None = None
        self._nul = 0
        #: what was repaired (bad UTF-8 lines, NUL lines, cut lines): said at the end of the file
        self.repairs = (0, 0, 0)
        #: the byte offset of the block last yielded (a regular file's)
        self.at = 0
        #: the byte offset past what was read, and whether a block can be read again from its
        #: offset (:meth:`again`): a plain local file, read aligned (not a remote object: reads
        #: there are counted, nor an archive or standard input)
        self.pos = 0
        self.rereadable = False
        #: whether the block last yielded is its bytes as read, decoded (valid UTF-8, no CRLF
        #: folded, no NUL removed, no line cut): then a line's bytes in the file are its text
        #: encoded, at the block's offset plus the encoded text before it (:mod:`ncclsleuth.util.reread`)
        self.plain = False
        #: the lines of the block last yielded (its newlines + 1; -1 where not counted here: the
        #: line reader's re-blocked lines), so that a parser need not count them again
        self.block_lines = -1
        #: the bytes of the block last yielded in the file (its last line end not counted):
        #: where it is ``plain``, where a line near its end starts (``parse.tail.Kept.place``)
        self.block_bytes = 0
        #: the block last yielded as bytes, where its text is them decoded as they are (``plain``),
        #: else None: the prefilter scans them with RE2 (:mod:`ncclsleuth.parse.bytescan`); the
        #: reader holds them while the block is parsed anyway
        self.raw: bytes | None = None

    @property
    def byte_at(self) -> int:
        """The byte offset of the block last yielded where its lines can be read again from the
        file as they are (``rereadable`` and ``plain``), else -1 (:mod:`ncclsleuth.util.reread`)."""
        return self.at if self.plain and self.rereadable else -1

    def _note(self, msg: str, severity: str = "warning") -> None:
        self.notices.append(Notice(self.inp.display, msg, severity))

    def __iter__(self) -> Iterator[tuple[int, str]]:
        yield from guarded(self, self._blocks)

    def _delegate(self) -> Iterator[tuple[int, str]]:
        """Odd encodings and line ends: the line reader repairs, we re-block its lines."""
        self._fallback = LineReader(self.inp, self.max_line)
        self.block_lines = -1
        self.raw = None
        buf: list[str] = []
        first = 1
        last = 0
        for n, s in self._fallback:
            if not buf:
                first = n
            if n != last + 1 and buf:  # a CR-split line: keep numbering exact
                yield first, "\n".join(buf)
                buf, first = [], n
            buf.append(s)
            last = n
            if len(buf) >= 4096:
                yield first, "\n".join(buf)
                buf = []
        if buf:
            yield first, "\n".join(buf)
        self.lines = self._fallback.lines
        self.bytes_read = self._fallback.bytes_read
        self.notices.extend(self._fallback.notices)

    def _blocks(self, raw) -> Iterator[tuple[int, str]]:  # type: ignore[no-untyped-def]
        if not hasattr(raw, "peek"):  # a pipe or object that cannot peek: buffer it to sniff its start
            raw = io.BufferedReader(raw, buffer_size=1 << 16)
        peek = raw.peek(_SNIFF)[:_SNIFF]
        stream, codec, caps = decompress(raw, peek)
        head = stream.peek(_SNIFF)[:_SNIFF] if codec and hasattr(stream, "peek") else peek
        if not head:
            self._note("empty file, nothing to analyse")
            return
        odd = head.startswith((b"\xff\xfe", b"\xfe\xff")) or (b"\n" not in head and b"\r" in head)
        if odd or looks_binary(head):
            if self.inp.path != "-":
                raw.close()
                yield from self._delegate()
                return
            if not odd:  # a pipe cannot be re-read: skip binary, decode the rest as best we can
                self._note("binary file, not a text log, skipped")
                return
        yield from self._split(stream, caps)

    def _split(self, stream, caps: Caps | None = None, lineno: int = 1, at: int = 0,  # type: ignore[no-untyped-def]
               stop: int | None = None) -> Iterator[tuple[int, str]]:
        """Blocks of ``stream`` from byte ``at`` (line ``lineno``) to ``stop`` (or its end).

        A regular file is read in reads that end at multiples of ``block`` bytes, so its
        blocks end at the last line end before each multiple: a reader started at one of
        those block starts (:class:`RangeReader`) yields the very blocks this one does there.
        """
        pending = b""
        bad = cut = 0
        skipping = False
        # read1: a truncated .gz keeps what was decompressed before the damage (read() would
        # drop the whole last buffer); plain files have read1 too
        read = getattr(stream, "read1", stream.read)
        aligned = caps is None and self.inp.path != "-" and hasattr(stream, "seek")
        inner = getattr(self.inp, "inner", None) or self.inp
        self.rereadable = aligned and type(inner) is InputFile
        pos = at
        while True:
            if aligned:
                size = self.block - pos % self.block
                if stop is not None:
                    size = min(size, stop - pos)
                data = stream.read(size) if size > 0 else b""
                pos += len(data)
            else:
                data = read(self.block)
            if not data:
                break
            self.pos = pos
            self.bytes_read += len(data)
            if caps is not None and (why := caps.over(self.bytes_read)) is not None:
                self._note(cap_note(why, lineno - 1))
                break
            if skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    continue
                data, skipping = data[nl + 1:], False
                lineno += 1
            data = pending + data if pending else data
            self.at = pos - len(data)  # where the next block starts (regular files, read aligned)
            end = data.rfind(b"\n")
            if end < 0:
                if len(data) > self.max_line:  # one enormous line: keep its head, drop the rest
                    cut += 1
                    if cut == 1:
                        self._note(f"line {lineno} is longer than {self.max_line} bytes: cut at "
                                   f"{self.max_line} bytes")
                    text = self._decode(data[: self.max_line], counter := [0])
                    self.plain = False
                    self.block_lines = 1  # a line with no line end in it
                    self.raw = None
                    yield lineno, text
                    bad += counter[0]
                    pending, skipping = b"", True
                else:
                    pending = data
                continue
            chunk, pending = data[:end], data[end + 1:]
            # the block's last line end is cut, not folded: a CRLF there left its CR on the line
            crlf = end > 0 and data[end - 1] == 13
            if crlf:
                chunk = chunk[:-1]
            self.block_bytes = len(chunk)
            counter = [0]
            text = self._decode(chunk, counter)
            if crlf:
                self.plain = False  # the line's bytes in the file end with the CR (util.reread)
            bad += counter[0]
            n = text.count("\n") + 1
            if len(chunk) > self.max_line and self._has_long_line(text):
                parts = text.split("\n")
                long = [i for i, x in enumerate(parts) if len(x) > self.max_line]
                cut += len(long)
                if cut == len(long):
                    self._note(f"line {lineno + long[0]} is longer than {self.max_line} bytes: cut at "
                               f"{self.max_line} bytes")
                text = "\n".join(x[: self.max_line] for x in parts)
                self.plain = False
            self.block_lines = n  # cutting lines keeps their line ends
            self.raw = chunk if self.plain else None
            yield lineno, text
            lineno += n
            self.lines = lineno - 1  # kept current: a damaged archive stops mid-file
        if pending and not skipping:
            self.at = pos - len(pending)
            counter = [0]
            text = self._decode(pending[: self.max_line], counter)
            self.plain = self.plain and len(pending) <= self.max_line
            self.block_lines = 1  # after the last line end: one line
            self.block_bytes = len(pending)
            self.raw = pending if self.plain else None
            yield lineno, text
            bad += counter[0]
            lineno += 1
        self.lines = lineno - 1
        self.repairs = (bad, self._nul, cut)
        if stop is None:
            repair_notes(self, bad, self._nul, cut, self.max_line)

    def again(self, start: int, end: int, first: int) -> str:
        """The block this reader yielded from byte ``start`` to ``end`` (where the next began),
        read again, only where ``rereadable``: the file's parse kept only these offsets
        (:class:`ncclsleuth.parse.tail.Kept`); ``""`` where it can no longer be read."""
        blocks = list(RangeReader(self.inp, start, end, first))
        return blocks[0][1] if len(blocks) == 1 else "\n".join(t for _, t in blocks)

    def _has_long_line(self, text: str) -> bool:
        """Whether a line of this block is over ``max_line``.

        With blocks no bigger than ``max_line`` only the first line can be: it may start in
        the previous read's tail, every other line lies inside one read.  (Splitting the
        block to check every line cost ~3 ms per MB, on most blocks of a big file.)
        """
        if self.block <= self.max_line:
            nl = text.find("\n")
            return (nl if nl >= 0 else len(text)) > self.max_line
        return any(len(x) > self.max_line for x in text.split("\n"))

    def _decode(self, b: bytes, bad: list[int]) -> str:
        # CRLF and NUL are looked for in the bytes (a memchr-speed scan) rather than in the
        # decoded text, which is 2 bytes a character as soon as a progress bar's block
        # characters appear: the two text scans cost ~8% of a training-output log
        self.plain = True
        # a lone CR first (memchr): most logs have none, and a two-byte search scans at ~1 GB/s
        # (~0.1 s of the 8,000-rank file); progress bars' redraws have CRs, then _CRLF is asked
        if b"\r" in b and _CRLF.search(b) is not None:
            b = b.replace(b"\r\n", b"\n")
            self.plain = False
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            s = b.decode("utf-8", "replace")
            bad[0] += sum(1 for x in s.split("\n") if "\ufffd" in x)
            self.plain = False
        if b"\x00" in b:
            self._nul += sum(1 for x in s.split("\n") if "\x00" in x)
            s = s.replace("\x00", "")
            self.plain = False
        return s


@dataclass(frozen=True)
class Span:
    """A piece of a file: bytes ``start`` to ``end``, its first line number."""

    start: int
    end: int
    first: int


class Firsts:
    """The first line number of each piece of a file, found as the pieces are parsed: shared by
    the processes that parse them (an anonymous shared mapping made before they fork).

    Why: counting the newlines before every piece start was one serial pass over the file
    before any parsing began, ~0.1 s of a 2M-line (157 MB) file whose ``--jobs 2`` analysis
    takes ~0.47 s.  Now piece 0 starts at line 1 at once; a process that finishes reading piece
    ``k`` says where ``k + 1`` starts (:meth:`learn`: the reader's last line number + 1, free);
    a process that starts a piece before that is known counts the newlines from the nearest
    piece start known (:meth:`first`: usually the one piece the other process is parsing).  Any
    process that finds a number finds the same one, so the table needs no lock: a number not
    yet seen (0) is counted again.
    """

    def __init__(self, path: str, starts: list[int]) -> None:
        import mmap

        self.path, self.starts = path, starts
        self._shared = mmap.mmap(-1, 8 * len(starts))  # MAP_SHARED: forked children write here too
        self._known = memoryview(self._shared).cast("q")
        self._known[0] = 1

    def first(self, k: int) -> int:
        """Piece ``k``'s first line number."""
        known = self._known
        if known[k]:
            return int(known[k])
        j = k - 1
        while not known[j]:
            j -= 1
        line = int(known[j])
        with open_regular(self.path) as f:
            for i in range(j, k):
                line += _newlines(f, self.starts[i], self.starts[i + 1])
                known[i + 1] = line
        return line

    def learn(self, k: int, first: int) -> None:
        """Piece ``k`` starts at line ``first`` (its predecessor was read to its end)."""
        if 0 < k < len(self.starts) and not self._known[k]:
            self._known[k] = first


def _newlines(f: BinaryIO, start: int, end: int) -> int:
    """The newlines in bytes ``start`` to ``end`` of ``f``, read a block at a time: a process
    counting a piece while it holds a model adds no big read to its peak (reads of 4 MB made the
    ``--jobs 2`` peak of a 157 MB file 6 MB higher; a 64 KiB buffer is reused from the heap)."""
    f.seek(start)
    n, pos = 0, start
    while pos < end:
        chunk = f.read(min(BLOCK, end - pos))
        if not chunk:
            break
        n += chunk.count(b"\n")
        pos += len(chunk)
    return n


class RangeReader(BlockReader):
    """The blocks of bytes ``start`` to ``end`` of a plain file, numbered from line ``first``
    (one piece of a big file parsed in parallel: :mod:`ncclsleuth.parallel.split`).

    ``start`` must be where :class:`BlockReader` starts a block (:func:`block_start`), so
    the pieces yield the blocks the whole file does.  The end-of-file notices are the
    caller's: ``repairs`` has this piece's counts, the first cut line's notice is in
    ``notices``.
    """

    def __init__(self, inp: InputFile, start: int, end: int, first: int, block: int | None = None,
                 max_line: int = MAX_LINE_BYTES) -> None:
        super().__init__(inp, block, max_line)
        self.start, self.end, self.first = start, end, first

    def _blocks(self, raw) -> Iterator[tuple[int, str]]:  # type: ignore[no-untyped-def]
        raw.seek(self.start)
        yield from self._split(raw, None, self.first, self.start, self.end)


#: block reads looked at for a line end before a piece is given up (a file without line ends)
_SEEK_BLOCKS = 64


def block_start(f: BinaryIO, near: int, block: int) -> int | None:
    """A byte offset near ``near`` where :class:`BlockReader` starts a block of the plain
    file ``f``: just after the last line end before a multiple of ``block`` (None past the
    end of the file, or where ``_SEEK_BLOCKS`` reads hold no line end)."""
    first = max(1, -(-near // block))
    for j in range(first, first + _SEEK_BLOCKS):
        f.seek((j - 1) * block)
        window = f.read(block)
        if len(window) < block:
            return None  # the last read: no block starts after it
        nl = window.rfind(b"\n")
        if nl >= 0:
            return (j - 1) * block + nl + 1
    return None
