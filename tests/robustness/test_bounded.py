"""Bounded resources: a huge repetitive log costs bounded memory and hides no distinct error.

The model keeps at most ``KEEP_PER_KIND`` events per kind and counts the rest in
``folded``.  The default run floods with KEEP_PER_KIND + 10000 lines; set
``NCCLSLEUTH_FLOOD_LINES=300000`` for the full-size check.
"""
from __future__ import annotations

import os
import re
import tracemalloc
from pathlib import Path

import pytest

from ncclsleuth import api
from ncclsleuth.model.job import KEEP_PER_KIND
from ncclsleuth.rules.loader import load_rules

N = int(os.environ.get("NCCLSLEUTH_FLOOD_LINES", str(KEEP_PER_KIND + 10_000)))
FLOOD = ("node1:100:100 [0] misc/socket.cc:540 NCCL WARN socketPollConnect: connect returned Connection refused, "
         "retrying\n")
HEAD = ["node1:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "node1:100:100 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, "
        "vendor err 129"]
TAIL = ["node1:100:100 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_modify_qp failed with error No such device",
        "node1:100:100 [0] enqueue.cc:1 NCCL WARN Cuda failure 700 an illegal memory access was encountered",
        "RuntimeError: NCCL communicator was aborted on rank 0.",
        "[rank0]:[E1129 11:41:55.585986114 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1245, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600047 milliseconds before timing out."]
DISTINCT = HEAD[1:] + TAIL


@pytest.fixture(scope="module")
def flood(tmp_path_factory) -> tuple[Path, object, int]:  # type: ignore[type-arg]
    p = tmp_path_factory.mktemp("flood") / "rank0.log"
    with open(p, "w") as fh:
        fh.write("\n".join(HEAD) + "\n")
        for _ in range(N // 1000):
            fh.write(FLOOD * 1000)
        fh.write("\n".join(TAIL) + "\n")
    rules, _ = load_rules()
    tracemalloc.start()
    try:
        report = api.analyze([str(p)], api.Options(rules=rules))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return p, report, peak


def test_peak_memory_bounded(flood):
    p, _, peak = flood
    # the kept events of the flood kind dominate: bounded by KEEP_PER_KIND, not by the file
    assert peak < 120 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB for {p.stat().st_size / 2**20:.0f} MiB of log"


def test_model_folds_beyond_keep_per_kind(flood):
    p, _, _ = flood
    model = api.build([str(p)]).model
    assert max(len(v) for v in model.events.values()) <= KEEP_PER_KIND
    assert sum(model.folded.values()) >= N - KEEP_PER_KIND


def _report_lines(report) -> set[int]:  # type: ignore[no-untyped-def]
    return {e.line for f in report.findings for e in f.evidence} | {e.line for e in report.unexplained}


def test_flood_line_reported(flood):
    _, report, _ = flood
    assert 3 in _report_lines(report) or any(f.evidence_total > len(f.evidence) for f in report.findings) \
        or report.unexplained_total > len(report.unexplained)


# The engine shows one unexplained line per distinct message shape first, so a flood of one
# WARN cannot push later, different errors out of the report.
_CASES = list(DISTINCT)


@pytest.mark.parametrize("msg", _CASES, ids=lambda m: re.sub(r"\W+", "_", m[:40]))
def test_every_distinct_error_in_report(flood, msg):
    _, report, _ = flood
    lineno = HEAD.index(msg) + 1 if msg in HEAD else len(HEAD) + N + TAIL.index(msg) + 1
    assert lineno in _report_lines(report), f"line {lineno} ({msg[:60]}) not in the report"
