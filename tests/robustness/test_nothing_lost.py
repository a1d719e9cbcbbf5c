"""Nothing lost: every problem line of every real log is in the JSON report.

A line carrying an NCCL ``WARN``, a Python exception, a watchdog timeout or an
error-level PyTorch / logging record must appear, with its file and line number, either
as evidence of a finding or under ``unexplained``.  A finding shows at most ``limit``
evidence lines but explains them all; where ``evidence_total`` exceeds what is shown, a
line whose text equals a shown evidence line modulo digits counts as explained (the
report has no full ``explained_lines`` list yet).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _corpus import log_files
from click.testing import CliRunner

from ncclsleuth.cli import main

PROBLEM = [
    ("nccl_warn", re.compile(r"\bNCCL WARN\b")),
    ("exception", re.compile(r"^\s*(?:\w+\.)*\w*(?:Error|Exception)\b:")),
    ("watchdog", re.compile(r"Watchdog caught collective operation timeout")),
    ("glog_error", re.compile(r"(?:^|[\]:\s])\[?E\d{4} \d\d:\d\d:\d\d")),
    ("error_level", re.compile(r"(?:^|[\s\]:|])(?:ERROR|CRITICAL|FATAL)(?::|\]| - | +\S)")),
]
_DIGITS = re.compile(r"\d+")
LOGS = log_files()


def problem_lines(path: Path) -> list[tuple[int, str, str]]:
    out = []
    text = path.read_bytes().decode("utf-8", "replace")
    for n, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        for why, rx in PROBLEM:
            if rx.search(line):
                out.append((n, why, line))
                break
    return out


def report_of(path: Path) -> dict:  # type: ignore[type-arg]
    res = CliRunner().invoke(main, ["analyze", str(path), "--format", "json", "--fail-on", "never"])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.stderr
    return json.loads(res.stdout)


def missing_lines(path: Path) -> list[str]:
    want = problem_lines(path)
    if not want:
        return []
    d = report_of(path)
    shown: set[tuple[str, int]] = set()
    shapes: set[str] = set()
    for f in d["findings"]:
        for e in f["evidence"]:
            shown.add((e["file"], e["line"]))
        if f["evidence_total"] > len(f["evidence"]):
            shapes |= {_DIGITS.sub("#", e["text"]) for e in f["evidence"]}
    for e in d["unexplained"]:
        shown.add((e["file"], e["line"]))
    if d["unexplained_total"] > len(d["unexplained"]):
        shapes |= {_DIGITS.sub("#", e["text"]) for e in d["unexplained"]}
    return [f"{path}:{n} [{why}] {line[:160]}" for n, why, line in want
            if (str(path), n) not in shown and _DIGITS.sub("#", line.strip()) not in {s.strip() for s in shapes}]


def test_corpus_present():
    if not LOGS:
        pytest.skip("no fixtures or shared corpus")
    assert len(LOGS) > 20


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_every_problem_line_reported(path):
    lost = missing_lines(path)
    assert not lost, "lines not in the report:\n" + "\n".join(lost)


GLUED = ("node1:11:11 [0] misc/socket.cc:540 NCCL WARN socketPollConnect: connect returned Connection refused"
         "node2:22:22 [1] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, "
         "len 0, vendor err 129")


def test_glued_records_both_recovered(tmp_path):
    p = tmp_path / "glued.log"
    p.write_text("start\n" + GLUED + "\n")
    res = CliRunner().invoke(main, ["parse", str(p)])
    evs = [json.loads(ln) for ln in res.stdout.splitlines()]
    on2 = [e for e in evs if e["line"] == 2]
    # nothing separates the records, so where the second host name starts is a guess
    assert sorted(e["host"] for e in on2)[0] == "node1" and sorted(e["host"] for e in on2)[1].endswith("node2"), on2
    assert {e["kind"] for e in on2} >= {"ib_completion_error"}
    assert all(e["level"] == "WARN" for e in on2)
    d = report_of(p)
    lines = {(e["file"], e["line"]) for f in d["findings"] for e in f["evidence"]} | \
            {(e["file"], e["line"]) for e in d["unexplained"]}
    assert (str(p), 2) in lines


def test_glued_mpi_tagged_ranks_both_recovered(tmp_path):
    p = tmp_path / "mpi.log"
    p.write_text("[1,0]<stdout>:node1:11:11 [0] NCCL WARN first problem here"
                 "[1,1]<stdout>:node2:22:22 [1] NCCL WARN second problem here\n")
    res = CliRunner().invoke(main, ["parse", str(p)])
    evs = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert sorted((e["host"], e["rank"]) for e in evs) == [("node1", 0), ("node2", 1)]
