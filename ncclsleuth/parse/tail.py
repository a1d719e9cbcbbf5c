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

from collections.abc import Iterator
from re import escape as re_escape
from typing import NamedTuple

from ..util.rxstore import rx

#: characters of the end of a file kept for this scan (a few thousand lines)
TAIL_CHARS = 256 * 1024
#: the same for a file that interleaves ranks: every rank's last progress line comes before
#: the burst of failure lines all ranks print at the end (1,024 ranks x ~2 KB of timeouts)
TAIL_CHARS_MULTI = 8 * 1024 * 1024
#: candidate lines tried per file of one rank before giving up
_TRIES = 64

_STEP = rx(r"(?<![\w.])(?i:global_step|step|iter(?:ation)?)\b\s*[:=#]?\s*\[?\s*(\d+)(?:\s*/\s*(\d+))?")
_BAR = rx(r"(\d+)/(\d+) +\[(?:(\d+):)?(\d+):(\d\d)<")
_ANCHORS = ("step", "Step", "STEP", "iter", "Iter", "ITER", "<")
#: launcher prefixes that say which rank printed a line (as the envelope reads them)
_RANK = rx(r"\[(?:default|rank ?|trainer|worker|RANK |Rank )(\d+)(?:\|\d+)?\]|(\d{1,6}): (?=\S)"
                   r"|\[\d+,(\d+)\]<std")


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


def _lines_back(blocks: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(line number, text) of the kept blocks, last line first."""
    for first, text in reversed(blocks):
        n = first + text.count("\n")
        end = len(text)
        while end >= 0:
            start = text.rfind("\n", 0, end) + 1
            yield n, text[start:end]
            n -= 1
            end = start - 1


def last_line(blocks: list[tuple[int, str]]) -> Found | None:
    """The last non-empty line."""
    for n, s in _lines_back(blocks):
        if s.strip():
            return Found(n, s)
    return None


def last_progress(blocks: list[tuple[int, str]]) -> Found | None:
    """The last progress line of a file of one rank (literal search backwards)."""
    tries = 0
    for first, text in reversed(blocks):
        pos = len(text)
        while tries < _TRIES:
            cand = max(text.rfind(a, 0, pos) for a in _ANCHORS)
            if cand < 0:
                break
            start = text.rfind("\n", 0, cand) + 1
            end = text.find("\n", cand)
            line = text[start:] if end < 0 else text[start:end]
            tries += 1
            p = progress(line)
            if p is not None:
                return Found(first + text.count("\n", 0, start), line, p)
            pos = start
            if pos == 0:
                break
    return None


#: any of the progress anchors in a line (one search instead of one per literal)
_ANY_ANCHOR = rx("|".join(re_escape(a) for a in _ANCHORS))


def per_rank(blocks: list[tuple[int, str]]) -> tuple[dict[int | None, Found], dict[int | None, Found]]:
    """Each rank prefix's last line and last progress line (``None``: lines without one).

    Every line of up to ``TAIL_CHARS_MULTI`` (100,000 lines of an interleaved file) is looked
    at, so the loop does the least per line: the lines come from one ``split``, a blank line
    is told by ``isspace`` (no copy), the rank by one regex match, the anchors by one search."""
    last: dict[int | None, Found] = {}
    prog: dict[int | None, Found] = {}
    match, anchor = _RANK.match, _ANY_ANCHOR.search
    for first, text in reversed(blocks):
        lines = text.split("\n")
        for i in range(len(lines) - 1, -1, -1):
            s = lines[i]
            if not s or s.isspace():
                continue
            m = match(s)
            r = None if m is None else int(next(g for g in m.groups() if g is not None))
            if r not in last:
                last[r] = Found(first + i, s)
            if r not in prog and anchor(s) is not None:
                p = progress(s)
                if p is not None:
                    prog[r] = Found(first + i, s, p)
    return last, prog
