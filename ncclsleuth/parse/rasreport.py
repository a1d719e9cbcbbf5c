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
        if a.isdigit() and (not b or b.isdigit()):
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
            return int(v) if isinstance(v, (str, int)) and str(v).isdigit() else None

        status = g.get("status") or g.get("error")
        ops: int | None = num("ops")
        if g.get("none"):
            status, ops = "not launched", 0
        return RasReport(source=self.source, line=lineno, text=raw, what=what, section=self.section, comm=self.comm,
                         comm_rank=num("rank") if "comm_rank" not in g else g["comm_rank"], count=num("count"),
                         ops=ops, status=status, coll=self.coll, peer_host=g.get("node"), peer_pid=num("pid"),
                         gpu=g.get("gpu"))
