"""``ncclras`` status reports (NCCL 2.24+) as inputs: saved to a file or pasted."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from ncclsleuth import api
from ncclsleuth.ingest.dumps import sniff_bytes
from ncclsleuth.parse.rasreport import RasReportParser

ROOT = Path(__file__).resolve().parent.parent
RAS = ROOT / "fixtures" / "ras"
TSV = ROOT.parent / "shared" / "reference" / "nccl" / "unprefixed_prints.tsv"

#: file -> [(rule, ranks, hosts, an evidence line)]
CASES = {
    "dead-process.txt": [("RAS002", [29], ["10.0.0.4"], 23)],
    "rank-behind.txt": [("RAS003", [12], ["node-b"], 28)],
    "async-error-2.24.txt": [("RAS002", [9], [], 23), ("RAS004", [7], ["gpu-a01"], 27)],
    "healthy.txt": [],
    "dead-and-behind-2.28.json": [("RAS002", [9], ["gpu-b02"], 333), ("RAS003", [3], ["gpu-a01"], 79),
                                  ("RAS004", [5], ["gpu-a01"], 121)],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_reports(name):
    report = api.analyze([str(RAS / name)])
    got = [(f.rule_id, f.ranks, f.hosts) for f in report.findings]
    assert got == [c[:3] for c in CASES[name]]
    for f, (_, _, _, line) in zip(report.findings, CASES[name]):
        assert line in [e.line for e in f.evidence]
    assert report.unexplained == []  # every problem line of the report is accounted for


def test_the_message_names_the_process_and_what_the_others_did():
    dead = api.analyze([str(RAS / "dead-process.txt")]).findings[0]
    assert dead.title == ("NCCL RAS: process 3487984 on node 10.0.0.4 (GPU 5, rank 29) is considered dead "
                          "(unreachable via the RAS network)")
    behind = api.analyze([str(RAS / "rank-behind.txt")]).findings[0]
    assert "rank 12 has launched AllReduce up to operation 6649 while 31 ranks have launched up to operation " \
           "6650 (process 2596141 on node-b, GPU 4)" in behind.message


def test_a_pasted_report_with_markdown_quotes(monkeypatch):
    text = "\n".join("> " + ln for ln in (RAS / "rank-behind.txt").read_text().splitlines())
    report = api.analyze(api.memory_sources({"paste.md": text}))
    assert [(f.rule_id, f.ranks) for f in report.findings] == [("RAS003", [12])]


def test_a_report_is_recognised_by_its_first_lines():
    assert sniff_bytes(b"NCCL version 2.26.2+cuda12.8 compiled with CUDA 12.8\n") == "ras"
    assert sniff_bytes(b"\nErrors\n======\n\nDEAD\n") == "ras"
    assert sniff_bytes(b"#0-0 (27a079b828ff1a75) INCOMPLETE\n") == "ras"
    assert sniff_bytes(b"node1:1:1 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n") is None
    assert sniff_bytes(b"Errors in epoch 3\n") is None


def test_the_report_and_the_logs_together():
    log = ("node017:21345:21351 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.17<0>\n"
           "node004:31345:31351 [5] NCCL INFO Bootstrap : Using ib0:10.0.0.4<0>\n"
           "node017:21345:21420 [0] NCCL INFO RAS declaring peer 10.0.0.4<52401> as DEAD; rasDeadPeersHash 0x8c1\n")
    report = api.analyze(api.memory_sources({"rank0.log": log,
                                             "ncclras.txt": (RAS / "dead-process.txt").read_text()}))
    ids = [f.rule_id for f in report.findings]
    assert "RAS001" in ids and "RAS002" in ids
    hosts = {f.rule_id: f.hosts for f in report.findings}
    assert hosts["RAS001"] == ["node004"] and hosts["RAS002"] == ["10.0.0.4"]


def _filled(fmt: str) -> str:
    """A format string of the report with sample values (%d -> 3, %s -> a word, %ld -> 6650)."""
    out = fmt.replace("\\n", "\n")
    for ctx, val in (("GPU%s %s", "GPUs 4,5"), ("GPU %s", "GPU 5"), ("node %s", "node 10.0.0.4"),
                     ("process%s considered", "processes are considered"), ("process%s\n", "processes\n"), ("ranks: %s", "ranks: 9,12"),
                     ("rank%s: %s", "rank: 9"), ("status %s", "status RUNNING"),
                     ("reported %s", "reported internal error"),
                     ("different %s operation", "different AllReduce operation"), ("Rank %s", "Rank 3,5")):
        out = out.replace(ctx, val)
    out = re.sub(r"(rank|process|error|timeout)%s", r"\1s", out)  # the plural suffix
    out = re.sub(r"%(?:\d+)?l?d", "3", out)
    out = re.sub(r"%(?:\d+)?s", "INCOMPLETE", out)
    out = re.sub(r"%016lx", "27a079b828ff1a75", out)
    return re.sub(r"%\.\d+f", "0.01", out)


#: the report lines the parser gives meaning to (the others are layout: table heads, banners)
MEANT = ("Rank %d", "ranks have", "ranks reported", "Process %d on node", "considered dead",
         "Missing communicator data", "#%d-%d (%016lx)", "Communicator ranks have different", "error%s on",
         "communication timeout", "The missing rank", "The unknown ranks")


@pytest.mark.skipif(not TSV.exists(), reason="needs ../shared/reference/nccl/unprefixed_prints.tsv")
def test_every_report_line_of_every_release_that_means_something_is_read():
    rows = [r for r in csv.DictReader(TSV.open(encoding="utf-8"), delimiter="\t") if r["stream"] == "ncclras-report"]
    meant = [r["format"] for r in rows if any(k in r["format"] for k in MEANT)]
    assert len(meant) >= 25
    missed = []
    for fmt in meant:
        p = RasReportParser("r")
        lines = [ln for ln in _filled(fmt).split("\n") if ln.strip()]
        kinds = [e.what for i, ln in enumerate(lines) for e in p.line(i + 1, ln)]
        if not kinds or "heading" in kinds:
            missed.append(fmt)
    assert not missed, missed
