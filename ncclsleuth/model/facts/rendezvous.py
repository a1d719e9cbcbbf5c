"""Rendezvous-phase facts: what the c10d store says about ranks that never arrived.

Inside ``init_process_group`` every rank meets the others through the TCPStore that rank 0
serves.  Two store messages name the ranks that did not arrive (knowledge base
``TCP-WAIT-WORKERS`` and ``TCP-WAIT-TIMEOUT``):

* the server's ``Timed out after N seconds waiting for clients. M/W clients joined.``:
  W - M processes never connected (never started, crashed before init, or WORLD_SIZE is
  larger than the number of processes launched);
* a client's ``wait timeout after T ms, keys: /default_pg/0//cpu//0/3``: a gloo
  rendezvous key ``/<pg prefix>/<group>//<device>//<index>/<rank>``: the process waited for
  rank 3 to publish its gloo address for that group; rank 3 never created it.  When every
  process that reached the store waits for the same rank and the server did not complain
  about missing clients, no process initialised as that rank although all of them
  connected: a RANK given twice (or a rank never started with a WORLD_SIZE that counts it).

A store wait inside ``init_process_group`` is a rendezvous problem, not a collective
timeout; the waiting ranks are its symptoms.
"""
from __future__ import annotations

from ... import events as E
from ...util.rxstore import rx
from ..job import JobModel
from ..members import members
from .base import TEXT_MOST, Record, fact, ranges

_CLIENTS = rx(r"waiting for clients\. (\d+)/(\d+) clients joined")
_KEYS = rx(r"wait timeout after (\d+) ?ms, keys: (\S+)")
_GLOO_KEY = rx(r"^/([^/]*)/(\d+)//(\w+)//(\d+)/(\d+)$")
_CUDA_KEY = rx(r"^/([^/]*)//cuda//(\d+)$")


class StoreWait(Record):
    how: str  # clients_missing | never_published
    rank: int | str  # the (first) rank that never arrived
    ranks: list[int]
    who: str
    key: str
    pg: str
    waiting: int  # processes that waited for it
    joined: int | str
    expected: int | str
    assumed: bool  # the missing ranks are inferred from the count (ranks numbered from 0)
    assumed_note: str


@fact(StoreWait)
def store_wait(model: JobModel) -> list[StoreWait]:
    """Ranks the rendezvous store says never arrived: the server's missing clients, or the
    rank whose gloo address key every waiting process waited for."""
    clients, waits = _store_lines(model)
    if clients:
        return [_missing_clients(model, clients, waits)]
    by_key: dict[str, list[E.Event]] = {}
    for key, ev in waits:
        by_key.setdefault(key, []).append(ev)
    out: list[StoreWait] = []
    for key, evs in by_key.items():
        m = _GLOO_KEY.match(key)
        if m is None:
            continue
        rank = int(m.group(5))
        out.append({"how": "never_published", "rank": rank, "ranks": [rank], "who": f"rank {rank}", "key": key,
                    "pg": f"{m.group(1) or '?'} (group {m.group(2)}, {m.group(3)})", "waiting": len(evs),
                    "joined": "?", "expected": "?", "assumed": False, "assumed_note": "", "evidence": evs})
    return out


def _store_lines(model: JobModel) -> tuple[list[tuple[int, int, E.Event]], list[tuple[str, E.Event]]]:
    """(joined, expected, line) of the server's complaints; (key, line) of the clients' waits."""
    clients: list[tuple[int, int, E.Event]] = []
    waits: list[tuple[str, E.Event]] = []
    seen: set[tuple[str, int]] = set()
    for kind in ("store_error", "traceback", "exception", "warn_text"):
        for ev in model.events.get(kind, ()):
            at = (ev.source, ev.line)
            if at in seen:
                continue
            m = _CLIENTS.search(ev.text)
            if m is not None:
                seen.add(at)
                clients.append((int(m.group(1)), int(m.group(2)), ev))
                continue
            k = _KEYS.search(ev.text)
            if k is not None:
                seen.add(at)
                waits.append((k.group(2).rstrip(".,"), ev))
    return clients, waits


def _missing_clients(model: JobModel, clients: list[tuple[int, int, E.Event]],
                     waits: list[tuple[str, E.Event]]) -> StoreWait:
    joined, expected, ev = clients[0]
    ms = members(model)
    # ranks known to have reached the store: they waited there (a client), or serve it (rank 0)
    reached = {m.rank for m in ms.ranks for ev in (m.traceback, m.first_problem, m.last_problem)
               if ev is not None and (_KEYS.search(ev.text) or _CLIENTS.search(ev.text))}
    reached |= {ev.rank for _, ev in waits if ev.rank is not None}
    known = {m.rank for m in ms.ranks}
    if known and len(reached | {0}) >= joined:
        missing = sorted(set(range(expected)) - (reached | {0}))
        assumed = False
    else:
        missing, assumed = list(range(joined, expected)), True
    missing = [r for r in missing if r is not None][: expected - joined] or list(range(joined, expected))
    return {"how": "clients_missing", "rank": missing[0] if missing else "?", "ranks": missing,
            "who": (f"rank {missing[0]}" if len(missing) == 1 else f"ranks {ranges(missing, most=TEXT_MOST)}")
            if missing else "?",
            "key": "", "pg": "", "waiting": len(waits), "joined": joined, "expected": expected, "assumed": assumed,
            "assumed_note": " (no rank names itself in these logs: the highest ranks, as launchers number them from 0)"
            if assumed else "",
            "evidence": [ev] + [w for _, w in waits]}
