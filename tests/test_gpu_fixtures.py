"""The real GPU captures (fixtures/gpu): each case's verdict, as its case.yaml says.

They are the only logs here that NCCL itself wrote on a GPU (2.28.9 under torch 2.11): a
healthy run must stay quiet, a failure must be named by the rule and category case.yaml
gives, with the culprit rank where the case has one, and no problem line may be left
unexplained."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from ncclsleuth.api import events
from ncclsleuth.cli import main

GPU = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
CASES = sorted(p.parent.name for p in GPU.glob("*/case.yaml"))


def _analyze(case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = yaml.safe_load((GPU / case / "case.yaml").read_text())
    paths = spec["analyze"] if isinstance(spec["analyze"], list) else [spec["analyze"]]
    res = CliRunner().invoke(main, ["analyze", *[str(GPU / case / p) for p in paths], "--format", "json",
                                    "--fail-on", "never"])
    assert res.exit_code == 0, res.output
    return spec, json.loads(res.output)


def test_every_case_is_here():
    assert len(CASES) == 19


@pytest.mark.parametrize("case", CASES)
def test_verdict(case: str) -> None:
    spec, report = _analyze(case)
    want = spec["expect"]
    problems = [f for f in report["findings"] if f["severity"] in ("error", "warning")]
    assert report["unexplained"] == []
    if want.get("healthy"):
        assert [(f["rule_id"], f["title"]) for f in problems] == []
        return
    top = problems[0]
    assert (top["rule_id"], top["category"]) == (want["rule"], want["category"])
    if "ranks" in want:
        assert top["ranks"] == want["ranks"]
    assert top["evidence"], top


def test_no_duplicate_gpu_where_nccl_took_the_ranks_for_two_hosts() -> None:
    """Both ranks print busId 60 on host vm; NCCL_HOSTID made them two hosts to NCCL."""
    for case in ("healthy-2host-socket", "bogus-settings", "hang-timeout-fr", "size-mismatch-detail"):
        _, report = _analyze(case)
        assert "DUP001" not in [f["rule_id"] for f in report["findings"]], case


def test_duplicate_gpu_names_both_ranks_and_the_nccl_warning() -> None:
    _, report = _analyze("dup-gpu")
    dup = next(f for f in report["findings"] if f["rule_id"] == "DUP001")
    assert any("Duplicate GPU detected : rank" in e["text"] for e in dup["evidence"])


def test_killed_peer_is_not_called_a_clean_exit() -> None:
    """NCCL's 'Connection closed by remote peer' after a SIGKILL: the rank ended, not left early."""
    _, report = _analyze("killed-rank-socket")
    ids = [f["rule_id"] for f in report["findings"]]
    assert "DESYNC006" not in ids
    peer = report["findings"][0]
    assert peer["rule_id"] == "PEER001" and "ended first" in peer["title"]
    assert [e["text"] for e in peer["evidence"]][0] == "rank 1: step 5: SIGKILL to myself"


def test_init_hang_names_the_rank_that_never_entered_nccl() -> None:
    _, report = _analyze("init-hang-killed")
    top = report["findings"][0]
    assert top["rule_id"] == "INIT002"
    texts = [e["text"] for e in top["evidence"]]
    assert "[default1]:rank 1: step 0: sleeping 90 s" in texts
    assert any("Init START" in t for t in texts)


def test_every_nccl_tests_row_is_read() -> None:
    """nccl-tests 2.19.6 prints numbers that do not fit a column with fewer decimals
    ("1493.5", "16265"): every row of the table is an event, none is left as text."""
    spec, _ = _analyze("nccl-tests-1gpu")
    rows = [ev for ev in events([str(GPU / "nccl-tests-1gpu" / p) for p in spec["analyze"]])
            if ev.kind == "nccltests_row"]
    assert len(rows) == spec["expect"]["nccltests_rows"]
    assert max(r.ip_algbw or 0 for r in rows) == 102511.0
