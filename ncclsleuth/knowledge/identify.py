"""Which known message a problem line is: (source, id, file, message) for the knowledge base.

NCCL WARN lines are matched against NCCL's own catalog (every format of 62 releases, by
its ``NCCL-W-...`` id), with the printing file taken from the ``FILE:LINE`` of the WARN
prefix: the same format printed from two files can mean two things.  Other lines are
matched against the PyTorch catalog and the formats of the knowledge base's other
sources (gloo, aws-ofi-nccl, RCCL, nccl-tests, the kernel and driver): by a literal
chunk of each format found in the line, then the whole format as a regex from there.

Only problem lines come here (a few per rank, at most the model's cap per kind), and the
other sources' results are cached per line text.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..util.classes import dataclass
from ..util.rxstore import rx

# FILE:LINE (2.3..2.30.4) or FILE:LINE (FUNC) (2.30.7) before "NCCL WARN"; FILE relative to
# src/ (a full build path in RCCL's); the prefix may be glued to a launcher's tag
_WARN = rx(r"(?<![\w./+-])(?P<file>[\w./+-]+\.(?:cc|cu|cpp|cxx|c|h|hpp)):\d+(?: \([^)\s]*\))? NCCL WARN ")
_PLACEHOLDER = rx(r"\$\{\w+\}|\{[^{}]*\}|%(?:%|[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?"
                          r"(?:hh|h|ll|l|z|t|j|L)?[diuxXpfgeEcsm])")
TORCH_FORMATS = Path(__file__).resolve().parent.parent / "parse" / "data" / "torch_formats.tsv"
#: a format whose longest literal run is shorter than this says nothing on its own
MIN_LITERAL = 10
SHAPES = 20_000
_HAS_DIGIT = rx(r"\d")
_ZERO_DIGITS = str.maketrans("123456789", "000000000")
#: a format in a :class:`FormatIndex`: (source, id, literal parts, literal characters, longest word)
_Entry = tuple[str, str, tuple[str, ...], int, str]


@dataclass(frozen=True)
class Known:
    """A line identified: which source printed it, the message id, the printing file."""

    source: str
    id: str
    file: str | None
    message: str


def nccl_warn(text: str) -> tuple[str | None, str] | None:
    """(file relative to src/, message) of a line holding ``NCCL WARN``, else None."""
    at = text.rfind("NCCL WARN ")
    if at < 0:
        return None
    m = _WARN.search(text, max(0, at - 300), at + 10)
    return (m.group("file") if m else None), text[at + 10:].strip()


class FormatIndex:
    """Formats of one or more sources, found in free text (lines carry prefixes: a format
    may start anywhere).  The literal parts of a format are looked for in order, each within
    ``GAP`` characters of the previous one found (``str.find`` only: linear in the line;
    whitespace runs compared as one space); a format matches when its longest word is in the
    line and at least ``SHARE`` of its literal text is found: a release's other log prefix
    (``[Rank 3]`` before 2.2, ``[PG ID 0 ... Rank 3]`` after) does not hide the message.
    The format with the most literal text found wins."""

    GAP = 400
    SHARE = 0.75

    def __init__(self, items: list[tuple[str, str, tuple[str, ...]]] | None = None,
                 prepared: list[tuple[_Entry, bool]] | None = None) -> None:
        """``items``: (source, id, the format's :func:`literal_parts`); or ``prepared``, what
        :meth:`prepare` made of them (kept in the knowledge table: ~13 ms of a start that
        explains a line)."""
        ready = prepared if prepared is not None else self.prepare(items or [])
        entries = [e for e, _ in ready]
        self._entries = entries
        # formats without a digit in their literal text find the same in a line whatever its
        # digits are: their best is remembered per line with every digit made 0 (ranks,
        # timestamps and sequence numbers make each problem line of a big job unique); the
        # ~10% with digits ("Xid 43", "RoCE v2") are looked for in each line itself
        self._plain = [(i, e) for i, (e, digit) in enumerate(ready) if not digit]
        self._digits = [(i, e) for i, (e, digit) in enumerate(ready) if digit]
        self._memo: dict[str, tuple[tuple[int, int, str, str] | None, list[tuple[int, _Entry]]]] = {}

    @staticmethod
    def prepare(items: list[tuple[str, str, tuple[str, ...]]]) -> list[tuple[_Entry, bool]]:
        """The entries in the order they are tried (most literal text first), each with its
        longest word and whether its literal text holds a digit.  Plain data (marshal keeps it)."""
        entries: list[_Entry] = []
        for source, key, lits in items:
            if lits:
                word = max((w for lit in lits for w in lit.split(" ")), key=len)
                entries.append((source, key, tuple(lits), sum(map(len, lits)), word))
        entries.sort(key=lambda e: -e[3])
        return [(e, any(map(_HAS_DIGIT.search, e[2]))) for e in entries]

    def find(self, text: str) -> tuple[str, str] | None:
        """(source, id) of the format with the most literal text found in ``text`` (the first
        in order of literal text, of those that find the same)."""
        flat = " ".join(text.split())
        masked = flat.translate(_ZERO_DIGITS)
        hit = self._memo.get(masked)
        if hit is None:
            # and of the formats with digits, those whose longest word (the first test) can be
            # in the line: a word without digits is in the line as it is in the masked line
            hit = (self._best(masked, self._plain),
                   [e for e in self._digits if e[1][4] in masked or _HAS_DIGIT.search(e[1][4])])
            if len(self._memo) < SHAPES:
                self._memo[masked] = hit
        best = self._best(flat, hit[1], hit[0])
        return (best[2], best[3]) if best else None

    def _best(self, flat: str, entries: list[tuple[int, _Entry]],
              best: tuple[int, int, str, str] | None = None) -> tuple[int, int, str, str] | None:
        """(literal characters found, order, source, id) of the best of ``best`` and ``entries``
        in ``flat``: the most found, the first in order of those that find as much."""
        for order, (source, key, lits, total, word) in entries:
            if best is not None and (total < best[0] or (total == best[0] and order > best[1])):
                break  # sorted by literal text: nothing later can find more
            if word not in flat:
                continue
            found = self._found(flat, lits)
            if found >= self.SHARE * total and (best is None or found > best[0]
                                                or (found == best[0] and order < best[1])):
                best = (found, order, source, key)
        return best

    def _found(self, flat: str, lits: tuple[str, ...]) -> int:
        pos, found, anchored = 0, 0, False
        for lit in lits:
            at = flat.find(lit, pos, pos + self.GAP + len(lit)) if anchored else flat.find(lit, pos)
            if at < 0:
                continue
            found += len(lit)
            pos, anchored = at + len(lit), True
        return found


#: a run of three or more digits (what a cache of meanings may mask: see :func:`literal_numbers`);
#: the group: ``split`` hands them out between the rest.  ASCII digits, spelled out (``\d{3,}``
#: costs twice as much a line)
NUMBER_RUN = rx(r"([0-9][0-9][0-9]+)")


def literal_numbers(fmt: str) -> set[str]:
    """The runs of three or more digits in the literal text of a format (``"NVRM: Xid (PCI:%s):
    119, %s"``: ``119``): a line that holds one may be told apart by it from a line that holds
    another number there."""
    return {run for part in _PLACEHOLDER.split(fmt) for run in NUMBER_RUN.findall(part)}


def literal_parts(fmt: str) -> tuple[str, ...]:
    """The literal parts of the most literal line of a format (whitespace collapsed), or ()
    when it holds too little literal text to identify a line on its own."""
    best: tuple[str, ...] = ()
    fmt = fmt.replace('\\"', '"').replace("\\t", " ")  # C escapes as the catalogs keep them
    for seg in fmt.split("\\n"):  # one line of a multi-line message
        lits = tuple(lit for lit in (" ".join(p.split()) for p in _PLACEHOLDER.split(seg)) if lit)
        if sum(map(len, lits)) >= max(MIN_LITERAL, sum(map(len, best)) + 1):
            best = lits
    return best


class Identifier:
    """Lines -> :class:`Known`, for one knowledge base (its non-NCCL formats) and the catalogs."""

    def __init__(self, other_formats: list[tuple[str, str, str]]) -> None:
        """``other_formats``: (source, id, format) of the messages found in free text."""
        self._others = FormatIndex([(src, key, literal_parts(fmt)) for src, key, fmt in other_formats])
        #: line -> what it is (None: nothing known), and an NCCL WARN's message -> what it is:
        #: keyed by the text itself, digits and all (an Xid 43 is not an Xid 45, RoCE v1 not v2).
        #: One :class:`Known` (and its text) for every line that says the same: the same line of
        #: many ranks ("terminate called after throwing an instance of ...") was a Known and the
        #: text read again each (~230 bytes a rank of the rule step's peak on 4,096 per-rank files)
        self._lines: dict[str, Known | None] = {}
        self._warns: dict[str, Known | None] = {}

    @classmethod
    def from_prepared(cls, prepared: list[tuple[_Entry, bool]]) -> Identifier:
        """From :meth:`FormatIndex.prepare`'s entries (the knowledge table)."""
        idf = cls([])
        idf._others = FormatIndex(prepared=prepared)
        return idf

    def identify(self, text: str) -> Known | None:
        warn = nccl_warn(text)
        if warn is not None:
            return self.identify_warn(warn[1], warn[0])
        got = self._lines.get(text, _MISS)
        if got is _MISS:
            hit = self._others.find(text)
            got = Known(hit[0], hit[1], None, text.strip()) if hit else None
            if len(self._lines) < SHAPES:
                self._lines[text] = got
        return got  # a Known or None once found

    def identify_warn(self, msg: str, file: str | None = None) -> Known | None:
        """The message of an NCCL WARN (the text after ``NCCL WARN``, or NCCL's last WARN as a
        layer above quotes it, without a file)."""
        got = self._warns.get(msg, _MISS)
        if got is _MISS:
            got = self._identify_warn(msg, file)
            if len(self._warns) < SHAPES:
                self._warns[msg] = got
        if got is None or got.file == file:
            return got
        return replace(got, file=file)  # the message says which it is; kept: the first line's file

    def _identify_warn(self, msg: str, file: str | None) -> Known | None:
        from ..parse import catalog  # only for logs with NCCL WARN lines: ~2,900 formats to index

        fmt = catalog.lookup(msg, "WARN")
        if fmt is not None:
            return Known("nccl", fmt.id, file, msg)
        hit = self._others.find(msg)  # a plugin's WARN (aws-ofi-nccl, RCCL) through NCCL's logger
        return Known(hit[0], hit[1], file, msg) if hit else None


#: not yet looked up (None is a result: nothing known)
_MISS: Any = object()


@lru_cache(maxsize=1)
def torch_formats() -> tuple[tuple[str, str], ...]:
    """(id, format) of the PyTorch catalog (``parse/data/torch_formats.tsv``)."""
    import csv

    with open(TORCH_FORMATS, newline="") as fh:
        rd = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        next(rd)
        return tuple((row[0], row[4]) for row in rd)
