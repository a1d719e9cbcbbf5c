"""Where a message may start in a line, and which lines may hold one at all.

Both are declared in the grammar, next to the rule of each message kind
(``//@ anchor:``, ``//@ step:``, ``//@ keywords:`` comments in ``grammar/messages.lark``):
a new kind is its grammar rule, its event and its model handler, nothing here.  This
module reads the declarations once at import (~0.1 ms) and builds:

* the anchors: where a known message starts inside a non-NCCL line (PyTorch, nccl-tests,
  NCCL text pasted without its prefix).  Every anchor starts with a literal character:
  grouped by it (see :func:`first_char_trie`) the alternation gets a first-character set,
  which lets the regex engine skip the positions no anchor can start at (one big flat
  alternation cost ~40 us a line);
* the prefilter of the analyze fast path: a line none of whose words can start a
  meaningful message costs part of one regex scan over its block and nothing else.
  Every anchor, every error-level envelope and every exception line contains a keyword
  (the grammar's, and the envelope's below; tests/test_prefilter.py and
  tests/test_anchors.py check that on all fixtures and the corpus).  Keywords start with
  a capital or punctuation (rare in training output) and are grouped by first character,
  which makes the scan about 1.5x faster than a flat alternation.  Every position holding
  a keyword's first character costs a branch attempt, so no keyword starts with a
  character training output is full of: ".. " (nccl-tests failures, which also say
  "Test ") made every decimal point a candidate, "Interrupt" every capital I.
"""
from __future__ import annotations

import json
import os
import re
import sys

from ..util.classes import NamedTuple
from ..util.rxstore import rx
from . import bytescan

GRAMMAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grammar", "messages.lark")

#: The envelope's keywords (log levels, launcher prefixes, exception and traceback lines,
#: error words), which belong to no grammar rule: a line holding one reaches the parser
#: even when no message of the grammar is in it (it may still be a WARN or an error line).
ENVELOPE_KEYWORDS = (
    "NCCL", "CCOM", "WARN", "ERROR", "FATAL", "CRITICAL", "[E", "] INFO", "Exception", "Error", "Traceback",
    'File "', "KeyboardInterrupt", "Timeout", "Timed", "Failed",
    "Last error:",  # PyTorch's NCCL error text: NCCL's last WARN follows on the next line
    ": error: ",  # Slurm's error lines (srun: error:, slurmstepd: error:)
)
#: the same as regexes: glog's ``E1129 `` and PyTorch's ``[rank3]:[E...`` (``[0-9]``, not ``\d``:
#: ``re`` reads that as any Unicode digit, RE2 (:mod:`.bytescan`) as an ASCII one)
KEYWORD_RX = (r"E[0-9]{4} ", r"\[rank[0-9]+\]:\[E")
#: texts KEYWORD_RX finds, with the keywords the check RE2 passes before it scans (:mod:`.bytescan`)
KEYWORD_RX_SAMPLES = ("E1129 ", "[rank3]:[E")


class Declaration(NamedTuple):
    """One ``//@`` line of the grammar: what it declares, for which rule, at which line."""

    what: str  # anchor | step | keywords
    value: str  # the regex (anchor, step), or the JSON strings (keywords)
    rule: str  # the grammar rule below the comment
    line: int
    guard: str | None = None  # anchor when "LIT": searched only in lines holding LIT


_DECL = rx(r'//@ (anchor|step|keywords)(?: when "([^"]+)")?: (.*\S)\s*$')
_RULE = rx(r"\??([a-z_]\w*)\s*:")


def declarations(text: str | None = None) -> list[Declaration]:
    """The ``//@`` declarations of the grammar, each with the rule it is written above."""
    if text is None:
        with open(GRAMMAR, encoding="utf-8") as f:
            text = f.read()
    out: list[Declaration] = []
    pos = line = counted = 0
    while (i := text.find("//@ ", pos)) >= 0:  # str.find: ~0.1 ms over the grammar, at every start
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        pos = end + 1
        m = _DECL.match(text, i, end)
        if m is None or (i and text[i - 1] != "\n"):
            continue
        line += text.count("\n", counted, i)
        counted = i
        j = pos
        while text.startswith("//", j):  # the rule is the first line after the comments
            j = text.find("\n", j) + 1 or len(text)
        r = _RULE.match(text, j)
        out.append(Declaration(m.group(1), m.group(3), r.group(1) if r else "", line + 1, m.group(2)))
    return out


def first_char_trie(patterns: tuple[str, ...]) -> str:
    """One alternation of regexes grouped by their literal first character (``\\x`` counts as one)."""
    groups: dict[str, list[str]] = {}
    for p in patterns:
        n = 2 if p.startswith("\\") else 1
        groups.setdefault(p[:n], []).append(p[n:])
    return "|".join(head + (rest[0] if len(rest) == 1 else "(?:" + "|".join(rest) + ")")
                    for head, rest in groups.items())


_DECLS = declarations()
#: where a message may start (the grammar's ``anchor`` declarations, then its ``step`` ones)
ANCHOR_PATTERNS = tuple(d.value for d in _DECLS if d.what == "anchor" and d.guard is None)
#: where a training-step timing message starts (also anchors): a word boundary before
#: "iter" is checked after the literal, so that the literal stays the first character
STEP_PATTERNS = tuple(d.value for d in _DECLS if d.what == "step")
#: anchors with no literal first character: (literal the line must hold, regex)
GUARDED_ANCHORS = tuple((d.guard, rx(d.value)) for d in _DECLS if d.what == "anchor" and d.guard)
#: the prefilter keywords: the grammar's, then the envelope's
KEYWORDS = tuple(k for d in _DECLS if d.what == "keywords" for k in json.loads(f"[{d.value}]")) + ENVELOPE_KEYWORDS

_ANCHORS = rx(first_char_trie(ANCHOR_PATTERNS + STEP_PATTERNS))
PREFILTER = rx(first_char_trie(tuple(re.escape(k) for k in KEYWORDS) + KEYWORD_RX))
#: keywords whose first character is frequent in any text (a lower-case letter, a digit, a
#: colon or a space): in an alternation the regex engine tries the branches at every such
#: character, and four of them ("terminate called", ": error: ", ...) made the prefilter twice
#: as slow on training output. A block without them is scanned with ``PREFILTER_RARE``; in a
#: block with one, long ranges are too, and these literals are found with ``str.find`` at C
#: speed (:func:`block_search`): the same first matches.
COMMON_FIRST_KEYWORDS = tuple(k for k in KEYWORDS if k[:1].islower() or k[:1].isdecimal() or k[:1] in ": ")
PREFILTER_RARE = rx(first_char_trie(
    tuple(re.escape(k) for k in KEYWORDS if k not in COMMON_FIRST_KEYWORDS) + KEYWORD_RX))
#: PREFILTER's long scans on a block's bytes, by RE2 where it is installed: its DFA reads each byte
#: once whatever the keywords' first characters, so it needs none of the above
PREFILTER_BYTES = bytescan.ByteSearch(PREFILTER, KEYWORDS + KEYWORD_RX_SAMPLES)

#: ``search(text, pos=0, endpos=len(text))``: the leftmost prefilter keyword in text[pos:endpos]
BlockSearch = bytescan.Search
#: ranges shorter than this (characters) are scanned by PREFILTER itself: its slower scan of a short
#: range costs less than a Python call of :func:`block_search`'s function and its literal finds
SHORT_RANGE = 4096


def block_search(text: str, raw: bytes | None = None) -> tuple[BlockSearch, BlockSearch]:
    """The prefilter's ``search`` for the block ``text``, for any range and for a range shorter
    than :data:`SHORT_RANGE`: where PREFILTER's leftmost match in that range starts.

    ``raw``: the bytes ``text`` was decoded from, where it is them as they are: a long
    block is then scanned by RE2 where it is installed (:meth:`.bytescan.ByteSearch.for_block`,
    ~3x faster on training output).  RE2's DFA costs the same whatever the keywords' first
    characters, so it needs no literal check of the block (two ``str.find`` over it, ~33 us of
    64 KiB, 6.5% of a noise log's analysis with RE2).

    Most blocks hold none of the common-first keywords ("terminate called", ": error: "):
    both are PREFILTER_RARE's own method.  A block holding one (every per-rank file of a job
    the watchdog killed holds "terminate called" in its last block) was scanned with
    PREFILTER, whose alternation tries a branch at every lower-case letter (~2x slower).  For
    long ranges the literals are looked for with ``str.find`` instead, and only in the ranges
    the regex scans (the lines between NCCL INFO lines), up to its next match: each character
    once a literal.  A Python function call costs more than PREFILTER's slower scan of a short
    range (an NCCL-dense block asks ~50 times, for a line or two each): those keep PREFILTER.
    Only a match's ``start()`` is the same as PREFILTER's (the callers use no other part:
    :class:`.bytescan.At` stands for a match found otherwise).  The
    function is meant for ``text``, with positions that do not move back (where they do, it
    looks again).
    """
    if raw is not None and (fast := PREFILTER_BYTES.for_block(text, raw)) is not None:
        return fast
    rare = PREFILTER_RARE.search
    lits = COMMON_FIRST_KEYWORDS
    if not any(lit in text for lit in lits):
        return rare, rare
    # per literal: [since, upto, at]: at is where it first occurs wholly inside text[since:upto], -1: nowhere
    seen = [[0, 0, -1] for _ in lits]

    def search(s: str, pos: int = 0, endpos: int = sys.maxsize) -> bytescan.Start | None:
        m = rare(s, pos, endpos)
        end = min(endpos, len(s))
        limit = m.start() if m is not None else end
        best = -1
        for lit, st in zip(lits, seen):
            since, upto, at = st
            size = len(lit)
            bound = min(limit + size - 1, end)  # a literal starting before ``limit``, and inside ``endpos``
            if pos < since or 0 <= at < pos:  # a position moved back, or past the one found: look from ``pos``
                at = s.find(lit, pos, bound)
                st[:] = pos, bound, at
            elif at < 0 and upto < bound:  # nothing wholly before ``upto``: look on from there
                start = upto - size + 1
                if start < pos:  # positions before ``pos`` are not looked at: the range starts there
                    start = since = pos
                at = s.find(lit, start, bound)
                st[:] = since, bound, at
            if 0 <= at < limit and at + size <= end:
                limit = best = at
        return m if best < 0 else bytescan.At(best)

    return search, PREFILTER.search


STEP_START = rx("|".join(STEP_PATTERNS))


#: literals of the anchors that read a digit's value (``got 0``, ``[Errno 98]``, ``GPU0``, ``IPv4``):
#: a text holding one may start a message where a text of the same shape with other digits does
#: not (tests/test_fastpath.py checks that every anchor with a digit in it holds one of them)
DIGIT_ANCHOR_WORDS = ("IPv", "got ", "Errno", "GPU")
# digits masked in place (as the grammar's position-exact shape keys do): where anchors start
# is the same for every text of such a shape, since no other anchor tells one digit from another
_MASK_DIGITS = bytes.maketrans(b"0123456789", b"\0\0\0\0\0\0\0\0\0\0")
_STARTS: dict[bytes, tuple[int, ...]] = {}
#: shapes whose anchor positions are remembered, and the longest text remembered (a PyTorch error
#: line costs one scan of the alternation per character, ~26 us for 300 characters, and each rank
#: prints the same few; at most ~10 MB of keys for a hostile log of distinct long lines)
MAX_REMEMBERED = 10_000
MAX_REMEMBERED_CHARS = 1024


def anchor_starts(body: str) -> list[int]:
    """Positions where a known message may start in ``body``, in order (remembered by the
    body's position-exact shape, where no anchor can tell its digits apart)."""
    if len(body) > MAX_REMEMBERED_CHARS or not body.isascii() or any(w in body for w in DIGIT_ANCHOR_WORDS):
        return _anchor_starts(body)
    key = body.encode().translate(_MASK_DIGITS)
    hit = _STARTS.get(key)
    if hit is None:
        hit = tuple(_anchor_starts(body))
        if len(_STARTS) < MAX_REMEMBERED:
            _STARTS[key] = hit
    return list(hit)


def _anchor_starts(body: str) -> list[int]:
    starts = [m.start() for m in _ANCHORS.finditer(body)]
    for lit, guarded in GUARDED_ANCHORS:
        if lit in body:
            starts.extend(m.start() for m in guarded.finditer(body))
            starts.sort()
    return starts
