"""Small helpers of the facts and views: rank lists as people write them, the median."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

#: rank ranges a text for people names at most (:func:`ranges`' ``most``): a finding's title, message
#: or a fact's words about ranks; its ``ranks`` list (the JSON) keeps them all
TEXT_MOST = 16


def ranges(nums: list[int] | Iterable[int], sep: str = ",", most: int = 0) -> str:
    """``[40, 41, 42, 47]`` -> ``"40-42,47"``: rank lists as people write them.

    ``most`` (> 1): at most that many items, for text a person reads: past it, the first
    ``most - 1``, an ellipsis, the last, and how many ranks in all (every third of 30 ranks, at
    most 4: ``"0, 3, 6, …, 27 (10 in all)"``).  A watchdog line repeated by 1,127 of 8,000 ranks
    named them in ~700 items: 60 lines of a terminal for one evidence line."""
    rs = sorted(set(nums))
    out, i = [], 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    if most > 1 and len(out) > most:
        return f"{sep.join(out[:most - 1])}{sep}…{sep}{out[-1]} ({len(rs):,} in all)"
    return sep.join(out)


def some(names: Sequence[str], most: int) -> str:
    """The first ``most`` names and how many more (``node000, node001 and 998 more``): hosts,
    communicators, inputs in text for people (a job's 1,000 hosts in one cell were 9 KB)."""
    head = ", ".join(names[:most])
    return f"{head} and {len(names) - most:,} more" if len(names) > most else head


def number(x: Any) -> str:
    """A number as people read it: a whole one with thousands separators (``8,000``, not the
    ``8e+03`` of ``{:.3g}``), another with three significant digits and no exponent past 1,000;
    anything else as it is."""
    if type(x) is float and x.is_integer():
        x = int(x)
    if type(x) is int:
        return f"{x:,}"
    if type(x) is float:
        return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"
    return str(x)


def counted(n: int, noun: str) -> str:
    """``1,000 hosts``, ``1 host``, ``23,903 more lines``: a count and its noun (singular given),
    the count as :func:`number` writes it (``1 files / 992031 lines`` was the 8k job's summary)."""
    return f"{number(n)} {noun}{'s' if n != 1 else ''}"


def median(values: Any) -> float:
    """statistics.median (the mean of the two middle values for an even count), without
    importing statistics (decimal and fractions: ~4 ms of a chat-sized run's start-up)."""
    s = sorted(values)
    if not s:
        raise ValueError("median of no values")
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2
