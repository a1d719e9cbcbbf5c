"""Figures of the post-mortem, from the model: rings and hops per communicator, init per rank.

A plain-dict payload (builtins only), so the renderers stay pure functions of the
Report it rides on (``Report.figures``) and redaction treats it like the rest.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from .. import events as E
from .job import Comm, JobModel

#: glog's prefix (PyTorch's C++ lines): ``E1129 11:41:55.747094967`` -> the time of day
_GLOG = re.compile(r"^[IWEF]?(\d\d)(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?)$")
_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def _ts_seconds(ts: str | None) -> float | None:
    """Seconds of a log timestamp (absolute or time-of-day), None when unparseable."""
    if not ts:
        return None
    t = ts.strip().strip("[]")
    g = _GLOG.match(t)
    if g:
        return int(g.group(3)) * 3600 + int(g.group(4)) * 60 + float(g.group(5))
    try:
        return float(t)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(t.replace(",", ".").replace("Z", "+00:00")).timestamp()
    except ValueError:
        pass
    for fmt in ("%Y-%b-%d %H:%M:%S.%f", "%Y-%b-%d %H:%M:%S", "%H:%M:%S.%f", "%H:%M:%S"):
        try:
            d = datetime.strptime(t, fmt)
        except ValueError:
            continue
        if d.year == 1900:
            return d.hour * 3600 + d.minute * 60 + d.second + d.microsecond / 1e6
        return d.timestamp()
    return None


def build_figures(model: JobModel, max_comms: int = 4) -> dict[str, Any]:
    """Plain-dict payload for the pictures: rings/hops per communicator, init per rank.

    ``comms``: the largest communicators first, each with ``key``, ``nranks``,
    ``ranks``, ``rank_host`` (rank -> host), ``rings`` ([channel, order] pairs),
    ``hops`` (src, dst, transport label, net, gdr, channels) and ``truncated``.
    ``init``: one row per rank of the largest communicator with timings or
    timestamps: ``rank``, ``host``, ``offset``/``duration`` in seconds (from
    Init START/COMPLETE timestamps when both parse, else offset 0 and the
    ``Init timings`` total), ``phases`` ([name, seconds]) and ``source``.
    ``init_progress``: where init never completed, how far each rank got
    (:func:`init_progress`).
    """
    comms = sorted((c for c in model.comms.values() if c.key != "unknown" and (c.ranks or c.rings)),
                   key=lambda c: (-(c.nranks or len(c.ranks)), c.key))
    out_comms = []
    for c in comms[:max_comms]:
        out_comms.append({
            "key": c.key,
            "nranks": c.nranks,
            "ranks": sorted(c.ranks),
            "rank_host": {str(r): st.host for r, st in sorted(c.ranks.items()) if st.host},
            "rings": [[ch, list(order)] for ch, order in sorted(c.rings.items())],
            "hops": [{"src": s, "dst": d, "transport": h[0], "net": h[1], "gdr": bool(h[2]), "channels": h[3]}
                     for (s, d), h in sorted(c.hop_items())],
            "truncated": bool(c.ring_truncated),
        })
    init: list[dict[str, Any]] = []
    timed = [c for c in comms if any(st.timed is not None or (st.began is not None and st.done is not None)
                                     for st in c.ranks.values())]
    if timed:
        c = timed[0]
        rows: list[dict[str, Any]] = []
        for r, st in sorted(c.ranks.items()):
            t0 = _ts_seconds(st.start_ts) if st.began is not None else None
            t1 = _ts_seconds(done.ts) if (done := st.complete) is not None else None
            phases: list[list[Any]] = [[name, float(v)] for name, v in st.init_phases]
            row: dict[str, Any] = {"comm": c.key, "rank": r, "host": st.host, "phases": phases,
                                   "offset": None, "duration": None, "source": None}
            if t0 is not None and t1 is not None and t1 >= t0:
                row.update(offset=t0, duration=round(t1 - t0, 6), source="timestamps")
                if phases and abs(sum(p[1] for p in phases) - (t1 - t0)) > max(1.0, 0.2 * (t1 - t0)):
                    row["phases"] = []  # phases would not fit the measured bar
            elif st.timed is not None:
                row.update(offset=0.0, duration=float(st.init_total), source="timings")
            rows.append(row)
        starts = [row["offset"] for row in rows if row["source"] == "timestamps"]
        base = min(starts) if starts else 0.0
        for row in rows:
            if row["source"] == "timestamps":
                row["offset"] = round(row["offset"] - base, 6)
        init = rows
    return {"comms": out_comms, "init": init, "init_progress": init_progress(model, comms[0] if comms else None),
            "collectives": collective_rows(model), "failed_at": failed_at(model)}


def init_progress(model: JobModel, comm: Comm | None) -> list[dict[str, Any]]:
    """How far init got on each rank of ``comm`` when some rank never completed it (an init
    failure has no timings to draw): whether it logged Init START and COMPLETE, and the
    first error line of its process (``error``: text, ``source``, ``line``).  Empty when
    every rank completed init."""
    if comm is None or all(st.done is not None for st in comm.ranks.values()):
        return []
    by_process: dict[tuple[str | None, int | None], E.Event] = {}
    by_rank: dict[int, E.Event] = {}
    for ev in model.error_events():  # in input order: the first one of each process wins
        if ev.pid is not None and ev.host:
            by_process.setdefault((ev.host, ev.pid), ev)
        if ev.rank is not None:
            by_rank.setdefault(ev.rank, ev)
    rows = []
    for r, st in sorted(comm.ranks.items()):
        first = by_process.get((st.host, st.pid)) or by_rank.get(r)
        rows.append({"rank": r, "host": st.host, "started": st.began is not None,
                     "completed": st.done is not None,
                     "error": first.text.strip() if first is not None else None,
                     "source": first.source if first is not None else None,
                     "line": first.line if first is not None else None})
    return rows


def collective_rows(model: JobModel) -> list[dict[str, Any]]:
    """One row per rank that logged its collectives (PyTorch's watchdog and work status
    lines): the last collective it completed and enqueued, the one it timed out in, and
    when it wrote its last line (``last_s``: seconds after the earliest rank's last line)
    -- what a hang's timeline shows."""
    rows: dict[int, dict[str, Any]] = {}

    def row(rank: int) -> dict[str, Any]:
        return rows.setdefault(rank, {"rank": rank, "host": None, "last_completed": None, "last_enqueued": None,
                                      "timeout_seq": None, "op": None, "last_ts": None, "last_s": None})

    for ev in model.events.get("work_status", ()):
        if not isinstance(ev, E.WorkStatus) or ev.rank is None:
            continue
        r = row(ev.rank)
        for key in ("last_completed", "last_enqueued"):
            val = getattr(ev, key)
            if val is not None and (r[key] is None or val > r[key]):
                r[key] = val
    for ev in model.events.get("watchdog_timeout", ()):
        if isinstance(ev, E.WatchdogTimeout) and ev.rank is not None:
            r = row(ev.rank)
            r["timeout_seq"], r["op"] = ev.seq, ev.op or r["op"]
    if not rows:
        return []
    file_host = model.source_hosts()
    for p in model.processes.values():
        if p.launcher_rank in rows and p.host:
            rows[p.launcher_rank]["host"] = rows[p.launcher_rank]["host"] or p.host
    for evs in model.events.values():  # each rank's last line with a time (kept events: every problem line)
        for ev in evs:
            if ev.rank is None or ev.rank not in rows or not ev.ts:
                continue
            r = rows[ev.rank]
            r["host"] = r["host"] or ev.host or file_host.get(ev.source)
            t = _ts_seconds(ev.ts)
            if t is not None and (r["last_ts"] is None or t > r["last_ts"]):
                r["last_ts"] = t
    times = [r["last_ts"] for r in rows.values() if r["last_ts"] is not None]
    base = min(times) if times else 0.0
    for r in rows.values():
        if r["last_ts"] is not None:
            r["last_s"] = round(r["last_ts"] - base, 3)
        r.pop("last_ts")
    return [rows[k] for k in sorted(rows)]


def failed_at(model: JobModel) -> str | None:
    """When the job failed, as the logs say: the timestamp of the first error line that has one."""
    for ev in model.error_events():
        if ev.ts:
            t = str(ev.ts).strip().strip("[]")
            g = _GLOG.match(t)
            if g and 1 <= int(g.group(1)) <= 12:  # glog: month, day and time, no year
                return f"{_MONTHS[int(g.group(1)) - 1]} {int(g.group(2))} {t.split(' ', 1)[1][:12]}"
            return t
    return None
