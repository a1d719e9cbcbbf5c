"""``--jobs N`` for the rule step: the rules of a big job evaluated here and in one forked helper.

The rule step runs after the last line is parsed, in one process: on the 8,000-rank file
(bench/targets.py) it was a quarter of ``--jobs 2``'s time, with the parse workers gone.
The rules that are not fallbacks are evaluated in families that share no fact
(:func:`ncclsleuth.rules.ranking.families`), claimed in turn by this process and a helper
forked with the whole model (:func:`.forked.run_in_order`); the helper's findings come back
pickled, the fallbacks run here after them, and the findings are those of one process, in
the same order (tests/test_rulestep.py).

What it costs: the helper reads the model, and each object it reads is written to (its
reference count), so the pages it reads become its own: up to a second copy of the model
while the rules run.  It starts only for a model big enough to gain
(:data:`MIN_RECORDS`), and only where the machine has that memory available.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..model.job import JobModel
from ..util import Spread, proc_field

#: the least processes and kept events a model holds for the helper to pay off: a fork, the
#: helper's findings pickled and read back cost ~10-30 ms; on the 8,000-rank file (86,000) the
#: families it took were ~0.5 s of the ~1.3 s rule step on a 2-core VM
MIN_RECORDS = 16_384
#: what the helper may come to hold, as a share of this process's resident memory (its pages
#: copied as it reads them): it starts only where the machine has that much available
COPY_SHARE = 1.0


def spread_for(model: JobModel, jobs: int) -> Spread | None:
    """How the rule step of ``model`` shares its work with ``--jobs``: with one helper where it
    pays off; None: in this process.  The fork machinery is imported only then: ``--jobs``
    defaults to the machine's cores, and a paste's run paid ~1.1 ms for it."""
    if jobs < 2 or records(model) < MIN_RECORDS:
        return None
    from .forked import available

    return _with_one_helper if available() and _room() else None


def records(model: JobModel) -> int:
    """The processes and the kept events of ``model``: what the rule step's facts read."""
    return len(model.processes) + sum(len(evs) for evs in model.events.values())


def _with_one_helper(n: int, work: Callable[[int], Any]) -> Iterator[Any]:
    from .forked import run_in_order

    return run_in_order(n, work, 1)


def _room() -> bool:
    """Whether the machine has memory available for a copy of this process's (Linux: MemAvailable
    against VmRSS; True where they cannot be read)."""
    rss = _kib("/proc/self/status", "VmRSS:")
    avail = _kib("/proc/meminfo", "MemAvailable:")
    return rss is None or avail is None or avail >= COPY_SHARE * rss


def _kib(path: str, key: str) -> int | None:
    """The kB value of line ``key`` of a /proc file (None where there is none)."""
    got = proc_field(path, key)
    return int(got) if got is not None and got.isdigit() else None
