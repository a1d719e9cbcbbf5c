"""Facts of a job watched live (``ncclsleuth watch``): ranks that went silent during init.

They read the watcher's view of the processes (``JobModel.live``, see
:mod:`ncclsleuth.model.live`), which only ``watch`` keeps: elsewhere they are empty.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..job import JobModel
from .base import Record, fact

if TYPE_CHECKING:
    from ..live import Unit


class SilentRanks(Record):
    host: str
    who: str  # "ranks 16-23" (or "processes 11, 12" where no rank is known)
    ranks: list[int]
    seconds: int  # since the least silent of them wrote a line
    phase: str  # where most of them were last seen
    where: str  # the host, "(every process on <host>)" when it is all of them
    done: int  # processes past Init COMPLETE
    processes: int


@fact(SilentRanks, live=True)
def silent_ranks(model: JobModel) -> list[SilentRanks]:
    """Per host, the processes with no line for ``silence`` seconds before finishing NCCL init,
    while other processes of the job finished it."""
    live = model.live
    if live is None:
        return []
    from ..live import rank_ranges  # watch only: analyze does not import the live view
    units, now = live.units, live.now
    done = [u for u in units.values() if u.past_init]
    if not done:
        return []
    silent = [u for u in units.values() if not u.past_init and now - u.last_wall >= live.silence]
    if not silent:
        return []
    host_total = Counter(u.host for u in units.values())
    by_host: dict[str, list[Unit]] = {}
    for u in silent:
        by_host.setdefault(u.host, []).append(u)
    out: list[SilentRanks] = []
    for host in sorted(by_host, key=lambda h: (-max(now - u.last_wall for u in by_host[h]), h)):
        us = by_host[host]
        rk = sorted(r for u in us for r in u.ranks)
        who = (f"rank{'s' if len(rk) > 1 else ''} {rank_ranges(rk)}" if rk else
               f"process{'es' if len(us) > 1 else ''} {', '.join(str(u.key[1]) for u in us)}")
        whole = len(us) == host_total[host] and len(host_total) > 1
        out.append({"host": host, "who": who, "ranks": rk, "seconds": int(min(now - u.last_wall for u in us)),
                    "phase": Counter(u.phase for u in us).most_common(1)[0][0],
                    "where": f"{host} (every process on {host})" if whole else host,
                    "done": len(done), "processes": len(units),
                    "evidence": [u.last_event for u in us[:8] if u.last_event is not None]})
    return out
