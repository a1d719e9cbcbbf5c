"""Facts from an ``ncclras`` status report (NCCL 2.24+): dead and silent processes, ranks
missing from a communicator, ranks behind the others, errors the ranks reported.

The report lists single ranks only where they are outliers (``rasCountIsOutlier`` in
``src/ras/client_support.cc``): a dead process, the one rank of 32 that has launched one
collective fewer. Those listed ranks are the suspects; the counts of the majority are
the reference they are compared with.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import field

from ... import events as E
from ...util.classes import dataclass
from ..job import JobModel
from .base import TEXT_MOST, Record, fact, ranges


class RasReported(Record):
    kind: str  # dead | unresponsive | missing | behind | ahead | status | error
    comm: str
    rank: int | str
    ranks: list[int]
    who: str
    host: str
    pid: str
    gpu: str
    detail: str
    others: str
    category: str


#: ncclErrorToString's texts -> the category of what the rank reported (src/misc/... ncclGetErrorString)
_ERROR_CATEGORY = (("cuda", "cuda_error"), ("remote process exited", "peer_failure"), ("system error", "other"),
                   ("internal error", "nccl_internal"), ("invalid", "invalid_usage"))


@dataclass
class _Proc:
    """One process of an ``ncclras`` report: its ranks, communicators and the lines naming it."""

    pid: str
    host: str
    gpu: str
    ranks: list[int] = field(default_factory=list)
    comms: list[str] = field(default_factory=list)
    evidence: list[E.Event] = field(default_factory=list)


def _by_source(model: JobModel) -> Iterator[list[E.RasReport]]:
    per: dict[str, list[E.RasReport]] = {}
    for ev in model.events.get("ras_report", ()):
        assert isinstance(ev, E.RasReport)
        per.setdefault(ev.source, []).append(ev)
    for src in sorted(per, key=lambda s: model.order_key(per[s][0])):
        yield sorted(per[src], key=lambda e: e.line)


@fact(RasReported)
def ras_report(model: JobModel) -> list[RasReported]:
    """What an ``ncclras`` report says is wrong, one record per process or rank group."""
    out: list[RasReported] = []
    for evs in _by_source(model):
        out.extend(_one_report(evs))
    return out


def _one_report(evs: list[E.RasReport]) -> list[RasReported]:
    dead: dict[tuple[str, str], _Proc] = {}
    silent: dict[tuple[str, str], _Proc] = {}
    head: dict[str, E.RasReport] = {}  # section -> its count line (dead, incomplete)
    missing: dict[str, list[E.RasReport]] = {}  # comm -> rank lines
    comm_head: dict[tuple[str, str], E.RasReport] = {}
    counts: dict[tuple[str, str], list[E.RasReport]] = {}  # (comm, coll) -> "N ranks have ..." lines
    outliers: dict[tuple[str, str], list[E.RasReport]] = {}  # (comm, coll) -> single-rank lines
    errors: dict[str, list[E.RasReport]] = {}
    for ev in evs:
        w, sec, comm = ev.what, ev.section, ev.comm or "-"
        if w in ("dead", "incomplete") and ev.comm is None:
            head[w] = ev
        elif w == "process" and sec in ("DEAD", "INCOMPLETE"):
            key = (str(ev.peer_pid), ev.peer_host or "?")
            into = dead if sec == "DEAD" else silent
            p = into.setdefault(key, _Proc(key[0], key[1], ev.gpu or "?"))
            p.evidence.append(ev)
        elif w in ("comm", "comm_missing"):
            comm_head.setdefault((comm, sec or ""), ev)
        elif w == "rank" and sec == "INCOMPLETE":
            missing.setdefault(comm, []).append(ev)
        elif w == "count" and sec == "MISMATCH":
            counts.setdefault((comm, ev.coll or "status"), []).append(ev)
        elif w == "rank" and sec == "MISMATCH":
            outliers.setdefault((comm, ev.coll or "status"), []).append(ev)
        elif w == "rank" and sec == "ERROR":
            errors.setdefault(comm, []).append(ev)
    out: list[RasReported] = []
    # a rank missing from a communicator whose process is dead belongs to the dead process
    rest: dict[str, list[E.RasReport]] = {}
    for comm, lines in missing.items():
        for ev in lines:
            key = (str(ev.peer_pid), ev.peer_host or "?")
            owner = dead.get(key) or silent.get(key)
            if owner is not None and ev.comm_rank is not None:
                owner.ranks.append(ev.comm_rank)
                owner.comms.append(comm)
                owner.evidence.append(ev)
            else:
                rest.setdefault(comm, []).append(ev)
    for kind, procs, why in (("dead", dead, "is considered dead (unreachable via the RAS network)"),
                             ("unresponsive", silent, "sent no communicator data (alive but not answering)")):
        for p in procs.values():
            lead = head.get("dead" if kind == "dead" else "incomplete")
            ranks = sorted(set(p.ranks))
            out.append(_rec(kind, ",".join(sorted(set(p.comms))) or "-", ranks, f"process {p.pid}", p.host, p.pid,
                            p.gpu, f"process {p.pid} on node {p.host} (GPU {p.gpu}"
                            + (f", rank {ranges(ranks, most=TEXT_MOST)}" if ranks else "") + f") {why}",
                            "", "peer_failure", ([lead] if lead else []) + p.evidence))
    for comm, lines in rest.items():
        ranks = sorted({e.comm_rank for e in lines if e.comm_rank is not None})
        hosts = sorted({e.peer_host for e in lines if e.peer_host})
        h = comm_head.get((comm, "INCOMPLETE"))
        out.append(_rec("missing", comm, ranks, f"rank {ranges(ranks, most=TEXT_MOST)}", ", ".join(hosts) or "?",
                        ",".join(sorted({str(e.peer_pid) for e in lines if e.peer_pid})) or "?",
                        ",".join(sorted({e.gpu for e in lines if e.gpu})) or "?",
                        f"communicator {comm} has no data from rank {ranges(ranks, most=TEXT_MOST)}", "",
                        "peer_failure",
                        ([h] if h else []) + lines))
    for (comm, coll), lines in outliers.items():
        major = max(counts.get((comm, coll), []), key=lambda e: e.count or 0, default=None)
        for ev in lines:
            if ev.comm_rank is None:
                continue
            if coll == "status":
                kind, detail = "status", f"rank {ev.comm_rank} has status {ev.status}"
            else:
                mine, theirs = ev.ops or 0, (major.ops if major is not None else None) or 0
                kind = "behind" if major is not None and mine < theirs else "ahead"
                detail = (f"rank {ev.comm_rank} has launched {coll} up to operation {mine}"
                          if mine else f"rank {ev.comm_rank} has launched no {coll} operation")
            others = ((f"{major.count} ranks have " + (f"status {major.status}" if coll == "status" else
                                                       f"launched up to operation {major.ops}"))
                      if major is not None else "")
            h = comm_head.get((comm, "MISMATCH"))
            out.append(_rec(kind, comm, [ev.comm_rank], f"rank {ev.comm_rank}", ev.peer_host or "?",
                            str(ev.peer_pid or "?"), ev.gpu or "?", detail, others,
                            "collective_desync" if kind != "status" else "collective_timeout",
                            [ev] + ([major] if major is not None else []) + ([h] if h else [])))
    for comm, lines in errors.items():
        for ev in lines:
            if ev.comm_rank is None:
                continue
            text = ev.status or "an error"
            cat = next((c for k, c in _ERROR_CATEGORY if k in text.lower()), "other")
            h = comm_head.get((comm, "ERROR"))
            out.append(_rec("error", comm, [ev.comm_rank], f"rank {ev.comm_rank}", ev.peer_host or "?",
                            str(ev.peer_pid or "?"), ev.gpu or "?", f"rank {ev.comm_rank} reported {text}", "", cat,
                            [ev] + ([h] if h else [])))
    return out


def _rec(kind: str, comm: str, ranks: list[int], who: str, host: str, pid: str, gpu: str, detail: str,
         others: str, category: str, evidence: Sequence[E.Event]) -> RasReported:
    return {"kind": kind, "comm": comm, "rank": ranks[0] if ranks else "?", "ranks": ranks, "who": who, "host": host,
            "pid": pid, "gpu": gpu, "detail": detail, "others": others or "-", "category": category,
            "evidence": list(evidence)}
