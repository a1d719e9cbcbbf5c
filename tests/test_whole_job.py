"""Whole-job diagnoses on generated multi-rank jobs (8 to 1,024 ranks, per-rank files).

The jobs come from bench/generate.py (real NCCL 2.18/2.23 and PyTorch 2.6 line formats);
its manifest says which rank and host the injected failure is on, and every assertion
checks that exact rank, host and sequence number.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from _jobs import generator  # the shared bench/generate.py loader (tests/_jobs.py)
from click.testing import CliRunner

from ncclsleuth.api import analyze
from ncclsleuth.cli import main

ROOT = Path(__file__).resolve().parent.parent


GEN = generator()


def make_job(tmp_path: Path, inject: str, ranks: int, version: str = "2.23", seed: int = 7) -> tuple[Path, dict]:
    out = tmp_path / f"{inject}-{ranks}"
    args = GEN.build_parser().parse_args(["--ranks", str(ranks), "--per-host", "8", "--channels", "4",
                                          "--inject", inject, "--nccl-version", version, "--seed", str(seed),
                                          "--out", str(out)])
    return out, GEN.generate(args)


def problems(report):
    return [f for f in report.findings if f.severity in ("warning", "error")]


@pytest.mark.parametrize("ranks,version", [(8, "2.23"), (32, "2.18"), (64, "2.23")])
def test_rank_that_missed_the_collective_is_named_first(tmp_path, ranks, version):
    job, man = make_job(tmp_path, "desync", ranks, version)
    (culprit,), (host,) = man["culprit_ranks"], man["culprit_hosts"]
    report = analyze([str(job)])
    top = report.findings[0]
    assert top.rule_id == "DESYNC002"
    assert (f"Rank {culprit} (host {host}) stopped at SeqNum 1244 while {ranks - 1} ranks reached 1245 (ALLREDUCE)"
            in top.message)
    assert f"[rank{culprit}]" in top.evidence[0].text
    timeout = next(f for f in report.findings if f.rule_id == "TIMEOUT001")
    assert timeout.caused_by == "DESYNC002"


@pytest.mark.parametrize("ranks", [16, 64])
def test_rank_that_never_arrived_at_init(tmp_path, ranks):
    job, man = make_job(tmp_path, "missing_rank", ranks)
    (culprit,), (host,) = man["culprit_ranks"], man["culprit_hosts"]
    report = analyze([str(job)])
    top = report.findings[0]
    assert top.rule_id == "INIT002"
    assert f"ranks {culprit} never logged Init START ({host}); {ranks - 1} ranks did" in top.message


def test_hundreds_of_scattered_ranks_missing_init_are_named_briefly(tmp_path):
    """Every fourth of 800 ranks never logs Init START: INIT002 names the first ranges and how many
    (before: all 200, a title of ~800 characters); the finding's evidence and category as before."""
    lines = [f"node{r // 8:03d}:{1000 + r}:{2000 + r} [{r % 8}] NCCL INFO ncclCommInitRank comm 0x55f6e5fc{r:04x} "
             f"rank {r} nranks 800 cudaDev {r % 8} nvmlDev {r % 8} busId {r % 8 + 1}a000 commId 0xb5ca0139f4c8d965 "
             "- Init START\n" for r in range(800) if r % 4 != 1]
    log = tmp_path / "init.log"
    log.write_text("".join(lines))
    top = analyze([str(log)]).findings[0]
    assert top.rule_id == "INIT002"
    assert top.title == ("Rank(s) 1,5,9,13,17,21,25,29,33,37,41,45,49,53,57,…,797 (200 in all) never started NCCL init; "
                         "the other 600 ranks wait for them")
    assert "ranks 1,5,9,13,17,21,25,29,33,37,41,45,49,53,57,…,797 (200 in all) never logged Init START" in top.message


def test_socket_fallback_minority_node(tmp_path):
    job, man = make_job(tmp_path, "socket_fallback", 32)
    (host,) = man["culprit_hosts"]
    report = analyze([str(job)])
    top = report.findings[0]
    assert (top.rule_id, top.category) == ("NET003", "socket_fallback")
    assert top.hosts == [host] and "other nodes of this job use NET/IB" in top.message


def test_wrong_interface_on_one_node(tmp_path):
    job, man = make_job(tmp_path, "wrong_iface", 32)
    (host,) = man["culprit_hosts"]
    report = analyze([str(job)])
    top = report.findings[0]
    assert (top.rule_id, top.hosts) == ("NET001", [host])
    assert "docker0" in top.title
    assert all(f.caused_by for f in report.findings if f.rule_id == "NET005")


def test_duplicate_gpu_ranks(tmp_path):
    job, man = make_job(tmp_path, "dup_gpu", 16)
    a, b = man["culprit_ranks"]
    report = analyze([str(job)])
    top = report.findings[0]
    assert top.rule_id == "DUP001"
    assert {f"rank {a}", f"rank {b}"} <= set(top.title.replace("(", "").replace(")", "").split(" and ")) or \
        (str(a) in top.title and str(b) in top.title)


@pytest.mark.parametrize("ranks,version", [(8, "2.18"), (64, "2.23")])
def test_healthy_multi_rank_jobs_raise_no_warning(tmp_path, ranks, version):
    job, _ = make_job(tmp_path, "none", ranks, version)
    report = analyze([str(job)])
    assert problems(report) == [], [f.title for f in problems(report)]
    assert report.unexplained_total == 0
    assert report.summary["ranks"] == ranks


def test_1024_rank_job_one_rank_missing_a_collective(tmp_path):
    job, man = make_job(tmp_path, "desync", 1024, seed=11)
    (culprit,), (host,) = man["culprit_ranks"], man["culprit_hosts"]
    report = analyze([str(job)])
    files = report.files_read
    assert files == 1024
    top = report.findings[0]
    assert top.rule_id == "DESYNC002"
    assert f"Rank {culprit} (host {host}) stopped at SeqNum 1244 while 1,023 ranks reached 1245" in top.message
    assert report.summary["ranks"] == 1024 and len(report.summary["hosts"]) == 128


def test_cli_prints_the_culprit_above_the_63_timeouts(tmp_path):
    job, man = make_job(tmp_path, "desync", 64)
    (culprit,) = man["culprit_ranks"]
    res = CliRunner().invoke(main, ["analyze", str(job), "--no-color"])
    assert res.exit_code == 1
    out = res.output
    assert out.index(f"Rank {culprit}") < out.index("timed out")
    data = json.loads(CliRunner().invoke(main, ["analyze", str(job), "--format", "json"]).output)
    assert [f["rule_id"] for f in data["findings"]][:2] == ["DESYNC002", "TIMEOUT001"]
    assert data["findings"][1]["evidence_total"] >= 63


def test_straggler_rank_on_16_rank_job(tmp_path):
    """Per-rank step times from the training loop's own lines; rank 11 is 25% slower."""
    for r in range(16):
        ms = 1250.0 if r == 11 else 1000.0
        lines = [f"[rank{r}]:iter {i}: loss 1.{i % 10}, time: {ms + (i * 7 + r) % 13:.1f}ms" for i in range(1, 60)]
        (tmp_path / f"node{r // 8}.{1000 + r}.log").write_text(
            f"node{r // 8}:{1000 + r}:{1000 + r} [{r % 8}] NCCL INFO ncclCommInitRank comm 0x{r + 1:x}0 rank {r} "
            f"nranks 16 cudaDev {r % 8} nvmlDev {r % 8} busId 18000 commId 0xabc - Init START\n"
            + "\n".join(lines) + "\n")
    report = analyze([str(tmp_path)])
    (f,) = [f for f in report.findings if f.rule_id == "STRAG001"]
    assert f.title.startswith("rank 11 (node1) is a straggler")
    assert "[rank11]:iter 1:" in f.evidence[0].text


def test_ras_dead_peer_named_by_its_host(tmp_path):
    """RAS names a peer by ip<port>; the finding names the host that owns that address."""
    (tmp_path / "node017.log").write_text(
        "node017:21345:21351 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.17<0>\n"
        "node017:21345:21420 [0] NCCL INFO RAS declaring peer 10.0.0.18<52401> as DEAD; rasDeadPeersHash 0x8c\n")
    (tmp_path / "node019.log").write_text(
        "node019:23001:23420 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.19<0>\n"
        "node019:23001:23420 [0] NCCL INFO RAS keep-alive timeout error (20s) on socket connection with 10.0.0.18<52401>\n")
    (tmp_path / "node018.log").write_text("node018:22001:22007 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.18<0>\n")
    report = analyze([str(tmp_path)])
    f = next(f for f in report.findings if f.rule_id == "RAS001")
    assert f.hosts == ["node018"]
    assert "node018" in f.title and "10.0.0.18<52401>" in f.title
    assert "node017, node019 (2 host(s))" in f.message
    assert (f.evidence[0].file.endswith("node017.log"), f.evidence[0].line) == (True, 2)  # the DEAD line first
    assert report.verdict is f


def test_pytorch_lines_get_the_host_of_their_file(tmp_path):
    """A watchdog line has no host; the NCCL lines of the same per-rank file do."""
    (tmp_path / "rank3.log").write_text(
        "node007:4242:4242 [3] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "[rank3]:[E1129 11:41:55.7 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600047 milliseconds "
        "before timing out.\n")
    (tmp_path / "mixed.log").write_text(  # two hosts in one file: no guess
        "nodeA:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nnodeB:2:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "[rank9]:[E1129 11:41:56.7 ProcessGroupNCCL.cpp:632] [Rank 9] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600047 milliseconds "
        "before timing out.\n")
    report = analyze([str(tmp_path / "rank3.log")])
    f = next(f for f in report.findings if f.rule_id == "TIMEOUT001")
    assert f.hosts == ["node007"] and f.message.startswith("rank 3 (node007): the watchdog")
    report = analyze([str(tmp_path / "mixed.log")])
    f = next(f for f in report.findings if f.rule_id == "TIMEOUT001")
    assert f.hosts == [] and f.message.startswith("rank 9: the watchdog")  # the rank, no guessed host
