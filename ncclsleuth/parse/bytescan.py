"""The prefilter's long scans run by RE2 on a block's bytes, where google-re2 is installed.

Why: on a log that is mostly training output, the parse is mostly one regex scan, the
prefilter looking for its ~110 keywords (:mod:`.anchors`) in the lines between NCCL INFO
lines.  CPython's ``re`` tries its alternation at every position holding a keyword's first
character: ~200-350 us per 64 KiB block of training output, a third of a noise log's
analysis.  RE2 compiles the same alternation into a DFA that reads each byte once: ~60 us
for the scan of such a block, on the bytes the block reader decoded the block from (RE2 on
a ``str`` encodes it again at every call, slower than ``re``).

What is the same: only the start of the leftmost match is used (``FileParser.parse_block``
asks no more), and the leftmost start of an alternation of keywords is the same in both
engines.  The keywords are literals and ``[0-9]`` classes (no ``\\d``, which ``re`` reads as
any Unicode digit), so the same characters match; a block is handed over only where its text
is its bytes decoded as they are (``BlockReader.raw``).  Positions are characters for the
callers and bytes for RE2: in an ASCII block they are the same; in any other (a progress
bar's block characters), they are converted by encoding or decoding the text between a cursor
that moves with the scan and the next place, so each byte is converted about once a block.

Loaded once a process has read 3 MiB in long blocks (:data:`WARMUP_BLOCKS`): smaller logs
would pay its load and memory for nothing.  Optional: ``pip install 'ncclsleuth[fast]'``
(wheels for CPython 3.10-3.14 on Linux with glibc 2.28+, macOS 13+ and Windows).  Without
it, or where its module does not load or does not find what ``re`` finds on a probe text
(:func:`_probe`), the scan is ``re``'s as before: the engine changes how fast the prefilter
runs, never what it finds (``tests/test_bytescan.py``).  ``NCCLSLEUTH_NO_RE2=1`` turns it off.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import Any, Protocol

from ..util.classes import NamedTuple

#: the engine on (tests switch it off to compare; ``NCCLSLEUTH_NO_RE2=1`` too)
ENABLED = os.environ.get("NCCLSLEUTH_NO_RE2", "") in ("", "0")
#: blocks shorter than this (bytes) keep ``re``: a 200-line paste is one short block
MIN_BLOCK = 32 << 10
#: long blocks a process scans with ``re`` before it loads RE2 (3 MiB of 64 KiB blocks): loading
#: costs ~7.5 ms (import 2, compile 2.4, the probe 3) and 4 MB of RSS, and RE2 saves ~115 us a
#: block of training output, so a log of a few MB gains nothing from it: a 1.26 MB rank log took
#: 0.09 s either way and 28.4 against 24.1 MB.  Per process, not per file: a folder of small
#: per-rank files loads it once its first 3 MiB are read.
WARMUP_BLOCKS = 48

class Start(Protocol):
    """What the prefilter's callers read of a match: where it starts (an ``re`` match, :class:`At`)."""

    def start(self) -> int: ...


#: ``search(text, pos=0, endpos=len(text))``: where the leftmost match starts, as ``re`` says it
Search = Callable[..., "Start | None"]


class At(NamedTuple):
    """A match found without ``re`` (RE2 on the bytes, ``str.find`` of a literal): its start in
    characters, as a match object of ``re`` gives it."""

    at: int

    def start(self) -> int:
        return self.at


class _Engine(NamedTuple):
    match: Callable[[Any, bytes, int, int], list[tuple[int, int]]]  # RE2.Match(anchor, text, pos, endpos)
    unanchored: Any


def _load(pattern: re.Pattern[str], samples: tuple[str, ...]) -> _Engine | None:
    """RE2 compiled for ``pattern``, checked by :func:`_probe`; None where it cannot be."""
    eng = _compile(pattern)
    return eng if eng is not None and _probe(pattern, samples, eng) else None


def _compile(pattern: re.Pattern[str]) -> _Engine | None:
    """RE2 compiled for ``pattern`` (unchecked); None where RE2 is missing or refuses it."""
    try:
        from re2 import _re2  # type: ignore[import-untyped,import-not-found,unused-ignore]

        options = _re2.RE2.Options()
        # RE2 prints to stderr when its DFA outgrows ``max_mem`` (8 MB) and goes on with a slower
        # engine; this alternation's DFA needs under 1 MB even on text made of keyword fragments
        # (849 KB of them, measured), but a log analysis never writes RE2's notes on the terminal
        options.log_errors = False
        options.never_capture = True  # only where a match starts is asked
        regex = _re2.RE2(pattern.pattern.encode("utf-8"), options)
        if not regex.ok():
            return None
        return _Engine(regex.Match, _re2.RE2.Anchor.UNANCHORED)
    except Exception:  # not installed, another layout of its internals, a pattern it refuses
        return None


def _probe(pattern: re.Pattern[str], samples: tuple[str, ...], eng: _Engine) -> bool:
    """Whether RE2 finds what ``re`` finds in a text of the samples, each between multi-byte
    characters and alone on an ASCII line, from every line start and to every line end."""
    lines = [f"\u2588\u00e9 x{s} \u258c" for s in samples] + [f"x{s} y" for s in samples]
    text = "\n".join(lines + ["no keyword \u2588 here"])
    found = pattern.search
    for block in (text, text.encode("ascii", "replace").decode()):
        search = _searcher(eng, block, block.encode("utf-8"))
        starts = [0] + [i + 1 for i, ch in enumerate(block) if ch == "\n"]
        for pos, end in zip(starts, starts[1:] + [len(block)]):
            for a, b in ((found(block, pos), search(block, pos)), (found(block, pos, end), search(block, pos, end))):
                if (None if a is None else a.start()) != (None if b is None else b.start()):
                    return False
    return True


class ByteSearch:
    """A pattern's long scans by RE2, loaded once a process has scanned :data:`WARMUP_BLOCKS`
    long blocks (:data:`MIN_BLOCK`) with ``re``."""

    def __init__(self, pattern: re.Pattern[str], samples: tuple[str, ...]) -> None:
        #: samples: texts the pattern finds (its keywords), for the check made when RE2 loads
        self.pattern, self.samples = pattern, samples
        self._engine: _Engine | None = None
        self._loaded = False
        #: long blocks scanned with re so far (:data:`WARMUP_BLOCKS`)
        self._waited = 0

    def _engine_now(self) -> _Engine | None:
        """RE2 for the pattern, loaded (and checked) at the first call."""
        if not self._loaded:
            self._engine, self._loaded = _load(self.pattern, self.samples), True
        return self._engine

    def status(self) -> str:
        """Which engine scans long blocks here, and why (``ncclsleuth --version`` says it)."""
        if not ENABLED:
            return "re (NCCLSLEUTH_NO_RE2 is set)"
        try:
            from importlib.metadata import version

            ver = "google-re2 " + version("google-re2")
        except Exception:  # not installed (or no metadata)
            return "re (google-re2 is not installed: pip install 'ncclsleuth[fast]')"
        return f"RE2 ({ver})" if self._engine_now() is not None else f"re ({ver} did not load or failed its check)"

    def preload(self) -> None:
        """Load RE2 now, without the warm-up: in a process about to fork workers for input of
        several MiB each (they inherit it instead of each reading 3 MiB with ``re`` first and
        loading it again)."""
        if ENABLED:
            self._engine_now()

    def for_block(self, text: str, raw: bytes) -> tuple[Search, Search] | None:
        """The leftmost-match searches for the block ``text`` (``raw`` encoded as UTF-8), for any
        range and for a short one; None where ``re`` must scan (no RE2, off, a short block, the
        warm-up).  Any range of an ASCII block is RE2's: its call on a short range costs what
        ``re``'s does (0.81 against 0.84 us on two lines of training output).  A short range of a
        block with multi-byte characters costs RE2's search its positions' conversion (1.29 us a
        call against 0.82 for the pattern's own ``search``): those keep ``re``."""
        if not ENABLED or len(raw) < MIN_BLOCK:
            return None
        if not self._loaded:
            self._waited += 1
            if self._waited <= WARMUP_BLOCKS:
                return None
        eng = self._engine_now()
        if eng is None:
            return None
        search = _searcher(eng, text, raw)
        return search, search if len(raw) == len(text) else self.pattern.search


def _searcher(eng: _Engine, text: str, raw: bytes) -> Search:
    match, unanchored = eng.match, eng.unanchored
    size = len(text)
    if len(raw) == size:  # ASCII: a character is a byte

        def search_ascii(s: str, pos: int = 0, endpos: int = sys.maxsize) -> At | None:
            if endpos > size:
                endpos = size
            if pos > endpos:
                return None
            at = match(unanchored, raw, pos, endpos)[0][0]
            return None if at < 0 else At(at)

        return search_ascii
    # Characters and bytes are converted by encoding or decoding the text between two places
    # (~0.3-0.5 ns a byte, at C speed on ASCII runs; RE2's own converters take ~3 ns), from a
    # cursor that moves with the scan: (character, its byte) where the last search started or
    # matched, and the last end asked for with its byte
    cur = [0, 0]
    end = [size, len(raw)]

    def search(s: str, pos: int = 0, endpos: int = sys.maxsize) -> At | None:
        if endpos > size:
            endpos = size
        if pos > endpos:
            return None
        c, b = cur
        if pos < c:  # a position moved back: count from the block's start
            c = b = 0
        b += len(text[c:pos].encode())
        if end[0] != endpos:
            end[0], end[1] = endpos, b + len(text[pos:endpos].encode())
        at = match(unanchored, raw, b, end[1])[0][0]
        if at < 0:
            cur[0], cur[1] = pos, b
            return None
        c = pos + len(raw[b:at].decode())
        cur[0], cur[1] = c, at
        return At(c)

    return search
