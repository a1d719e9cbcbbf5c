"""Decoding: the bytes of one input as numbered text lines, repairing what it can.

Compressed (gzip/bz2/xz by magic bytes), binary (sniffed and skipped), UTF-16, CR-only
line ends, invalid UTF-8, NUL bytes, ANSI colours, ``\\r`` progress redraws and over-long
lines are all handled here, each with a :class:`~.sources.Notice`.  Files are streamed
(``readline`` with a byte cap), never read whole, so a 2 GB single-rank log costs the
memory of one line.  :class:`LineReader` is the line-at-a-time reader (``parse``,
``watch``); the block reader (:mod:`.blocks`) builds on the same helpers.
"""
from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from ..util.rxstore import rx
from .sources import InputFile, Notice, limits, size_text

#: Longest line kept; the rest of a longer line is dropped (with a notice).
MAX_LINE_BYTES = 1 << 20
_SNIFF = 8192
#: decompressed bytes between two checks of the caps (line reader)
_CHECK_EVERY = 1 << 20
_ANSI = rx(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][AB012]")
_BINARY_MAGIC = (b"\x7fELF", b"PK\x03\x04", b"\x89PNG", b"%PDF", b"\xca\xfe\xba\xbe", b"7z\xbc\xaf")


def open_binary(inp: InputFile) -> BinaryIO:
    """The raw bytes of an input: standard input, an input that opens itself (remote, in memory), a file."""
    if inp.path == "-":
        return sys.stdin.buffer
    opener = getattr(inp, "open", None)  # inputs that open themselves (remote objects, bytes in memory)
    if opener is not None:
        return opener()
    return open_regular(inp.path)


def open_regular(path: str) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only: a FIFO or device put in a file's place after
    discovery is refused (OSError) instead of blocking the read forever."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)  # non-blocking: opening a FIFO without a writer returns at once
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"not a regular file (FIFO, device or socket): {path}")
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Counted:
    """The compressed side of a stream: counts what the decompressor took (for the ratio cap)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.n = 0
        self.mode = "rb"

    def read(self, size: int = -1) -> bytes:
        b = self.raw.read(size)
        self.n += len(b)
        return b

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.raw.close()


class Caps:
    """The decompression caps of one input (:class:`~.sources.Limits`): checked as bytes come out."""

    def __init__(self, counted: Counted, codec: str) -> None:
        lim = limits()
        self.counted = counted
        self.codec = codec
        self.max = lim.max_decompressed
        self.ratio = lim.max_ratio
        self.floor = lim.ratio_floor

    def over(self, out: int) -> str | None:
        """Why reading must stop after ``out`` decompressed bytes (a notice's words), else None."""
        if self.max and out > self.max:
            return (f"{self.codec} data decompresses to more than {size_text(self.max)} "
                    "(--max-decompressed raises the cap)")
        if self.ratio and out > self.floor and out > self.ratio * max(1, self.counted.n):
            return (f"{self.codec} data decompresses more than {self.ratio}:1 past {size_text(self.floor)}, a "
                    "decompression bomb? (--max-ratio raises the cap)")
        return None


#: the magic bytes of the compressed formats :func:`decompress` reads (gzip, bzip2, xz): what
#: a follower or a file split into byte ranges must leave whole
COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")


def decompress(raw: BinaryIO, head: bytes) -> tuple[BinaryIO, str | None, Caps | None]:
    """The decompressed stream of a gzip/bzip2/xz file (by its magic bytes), else ``raw``,
    and the caps its reader checks (:class:`Caps`; None for plain data).

    The codec modules are imported here, when a file needs one (1.6 ms of start-up)."""
    counted: Any = Counted(raw)  # a file object as the codecs read one (read, readable, close)
    stream: Any
    if head.startswith(b"\x1f\x8b"):
        import gzip

        stream, codec = gzip.GzipFile(fileobj=counted), "gzip"
    elif head.startswith(b"BZh"):
        import bz2

        stream, codec = bz2.BZ2File(counted), "bzip2"
    elif head.startswith(b"\xfd7zXZ\x00"):
        import lzma

        stream, codec = lzma.LZMAFile(counted), "xz"
    else:
        return raw, None, None
    return stream, codec, Caps(counted, codec)


def cap_note(why: str, lines: int) -> str:
    """The notice of a cap met after ``lines`` lines."""
    return f"{why}: read stopped after line {lines}; the lines before were analysed"


def _damage_errors() -> tuple[type[BaseException], ...]:
    """Errors of a truncated or corrupt file; lzma's own only once lzma is in use."""
    lz = sys.modules.get("lzma")
    return (OSError, EOFError, ValueError) + ((lz.LZMAError,) if lz is not None else ())


_NOT_CTRL = bytes(b for b in range(256) if not (b < 9 or 13 < b < 32 and b != 27))


def _utf16_le_no_bom(head: bytes) -> bool:
    """UTF-16-LE text without a BOM (Windows tools): ASCII with a NUL after every byte."""
    h = head[: len(head) & ~1]
    return len(h) >= 16 and h[1::2].count(0) > len(h) // 2 * 0.9 and h[0::2].count(0) < len(h) // 20


def looks_binary(head: bytes) -> str | None:
    """Why the first bytes of a file are not a text log ("binary file", "tar archive"), else None."""
    if head.startswith(_BINARY_MAGIC):
        return "binary file"
    if len(head) > 262 and head[257:262] == b"ustar":
        return "tar archive"
    if not head:
        return None
    nul = head.count(b"\x00")
    if nul > len(head) // 10:
        return "binary file"
    # control bytes other than \t\n\v\f\r and ESC (ANSI colours); translate() counts them in C
    ctrl = len(head.translate(None, _NOT_CTRL)) - nul
    if ctrl > len(head) // 10:
        return "binary file"
    return None


def text_kind(head: bytes) -> str | None:
    """Why bytes that start with ``head`` are not a text log, else None: what the readers
    sniff (UTF-16 with or without a byte-order mark is text)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or _utf16_le_no_bom(head):
        return None
    why = looks_binary(head)
    # neither UTF-8 nor mostly ASCII (random bytes, an unknown compression, encrypted data): a
    # Latin-1 log has a few accented letters, random bytes make ~45% replacement characters.
    # (The file readers read such a file and say it is not a log; a request body is refused
    # before an analysis is spent on it.)
    if why is None and head and max(head) >= 0x80:
        text = head.decode("utf-8", "replace")
        if text.count("\ufffd") > len(text) * 0.3:
            return "binary data"
    return why


class _RawAdapter(io.RawIOBase):
    """Any object with ``read`` as a raw stream, so it can sit under a BufferedReader."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        data = self._f.read(len(b))
        n = len(data)
        b[:n] = data
        return n


def guarded(reader, body):  # type: ignore[no-untyped-def]
    """Open ``reader.inp`` and run ``body(raw)``; damage becomes a notice, never an exception.

    Shared by the line reader and the block reader (``reader`` has ``inp``, ``lines`` and
    ``_note``): what was read before a truncated archive or an I/O error is kept.
    """
    try:
        raw = open_binary(reader.inp)
    except OSError as exc:
        reader._note(f"cannot read: {exc.strerror or exc}, skipped")
        return
    try:
        yield from body(raw)
    except _damage_errors() as exc:
        reader._note(f"read stopped after line {reader.lines}: {exc} (file truncated or corrupt); "
                     "the lines before were analysed")
    except Exception as exc:  # noqa: BLE001 - zlib/bz2 errors have no common base
        reader._note(f"read stopped after line {reader.lines}: {type(exc).__name__}: {exc}")
    finally:
        if reader.inp.path != "-":
            raw.close()


def repair_notes(reader, bad_utf8: int, nul: int, cut: int, limit: int, unit: str = "bytes") -> None:  # type: ignore[no-untyped-def]
    """The end-of-file notices of what a reader repaired, worded the same by every reader
    (the first cut line has its own notice, with its number, when it is met)."""
    if bad_utf8:
        reader._note(f"{bad_utf8} line(s) with invalid UTF-8, decoded with replacement characters")
    if nul:
        reader._note(f"{nul} line(s) with NUL bytes, NUL bytes removed")
    if cut > 1:
        reader._note(f"{cut} lines longer than {limit} {unit} were cut")


class LineReader:
    """Iterates ``(line_number, text)`` over one input, repairing what it can.

    The notices it raises (decoding repaired, long line cut, truncated archive) are
    collected in :attr:`notices` once iteration ends.
    """

    def __init__(self, inp: InputFile, max_line: int = MAX_LINE_BYTES) -> None:
        self.inp = inp
        self.max_line = max_line
        self.notices: list[Notice] = []
        self.bytes_read = 0
        self.lines = 0
        self._caps: Caps | None = None
        self._next_check = _CHECK_EVERY

    def _note(self, msg: str, severity: str = "warning") -> None:
        self.notices.append(Notice(self.inp.display, msg, severity))

    def __iter__(self) -> Iterator[tuple[int, str]]:
        yield from guarded(self, self._read)

    def _capped(self) -> bool:
        """Whether a decompression cap stops the read here (checked every ``_CHECK_EVERY`` bytes)."""
        if self._caps is None or self.bytes_read < self._next_check:
            return False
        self._next_check = self.bytes_read + _CHECK_EVERY
        why = self._caps.over(self.bytes_read)
        if why is None:
            return False
        self._note(cap_note(why, self.lines))
        return True

    def _read(self, raw: BinaryIO) -> Iterator[tuple[int, str]]:
        if not hasattr(raw, "peek"):  # pipes in tests, remote objects: buffer them to sniff the head
            raw = io.BufferedReader(_RawAdapter(raw), 1 << 16)
        peek = raw.peek(_SNIFF)[:_SNIFF]
        if len(peek) < _SNIFF and peek:  # peek returns what one read gave; top it up
            peek = raw.peek(_SNIFF)[:_SNIFF]
        stream, codec, self._caps = decompress(raw, peek)
        if codec:
            head = stream.peek(_SNIFF)[:_SNIFF] if hasattr(stream, "peek") else b""
        else:
            head = peek
        if not head:
            self._note("empty file, nothing to analyse")
            return
        if head.startswith((b"\xff\xfe", b"\xfe\xff")):
            self._note("UTF-16 text, decoded", "info")
            yield from self._read_text(io.TextIOWrapper(stream, encoding="utf-16", errors="replace"))
            return
        if _utf16_le_no_bom(head):
            self._note("UTF-16 text without byte-order mark, decoded", "info")
            yield from self._read_text(io.TextIOWrapper(stream, encoding="utf-16-le", errors="replace"))
            return
        why = looks_binary(head)
        if why:
            self._note(f"{why}, not a text log, skipped")
            return
        if b"\n" not in head and b"\r" in head:
            self._note("CR-only line ends, split on CR", "info")
            yield from self._read_text(io.TextIOWrapper(stream, encoding="utf-8", errors="replace",
                                                        newline="\r"))
            return
        yield from self._read_bytes(stream)

    def _read_text(self, text: io.TextIOWrapper) -> Iterator[tuple[int, str]]:
        """Decoded text (UTF-16, CR-only): same line cap as bytes, counted in characters."""
        limit = self.max_line
        readline = text.readline
        cut = nul = 0
        while True:
            line = readline(limit)
            if not line:
                break
            self.lines += 1
            self.bytes_read += len(line)
            if self._capped():
                break
            if len(line) == limit and not line.endswith(("\n", "\r")):
                dropped = self._skip_rest(readline, ("\n", "\r"))
                cut += 1
                if cut == 1:
                    self._note(f"line {self.lines} is longer than {limit} characters: cut at {limit} characters "
                               f"({dropped} characters dropped)")
            if "\x00" in line:
                line = line.replace("\x00", "")
                nul += 1
            for seg in clean(line):
                yield self.lines, seg
        repair_notes(self, 0, nul, cut, limit, "characters")

    def _read_bytes(self, stream: BinaryIO) -> Iterator[tuple[int, str]]:
        limit = self.max_line
        readline = stream.readline
        bad_utf8 = cut = nul = 0
        n = 0
        while True:
            b = readline(limit)
            if not b:
                break
            n += 1
            self.bytes_read += len(b)
            if self._capped():
                break
            if len(b) == limit and not b.endswith(b"\n"):
                dropped = self._skip_rest(readline)
                self.bytes_read += dropped
                cut += 1
                if cut == 1:
                    self._note(f"line {n} is longer than {limit} bytes: cut at {limit} bytes "
                               f"({dropped} bytes dropped)")
            try:
                s = b.decode("utf-8")
            except UnicodeDecodeError:
                s = b.decode("utf-8", "replace")
                bad_utf8 += 1
            if "\x00" in s:
                s = s.replace("\x00", "")
                nul += 1
            self.lines = n
            for seg in clean(s):
                yield n, seg
        repair_notes(self, bad_utf8, nul, cut, limit)

    @staticmethod
    def _skip_rest(readline, ends=(b"\n",)) -> int:  # type: ignore[no-untyped-def]
        """Read and drop the rest of an over-long line in 64 KiB pieces; returns how much."""
        dropped = 0
        while True:
            b = readline(1 << 16)
            dropped += len(b)
            if not b or b.endswith(ends):
                return dropped


def clean(line: str) -> list[str]:
    """Strip line ends and ANSI codes; split ``\\r`` redraws into their segments.

    Every non-empty segment of a redrawn line is kept: an error glued to a progress
    bar must not be lost.  An empty line stays an empty line (it separates WARNs).
    """
    line = line.rstrip("\r\n")
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        return parts or [""]
    return [line]
