"""Timestamps as lines print them -> seconds, comparable within one job.

The envelope (:mod:`.envelope`) keeps each line's timestamp text as it was printed
(``Event.ts``); whole-job reasoning needs to put the lines of different ranks in time
order, so this module turns those texts into numbers.  Formats (the envelope's groups):

* ISO and logging: ``2024-02-09 09:09:15,164``, ``2019-06-02T16:13:44.884Z``, NCCL 2.26+'s
  ``[2026-04-22 21:34:20]``, the torchrun failure block's ``2026-12-01_10:40:25``;
* ``2023-Aug-01 16:12:43.0204``, syslog ``Nov 29 11:30:00``;
* glog without a year: the Python logger of torchelastic ``W1201 10:40:04.953000`` (a real
  fraction of a second), and c10's ``[E1206 18:44:12.715298746 ...]`` whose 9-digit fraction
  is ``tv_nsec`` of CLOCK_MONOTONIC, not part of the wall time (torch reference PFX-CPP-3):
  it is dropped and the value is marked inexact (ordering within that second is unknown);
* a bare ``11:30:00`` (rich's time column): seconds of the day only.

Values are seconds since the start of the year (the year itself is dropped: glog lines do
not print it, and a job's lines must compare whatever the format).  A job that runs
across New Year's Eve would be ordered wrongly across midnight of December 31st; a bare
time of day is put on day 0 and compares only with other bare times.
"""
from __future__ import annotations

from functools import lru_cache

from .classes import NamedTuple
from .rxstore import rx

_MONTHS = {m: i + 1 for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                             "Nov", "Dec"))}
_CUM = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)  # days before each month (no leap days)

_DATE = rx(r"(?:\d{4}-)?(\d\d|[A-Z][a-z]{2})-(\d\d)[T _](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_GLOG = rx(r"(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?$")
_SYSLOG = rx(r"([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)")
_TIME = rx(r"(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?$")


class Stamp(NamedTuple):
    """A line's time: seconds since the start of its year, and whether the fraction is real."""

    t: float
    exact: bool


def _at(month: int, day: int, h: str, m: str, s: str) -> float:
    return ((_CUM[month - 1] if 1 <= month <= 12 else 0) + day - 1) * 86400.0 + int(h) * 3600 + int(m) * 60 + int(s)


def _frac(f: str | None) -> float:
    return float("0." + f) if f else 0.0


@lru_cache(maxsize=4096)
def stamp(ts: str | None) -> Stamp | None:
    """The time a timestamp text stands for, or None when it is not one this module reads."""
    if not ts:
        return None
    ts = ts.strip().strip("[]")
    m = _DATE.search(ts)
    if m is not None:
        mon = m.group(1)
        month = int(mon) if mon.isdecimal() else _MONTHS.get(mon, 0)
        return Stamp(_at(month, int(m.group(2)), m.group(3), m.group(4), m.group(5)) + _frac(m.group(6)), True)
    m = _GLOG.match(ts)
    if m is not None:
        frac = m.group(6)
        exact = frac is None or len(frac) <= 6  # 9 digits: CLOCK_MONOTONIC nanoseconds (c10, torch 2.4+)
        return Stamp(_at(int(m.group(1)), int(m.group(2)), m.group(3), m.group(4), m.group(5))
                     + (_frac(frac) if exact else 0.0), exact)
    m = _SYSLOG.match(ts)
    if m is not None:
        return Stamp(_at(_MONTHS.get(m.group(1), 0), int(m.group(2)), m.group(3), m.group(4), m.group(5)), True)
    m = _TIME.match(ts)
    if m is not None:
        return Stamp(int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) + _frac(m.group(4)), True)
    return None


def seconds(ts: str | None) -> float | None:
    """``stamp(ts).t`` or None."""
    s = stamp(ts)
    return None if s is None else s.t


def earlier(a: Stamp, b: Stamp) -> bool:
    """True when ``a`` is surely before ``b``: an inexact stamp is only known to the second
    (it lies in ``[t, t + 1)``)."""
    return a.t < b.t if a.exact else a.t + 1.0 <= b.t
