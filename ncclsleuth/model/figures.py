"""Figures of the post-mortem, from the model: rings and hops per communicator, init per rank.

A plain-dict payload (builtins only), so the renderers stay pure functions of the
Report it rides on (``Report.figures``) and redaction treats it like the rest.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .job import JobModel


def _ts_seconds(ts: str | None) -> float | None:
    """Seconds of a log timestamp (absolute or time-of-day), None when unparseable."""
    if not ts:
        return None
    t = ts.strip().strip("[]")
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
                     for (s, d), h in sorted(c.hops.items())],
            "truncated": bool(c.ring_truncated),
        })
    init: list[dict[str, Any]] = []
    timed = [c for c in comms if any(st.timings is not None or (st.start is not None and st.complete is not None)
                                     for st in c.ranks.values())]
    if timed:
        c = timed[0]
        rows: list[dict[str, Any]] = []
        for r, st in sorted(c.ranks.items()):
            t0 = _ts_seconds(st.start.ts) if st.start else None
            t1 = _ts_seconds(st.complete.ts) if st.complete else None
            phases: list[list[Any]] = [[name, float(v)] for name, v in (st.timings.phases if st.timings else ())]
            row: dict[str, Any] = {"comm": c.key, "rank": r, "host": st.host, "phases": phases,
                                   "offset": None, "duration": None, "source": None}
            if t0 is not None and t1 is not None and t1 >= t0:
                row.update(offset=t0, duration=round(t1 - t0, 6), source="timestamps")
                if phases and abs(sum(p[1] for p in phases) - (t1 - t0)) > max(1.0, 0.2 * (t1 - t0)):
                    row["phases"] = []  # phases would not fit the measured bar
            elif st.timings is not None and st.timings.total is not None:
                row.update(offset=0.0, duration=float(st.timings.total), source="timings")
            rows.append(row)
        starts = [row["offset"] for row in rows if row["source"] == "timestamps"]
        base = min(starts) if starts else 0.0
        for row in rows:
            if row["source"] == "timestamps":
                row["offset"] = round(row["offset"] - base, 6)
        init = rows
    return {"comms": out_comms, "init": init}
