"""The ``ncclras`` status report (NCCL 2.24+) -> ``ras_report`` events.

NCCL's RAS service answers the ``ncclras`` client (TCP localhost:28028) with a text
report (``src/ras/client_support.cc``; the formats are listed in
``shared/reference/nccl/unprefixed_prints.tsv``, stream ``ncclras-report``)::

    Job summary / Communicators... / the group table /
    Errors:   INCOMPLETE (missing data from N job processes) + "Process P on node H managing GPU G"
              DEAD (N job processes considered dead) + process lines
              #g-i (hash) INCOMPLETE + "Rank R -- GPU G managed by process P on node H"
              #g-i (hash) ERROR + "Initialization|Asynchronous error(s) on N rank(s)" + "Rank R reported E -- ..."
    Warnings: TIMEOUT (communication timeouts while gathering)
              #g-i (hash) MISMATCH + "Communicator ranks have different status | <coll> operation counts",
              "N ranks have launched up to operation K", "Rank R has launched up to operation K -- ..."

Each line means little alone ("Rank 29 -- GPU 5 managed by process 3487984 on node
10.0.0.4" is missing, dead or behind depending on the heading above it), so this parser
carries the section, the communicator and the collective of the lines above into each
event.  The report's lines carry no NCCL prefix, so the log parser does not see them; a
report is recognised by its first lines (:func:`ncclsleuth.ingest.dumps.sniff_bytes`)
and read by this parser next to the log parser.  The listed ranks are the outliers: NCCL prints single ranks only for
small groups (``rasCountIsOutlier``), which is what makes them the suspects.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..events.flight import RasReport

_G = r"(?P<gpu>\d+(?:,\d+)*(?: \(NVML [\d,]+\))?)"
_WHO = rf"(?:GPU {_G} managed by process (?P<pid>\d+) on node (?P<node>\S+)|\[process information not found\])"
_RX: list[tuple[str, re.Pattern[str]]] = [
    ("banner", re.compile(r"NCCL version (?P<status>\S+) compiled with CUDA")),
    ("heading", re.compile(r"(?P<status>INCOMPLETE|DEAD|TIMEOUT|Errors|Warnings|Job summary)$")),
    ("comm", re.compile(r"#\d+-\d+ \((?P<comm>[0-9a-f]+)\) (?P<status>INCOMPLETE|ERROR|MISMATCH)$")),
    ("incomplete", re.compile(r"Missing communicator data from (?P<count>\d+) job process(?:es)?$")),
    ("incomplete", re.compile(r"Warning: missing data from (?P<count>\d+) process(?:es)? \(received from")),
    ("comm_missing", re.compile(r"Missing communicator data from (?P<count>\d+) ranks?$")),
    ("dead", re.compile(r"(?P<count>\d+) job process(?:es are| is) considered dead")),
    ("process", re.compile(rf"Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? {_G}$")),
    ("rank", re.compile(rf"Rank (?P<rank>\d+) (?:has status (?P<status>\S+) |has launched up to operation "
                        rf"(?P<ops>\d+) |(?P<none>has not launched any operations) |reported (?P<error>.+?) )?"
                        rf"-- {_WHO}$")),
    ("ranks", re.compile(r"The (?:missing|unknown) ranks?: (?P<list>[\d,\- ]+)$")),  # 2.24-2.25
    ("ranks", re.compile(r"Rank (?P<list>[\d,\-]+) has status (?P<status>\S+)$")),  # 2.24-2.25
    ("count", re.compile(r"(?P<count>\d+) ranks have (?:status (?P<status>\S+)|launched up to operation "
                         r"(?P<ops>\d+)|(?P<none>not launched any operations))$")),
    ("count", re.compile(r"(?P<count>\d+) ranks reported (?P<error>.+)$")),
    ("differ", re.compile(r"Communicator ranks have different (?:(?P<status>status)|(?P<coll>\w+) operation counts)$")),
    ("error", re.compile(r"(?P<status>Initialization|Asynchronous) errors? on (?P<count>\d+) ranks?$")),
    ("timeout", re.compile(r"Encountered (?P<count>\d+) communication timeouts? while gathering")),
    ("summary", re.compile(r"(?P<group>\d+) +\d+ +(?P<nodes>\d+) +[\d-]+ +(?P<count>\d+) +\d+ +"
                           r"(?P<status>NOCOMM|INIT|RUNNING|FINALIZE|ABORT) +(?P<error>\S+)$")),
]
_STRIP = re.compile(r"^[>`]*\s*")


def _ranks(text: str) -> list[int]:
    out: list[int] = []
    for part in text.replace(" ", "").split(","):
        a, _, b = part.partition("-")
        if a.isdecimal() and (not b or b.isdecimal()):
            out.extend(range(int(a), int(b or a) + 1) if not b or int(b) - int(a) < 65536 else [int(a)])
    return out


class RasReportParser:
    """Lines of one input -> ``ras_report`` events, with the section they are under."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.section: str | None = None
        self.comm: str | None = None
        self.coll: str | None = None

    def feed(self, first: int, block: str) -> Iterator[RasReport]:
        """The events of a block of whole lines starting at line ``first``."""
        for i, line in enumerate(block.split("\n")):
            if len(line) < 400:  # report lines are short; anything longer is not one
                yield from self.line(first + i, line)

    def line(self, lineno: int, raw: str) -> Iterator[RasReport]:
        text = _STRIP.sub("", raw).rstrip()
        if not text:
            return
        for what, rx in _RX:
            m = rx.match(text)
            if m is None:
                continue
            g = m.groupdict()
            if what == "heading":
                self.section = g["status"] if g["status"] not in ("Errors", "Warnings", "Job summary") else None
                self.comm = self.coll = None
                return
            if what == "comm":
                self.section, self.comm, self.coll = g["status"], g["comm"], None
            elif what == "differ":
                self.coll = g.get("coll") or "status"
            if what == "ranks":
                for r in _ranks(g["list"]):
                    yield self._ev(lineno, raw, "rank", {"comm_rank": r, "status": g.get("status")})
                return
            yield self._ev(lineno, raw, what, g)
            return

    def _ev(self, lineno: int, raw: str, what: str, g: dict[str, Any]) -> RasReport:
        def num(key: str) -> int | None:
            v = g.get(key)
            return int(v) if isinstance(v, (str, int)) and str(v).isdecimal() else None

        status = g.get("status") or g.get("error")
        ops: int | None = num("ops")
        if g.get("none"):
            status, ops = "not launched", 0
        return RasReport(source=self.source, line=lineno, text=raw, what=what, section=self.section, comm=self.comm,
                         comm_rank=num("rank") if "comm_rank" not in g else g["comm_rank"], count=num("count"),
                         ops=ops, status=status, coll=self.coll, peer_host=g.get("node"), peer_pid=num("pid"),
                         gpu=g.get("gpu"))


# ---------------------------------------------------------------------- the JSON form (2.28.7+)

#: ncclResult_t -> ncclGetErrorString's text (src/init.cc), for a rank's init_state / async_error
_RESULTS = {1: "unhandled cuda error", 2: "unhandled system error", 3: "internal error", 4: "invalid argument",
            5: "invalid usage", 6: "remote process exited or there was a network error"}


def events_from_json(obj: dict[str, Any], text: str, source: str) -> list[RasReport]:
    """The same events as the text report's, from ``ncclras -f json``: dead and silent
    missing ranks, ranks whose collective counts or state differ from the majority, ranks
    that report an error.  ``line`` is the line of the rank's ``"rank": N`` (NCCL writes
    one key a line)."""
    lines = _rank_lines(text)
    out: list[RasReport] = []
    ev = lambda line, what, sec, comm, **kw: RasReport(source=source, line=line, text=kw.pop("t"),  # noqa: E731
                                                        what=what, section=sec, comm=comm, **kw)
    for c in obj["communicators"][:100_000]:
        if not isinstance(c, dict):
            continue
        comm = str(c.get("hash", "?")).removeprefix("0x")[:16].rjust(16, "0")
        at = iter(lines.get(str(c.get("hash")), []))
        ranks = [r for r in c.get("ranks", ()) if isinstance(r, dict)][:1 << 20]
        rank_line = {id(r): next(at, 0) for r in ranks}
        missing = [r for r in c.get("missing_ranks", ()) if isinstance(r, dict)][:1 << 20]
        for r in missing:
            line = next(at, 0)
            st = _dict(r.get("status"))
            who = dict(peer_pid=_num(r.get("pid")), peer_host=str(r.get("host", "?"))[:200], gpu=str(r.get("cuda_dev")))
            if st.get("considered_dead") or st.get("unresponsive"):
                sec = "DEAD" if st.get("considered_dead") else "INCOMPLETE"
                out.append(ev(line, "process", sec, None, t=f'{sec}: "rank": {r.get("rank")}', **who))
            out.append(ev(line, "rank", "INCOMPLETE", comm, comm_rank=_num(r.get("rank")),
                          t=f'missing: "rank": {r.get("rank")}', **who))
        out.extend(_json_outliers(ranks, rank_line, comm, ev))
    return out


def _json_outliers(ranks: list[dict[str, Any]], rank_line: dict[int, int], comm: str, ev: Any) -> list[RasReport]:
    out: list[RasReport] = []
    counts: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for r in ranks:
        cc = r.get("collective_counts")
        for coll, n in (cc.items() if isinstance(cc, dict) else ()):
            if isinstance(n, int):
                counts.setdefault(str(coll)[:32], {}).setdefault(n, []).append(r)
        st = _dict(r.get("status"))
        for key in ("init_state", "async_error"):
            code = st.get(key)
            if isinstance(code, int) and code in _RESULTS:
                out.append(ev(rank_line[id(r)], "rank", "ERROR", comm, comm_rank=_num(r.get("rank")),
                              status=_RESULTS[code], peer_pid=_num(r.get("pid")), peer_host=str(r.get("host"))[:200],
                              gpu=str(r.get("cuda_dev")), t=f'"{key}": {code} ("rank": {r.get("rank")})'))
    for coll, by in counts.items():
        if len(by) < 2:
            continue
        major, group = max(by.items(), key=lambda kv: len(kv[1]))
        first = rank_line[id(group[0])]
        out.append(ev(first, "count", "MISMATCH", comm, coll=coll, count=len(group), ops=major,
                      t=f"{len(group)} ranks: {coll} {major}"))
        for n, rs in by.items():
            if n == major or len(rs) >= len(group):
                continue
            for r in rs:
                out.append(ev(rank_line[id(r)], "rank", "MISMATCH", comm, coll=coll, ops=n,
                              comm_rank=_num(r.get("rank")), peer_pid=_num(r.get("pid")),
                              peer_host=str(r.get("host"))[:200], gpu=str(r.get("cuda_dev")),
                              t=f'"rank": {r.get("rank")}: {coll} {n}'))
    return out


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _num(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


_HASH = re.compile(r'^\s*"hash": "([^"]*)"')
_RANK = re.compile(r'^\s*"rank": (\d+),')


def _rank_lines(text: str) -> dict[str, list[int]]:
    """communicator hash -> the line numbers of its ``"rank": N`` keys, in order."""
    out: dict[str, list[int]] = {}
    cur: list[int] | None = None
    for n, line in enumerate(text.split("\n"), 1):
        m = _HASH.match(line)
        if m is not None:
            cur = out.setdefault(m.group(1), [])
        elif cur is not None and _RANK.match(line):
            cur.append(n)
    return out
