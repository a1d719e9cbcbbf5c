"""Nothing lost: every problem line of every real log is in the JSON report.

A line the input marks as a problem (an NCCL ``WARN``, a Python exception, a watchdog
timeout, an error-level PyTorch / logging / vLLM record, glog's ``E``, Slurm's ``error:``,
the C++ runtime's ``terminate called``, a bare ``Call to ibv_* failed``) must appear, with
its file and line number, as evidence of a finding, among the lines a finding explains
(``explained_lines``) or under ``unexplained``; where ``unexplained_total`` exceeds what
is shown, a line whose text equals a shown one modulo digits counts as shown.

Over every fixture log and the shared corpus (``../shared/corpus``).  Without the corpus
the corpus cases are skipped on a workstation, but a CI run (``CI=true``) fails: a check
that silently shrinks is no check.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _corpus import CORPUS, log_files
from click.testing import CliRunner
from conftest import require_shared

from ncclsleuth.cli import main

PROBLEM = [
    ("nccl_warn", re.compile(r"\bNCCL WARN\b")),
    ("exception", re.compile(r"^\s*(?:\[[\w|]+\]:)*\s*(?:\w+\.)*\w*(?:Error|Exception)\b:")),
    ("watchdog", re.compile(r"Watchdog caught collective operation timeout")),
    ("glog_error", re.compile(r"(?:^|[\]:\s])\[?[EF]\d{4} \d\d:\d\d:\d\d|(?:^|[\]:\s])\[[EF] [\w.]+:\d+\]")),
    ("error_level", re.compile(r"(?:^|[\s\]:|)])(?:ERROR|CRITICAL|FATAL)(?::|\]| - | +\S)")),
    ("slurm_error", re.compile(r"\b(?:srun|slurmstepd): error: ")),
    ("terminate", re.compile(r"\bterminate called (?:after throwing|recursively|without an active)")),
    ("ibv_failed", re.compile(r"\bCall to ibv_\w+ failed")),
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
        shown |= {(file, n) for file, lines in f["explained_lines"].items() for n in lines}
    for e in d["unexplained"]:
        shown.add((e["file"], e["line"]))
    if d["unexplained_total"] > len(d["unexplained"]):
        shapes |= {_DIGITS.sub("#", e["text"]) for e in d["unexplained"]}
    return [f"{path}:{n} [{why}] {line[:160]}" for n, why, line in want
            if (str(path), n) not in shown and _DIGITS.sub("#", line.strip()) not in {s.strip() for s in shapes}]


def test_corpus_present():
    """The fixtures are always there; the shared corpus must be when CI runs."""
    assert len([p for p in LOGS if CORPUS not in p.parents]) > 150
    require_shared(CORPUS / "cases", "the shared corpus")
    assert len([p for p in LOGS if CORPUS in p.parents]) >= 70


MARKED = """\
(VllmWorker rank=0 pid=11) ERROR 08-01 10:00:00 [multiproc_executor.py:464] WorkerProc hit an exception.
(VllmWorker TP1 pid=12) ERROR 08-01 10:00:00 [multiproc_executor.py:464] RuntimeError: CUDA error: an illegal memory access
srun: error: node12: task 3: Aborted (core dumped)
slurmstepd: error: *** JOB 123 ON node1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***
terminate called after throwing an instance of 'c10::DistBackendError'
Call to ibv_create_cq failed
[default3|3]:[rank3]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete
"""


def test_lines_lost_before_reach_the_report(tmp_path):
    """Kinds of problem lines that reached no part of the report (issue 17): each is reported now."""
    p = tmp_path / "marked.log"
    p.write_text(MARKED)
    assert len(problem_lines(p)) == len(MARKED.splitlines())  # the detector sees every one
    lost = missing_lines(p)
    assert not lost, "\n".join(lost)


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
