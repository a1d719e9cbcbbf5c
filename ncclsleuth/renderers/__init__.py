"""Renderers: pure functions from a :class:`~ncclsleuth.report.Report` to text.

One module per format; each exposes ``render(report, color=False) -> str``.  The
registry below feeds click's ``--format`` choices.  Modules are imported only when
used, so start-up stays light.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..util.classes import dataclass
from ..util.rxstore import rx

RENDERERS = {
    "terminal": "ncclsleuth.renderers.terminal",
    "json": "ncclsleuth.renderers.json_out",
    "markdown": "ncclsleuth.renderers.markdown",
    "slack": "ncclsleuth.renderers.slack",
    "html": "ncclsleuth.renderers.html",
}


def render(fmt: str, report: Any, color: bool = False, **opts: Any) -> str:
    mod = importlib.import_module(RENDERERS[fmt])
    return mod.render(report, color=color, **opts)


def render_chunks(fmt: str, report: Any, color: bool = False, **opts: Any) -> Iterator[str]:
    """The text of :func:`render` in pieces, for a writer that need not hold it whole: the
    pieces of a format whose module has ``chunks`` (JSON: the text of a 100,000-rank job's
    report is tens of MB, and the encoder's list of pieces several times that), else the
    whole text as one."""
    mod = importlib.import_module(RENDERERS[fmt])
    pieces = getattr(mod, "chunks", None)
    if pieces is None:
        return iter((mod.render(report, color=color, **opts),))
    return pieces(report, color=color, **opts)


def host_runs(order: list[int], rank_host: dict[int, str]) -> list[tuple[str, list[int]]]:
    """Consecutive ranks of a ring on the same host, in ring order: [(host, [ranks]), ...]."""
    groups: list[tuple[str, list[int]]] = []
    for r in order:
        h = rank_host.get(r, "?")
        if groups and groups[-1][0] == h:
            groups[-1][1].append(r)
        else:
            groups.append((h, [r]))
    return groups


_DIGITS = str.maketrans("", "", "0123456789")


def shape(text: str) -> str:
    """A line with its digits deleted: the same message from another rank, pid or address
    has the same shape (str.translate, not a regex: cheap over thousands of lines)."""
    return text.strip().translate(_DIGITS)


@dataclass
class Line:
    """An evidence line as shown: the first of its repeats, how many, by whom."""

    line: int
    text: str
    count: int = 1
    who: str = ""
    #: the count is a floor (a finding with more evidence lines than were read for repeats)
    at_least: bool = False

    @property
    def times(self) -> str:
        """``×15`` (``×4096+`` for a floor)."""
        return f"×{self.count}{'+' if self.at_least else ''}"


def collapse(evidence: Sequence[Any]) -> list[tuple[str, list[Line]]]:
    """Evidence per file (files in the order they first appear, lines in order); a line
    repeated with other numbers (the same WARN from 8 ranks) is shown once, under its
    first occurrence, with the count and the ranks (or files) that printed it.  Lines a
    finding collapsed already (``Finding.shown``: over all its evidence) keep their counts."""
    first: dict[str, tuple[Any, list[Any]]] = {}
    for e in evidence:
        key = shape(e.text)
        first.setdefault(key, (e, []))[1].append(e)
    per_file: dict[str, list[Line]] = {}
    for e, same in first.values():
        count = sum(getattr(x, "count", 1) for x in same)
        per_file.setdefault(e.file, []).append(Line(e.line, e.text, count, _who(same, count),
                                                    any(getattr(x, "at_least", False) for x in same)))
    return [(path, sorted(lines, key=lambda x: x.line)) for path, lines in per_file.items()]


def evidence_lines(f: Any, limit: int) -> tuple[list[tuple[str, Line]], int]:
    """A finding's evidence as shown: (file, line) pairs, at most ``limit``, repeats
    collapsed, and how many evidence lines of the finding are left unsaid."""
    out: list[tuple[str, Line]] = []
    said = 0
    for path, lines in collapse(f.shown or f.evidence):
        for ln in lines[: limit - len(out)]:
            out.append((path, ln))
            said += ln.count
    return out, max(f.evidence_total, len(f.evidence)) - said


#: rank ranges named after a repeated evidence line, at most (the rest as a count: the finding's
#: JSON lists every rank it is about)
WHO_MOST = 10


def _who(same: Sequence[Any], count: int) -> str:
    """``ranks 0-3, 5`` (every line names its rank), else ``7 files``, else ''."""
    if count < 2:
        return ""
    from ..model.stats import ranges

    ranks: set[int] = set()
    named = 0
    files = 0
    for e in same:
        rs = getattr(e, "ranks", ()) or ((e.rank,) if getattr(e, "rank", None) is not None else ())
        ranks.update(rs)
        named += getattr(e, "count", 1) if rs and len(rs) >= getattr(e, "count", 1) else 0
        files += getattr(e, "files", 1)
    if ranks and named >= count:
        return ("ranks " if len(ranks) > 1 else "rank ") + ranges(ranks, ", ", WHO_MOST)
    return f"{files} files" if files > 1 else ""


def more_comms(s: dict[str, Any], shown: int) -> str:
    """``996 more communicators`` past the ``shown`` ones of a summary (``communicators_total``:
    the summary keeps 32), or ''."""
    total = s.get("communicators_total") or len(s.get("communicators") or [])
    left = total - min(shown, len(s.get("communicators") or []))
    from ..model.stats import counted

    return counted(left, "more communicator") if left > 0 else ""


def comm_counts(c: dict[str, Any]) -> str:
    """``8,000/8,000 ranks, 8,000 init complete``: a summary communicator's ranks seen (of its size,
    where the log says it) and how many finished their init, with thousands separators as the
    summary's other counts."""
    from ..model.stats import number

    seen = f"{number(c['ranks_seen'])}/{number(c['nranks'])}" if c.get("nranks") else number(c["ranks_seen"])
    return f"{seen} ranks, {number(c['init_complete'])} init complete"


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a space, with ``…`` where it was
    cut (a long evidence line shown whole would fill the screen; cut mid-word it reads as
    a different value).  A text without a space near the cut is cut at the limit."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip() + " …"


@dataclass
class InitGroup:
    """Ranks on one host whose init got as far and logged the same first error."""

    host: str | None
    ranks: set[int]
    #: the group's first rank's row of ``init_progress`` (its error line stands for all)
    first: dict[str, Any]


def init_progress_groups(rows: Sequence[dict[str, Any]]) -> list[InitGroup]:
    """The ``init_progress`` figure per host and outcome (digits aside: the same WARN from
    each rank's pid is one outcome): 64 ranks on 8 hosts that failed alike are 8 groups."""
    groups: list[tuple[tuple[Any, ...], InitGroup]] = []
    for r in sorted(rows, key=lambda r: (r.get("host") or "", r["rank"])):
        key = (r.get("host"), r["started"], r["completed"], shape(r.get("error") or ""))
        if groups and groups[-1][0] == key:
            groups[-1][1].ranks.add(r["rank"])
        else:
            groups.append((key, InitGroup(r.get("host"), {r["rank"]}, r)))
    return [g for _, g in groups]


def common_dir(paths: Sequence[str]) -> str:
    """The folder all these files are in ('' when none is shared, or for one bare name)."""
    dirs = [os.path.dirname(p) for p in paths if p and not p.startswith("<")]
    if not dirs:
        return ""
    try:
        return os.path.commonpath(dirs)
    except ValueError:  # absolute and relative paths mixed
        return ""


_BULLET = rx(r"^\s*(?:[-*•]|\d+[.)])\s")


def reflow(text: str, wrapped_at: int = 60) -> list[str]:
    """The lines of a fix as its author meant them: a line the author wrapped by hand (the
    one before it is long, the indent carries on, it is no list item, the one before does
    not end in ':') is joined to it, so a narrower terminal wraps the sentence once, not twice."""
    out: list[str] = []
    for line in text.strip("\n").splitlines():
        if out and line.strip() and not _BULLET.match(line):
            prev = out[-1]
            prev_indent = len(prev) - len(prev.lstrip(" "))
            item = _BULLET.match(prev)
            indent = len(line) - len(line.lstrip(" "))
            if (len(prev.strip()) >= wrapped_at and not prev.rstrip().endswith(":")
                    and indent in (prev_indent, item.end() if item else prev_indent)):
                out[-1] = prev.rstrip() + " " + line.strip()
                continue
        out.append(line)
    return out
