"""Small helpers of the facts and views: rank lists as people write them, the median."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def ranges(nums: list[int] | Iterable[int], sep: str = ",") -> str:
    """``[40, 41, 42, 47]`` -> ``"40-42,47"``: rank lists as people write them."""
    rs = sorted(set(nums))
    out, i = [], 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return sep.join(out)


def median(values: Any) -> float:
    """statistics.median (the mean of the two middle values for an even count), without
    importing statistics (decimal and fractions: ~4 ms of a chat-sized run's start-up)."""
    s = sorted(values)
    if not s:
        raise ValueError("median of no values")
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2
