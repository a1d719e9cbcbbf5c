"""The NCCL message catalog: which known format string a line was printed from.

``data/nccl_formats.tsv`` (built by ``tools/build_catalog.py`` from the reference
catalog of 62 NCCL releases) lists every format string NCCL can print.  A line that
the grammar does not give a specific meaning still gets the id of the format it
matches, so "unknown" really means "not an NCCL message we know of".

Matching is by a bucket on the format's first literal word, then a full regex match;
results are cached per message shape by the caller.
"""
from __future__ import annotations

import csv
import os
import re
from functools import lru_cache
from pathlib import Path

from ..util.classes import dataclass

_DATA = Path(__file__).parent / "data" / "nccl_formats.tsv"
_CONV = re.compile(r"%(?:%|[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|t|j|L)?([diuxXpfgeEcsm]))")
_TEMPLATE = re.compile(r"\{[^{}]*\}")
MAX_LEN = 2000


@dataclass(frozen=True)
class Format:
    id: str
    level: str
    subsys: str
    format: str
    first_tag: str
    last_tag: str
    #: call sites: ``file:line@first..last``, space-separated (paths relative to the repository)
    sites: str = ""

    @property
    def files(self) -> tuple[str, ...]:
        """The source files that print this format (``src/misc/socket.cc``, ...)."""
        return tuple(s.split(":", 1)[0] for s in self.sites.split())


def by_id() -> dict[str, Format]:
    """Every format of the catalog (those too short to match a line on their own included)."""
    return {fmt.id: fmt for fmt in _rows()}


def _to_regex(fmt: str) -> str | None:
    fmt = fmt.replace("\\n", " ").replace("\\t", " ").replace('\\"', '"').replace("\\\\", "\\").strip()
    fmt = _TEMPLATE.sub("%s", fmt)
    out, pos, literal = [], 0, 0
    for m in _CONV.finditer(fmt):
        lit = fmt[pos:m.start()]
        literal += len(lit.strip())
        sq = _squash(lit)
        conv = m.group(1)
        if conv in "sm" and m.group(0) != "%%" and sq.endswith(" "):
            # a string printed empty ("connecting to address  with family": an all-zero
            # address) leaves one space once whitespace is collapsed: the value owns its space
            out.append(re.escape(sq[:-1]) + "(?: .*?)?")
            pos = m.end()
            continue
        out.append(re.escape(sq))
        if m.group(0) == "%%":
            out.append("%")
        elif conv in "diu":
            out.append(r" *-?\d+")
        elif conv in "xXp":
            out.append(r"\S*")
        elif conv in "fgeE":
            out.append(r" *[-+\d.einfa]+")
        elif conv == "c":
            out.append(".")
        else:
            out.append(".*?")
        pos = m.end()
    tail = fmt[pos:]
    literal += len(tail.strip())
    out.append(re.escape(_squash(tail)))
    if literal < 4:  # "%s", "%s:%d -> %d" and friends say nothing on their own
        return None
    # messages are matched with their whitespace collapsed (see lookup): no runs of spaces to
    # backtrack over, which kept 29 formats cubic on whitespace-heavy lines
    return "".join(out).strip()


def _squash(lit: str) -> str:
    """A literal with every whitespace run turned into one space (edges kept)."""
    if not lit:
        return ""
    if not lit.strip():
        return " "
    return (" " if lit[0].isspace() else "") + " ".join(lit.split()) + (" " if lit[-1].isspace() else "")


_Entry = list  # [pattern source, compiled pattern or None, Format]: compiled on first use


@lru_cache(maxsize=1)
def _rows() -> tuple[Format, ...]:
    csv.field_size_limit(1 << 24)
    with open(_DATA, newline="") as fh:
        rd = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        next(rd)
        return tuple(Format(*row) for row in rd)


@lru_cache(maxsize=1)
def _index() -> tuple[dict[str, list[_Entry]], list[_Entry]]:
    """Formats bucketed by their first literal word (``loose``: formats starting with a value).

    Patterns are compiled when a message first reaches their bucket: compiling all ~2,900
    up front cost ~0.2 s of every ``ncclsleuth parse`` run.  The buckets of regex sources
    are kept on disk while the catalog file does not change (building them costs ~100 ms,
    which every analysis of a log with one WARN line paid).
    """
    from ..util.cache import derived

    table = derived("catalog", [str(_DATA), os.path.abspath(__file__)], _table)  # this file: _to_regex
    fmts = {f.id: f for f in _rows()}
    buckets = {first: [[rx, None, fmts[key]] for key, rx in rows] for first, rows in table[0].items()}
    loose = [[rx, None, fmts[key]] for key, rx in table[1]]
    return buckets, loose


def _table() -> tuple[dict[str, list[tuple[str, str]]], list[tuple[str, str]]]:
    """(first word -> [(id, regex source)], [(id, regex source)] of formats starting with a value)."""
    buckets: dict[str, list[tuple[str, str]]] = {}
    loose: list[tuple[str, str]] = []
    for fmt in _rows():
        rx = _to_regex(fmt.format)
        if rx is None:
            continue
        first = fmt.format.strip().split(" ", 1)[0]
        if "%" in first or "{" in first:
            loose.append((fmt.id, rx))
        else:
            buckets.setdefault(first, []).append((fmt.id, rx))
    return buckets, loose


def _pattern(entry: _Entry) -> re.Pattern[str] | None:
    if entry[1] is None:
        try:
            entry[1] = re.compile(entry[0])
        except re.error:
            entry[1] = False
    return entry[1] or None


def prepare() -> None:
    """Make the catalog's buckets of regex sources now, and keep them (``ncclsleuth cache warm``:
    a log's first WARN line would make them, ~40 ms)."""
    _index()


def lookup(message: str, level: str | None = None) -> Format | None:
    """The catalog format a message was printed from, preferring the same level."""
    msg = " ".join(message.split())
    if not msg or len(msg) > MAX_LEN:
        return None
    buckets, loose = _index()
    first = msg.split(" ", 1)[0]
    best: Format | None = None
    for entry in (*buckets.get(first, ()), *loose):
        pat = _pattern(entry)
        if pat is not None and pat.fullmatch(msg):
            fmt = entry[2]
            if level is None or fmt.level == level:
                return fmt
            best = best or fmt
    return best


def subsystem_guess(message: str) -> str | None:
    """A subsystem name from the message's first word (``NET/IB`` -> ``NET``)."""
    head = message.split(" ", 1)[0].split("/", 1)[0].rstrip(":")
    return head if head.isupper() and head.isalpha() and len(head) <= 10 else None
