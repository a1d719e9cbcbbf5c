"""Markdown (chat-ops) and Slack Block Kit: shape, limits, trimming."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _fixed import fixed_report  # noqa: E402

from ncclsleuth.renderers import render  # noqa: E402
from ncclsleuth.report import Evidence, Report  # noqa: E402


def big_report(n: int = 60, text_len: int = 5000) -> Report:
    base = fixed_report()
    f = base.findings[0]
    many = [replace(f, rule_id=f"R{i:03d}", title=f"Finding {i} " + "t" * 300, message="m" * text_len,
                    fix="\n".join(f"fix line {j} " + "x" * 80 for j in range(80)),
                    evidence=[Evidence("a.log", j, "e <&> " * 200) for j in range(10)], evidence_total=10)
            for i in range(n)]
    return Report(findings=many, unexplained=base.unexplained, summary=base.summary, unexplained_total=1)


# ----------------------------------------------------------------------------- markdown


def test_markdown_first_line_is_the_verdict() -> None:
    first = render("markdown", fixed_report()).splitlines()[0]
    for word in ("ERROR", "ib_link_error", "gpu-node-06", "44", "IB transport retries exhausted"):
        assert word in first


def test_markdown_top3_with_evidence_and_fenced_fix() -> None:
    text = render("markdown", fixed_report())
    assert "**1. [IB003]" in text and "**2. [INITT002]" in text and "**3. [CUDA001]" in text
    assert "`rank-44.log:10`" in text.replace("job/", "")
    assert "```\nTest the fabric outside NCCL" in text
    assert "~~~\nexport NCCL_SOCKET_IFNAME=ib0" in text  # a fix holding ``` gets a ~~~ fence
    assert text.rstrip().splitlines()[-1].startswith("**Job:** 64 ranks on 8 hosts · NCCL 2.21.5 · network IB")


def test_markdown_max_findings() -> None:
    text = render("markdown", fixed_report(), max_findings=1)
    assert "**2." not in text and "2 more findings" in text


@pytest.mark.parametrize("limit", [300, 800, 1500, 4000])
def test_markdown_max_chars(limit: int) -> None:
    text = render("markdown", big_report(), max_chars=limit)
    assert len(text) <= limit
    assert "left out" in text
    assert text.startswith("\U0001f534 **ERROR")
    assert text.count("```") % 2 == 0  # no fence left open


def test_markdown_no_findings() -> None:
    rep = Report(findings=[], unexplained=[], summary={"hosts": [], "files": 1, "lines": 3})
    assert render("markdown", rep).startswith("\u2705 **OK**")


# ----------------------------------------------------------------------------- slack

ALLOWED = {"header", "section", "divider", "context"}


def check_blocks(payload: dict, max_chars: int | None = None) -> None:
    assert set(payload) == {"blocks"}
    blocks = payload["blocks"]
    assert 1 <= len(blocks) <= 50
    total = 0
    for b in blocks:
        assert b["type"] in ALLOWED
        if b["type"] == "header":
            assert b["text"]["type"] == "plain_text"
            assert 0 < len(b["text"]["text"]) <= 150
            total += len(b["text"]["text"])
        elif b["type"] == "section":
            assert b["text"]["type"] == "mrkdwn"
            assert 0 < len(b["text"]["text"]) <= 3000
            total += len(b["text"]["text"])
            assert b["text"]["text"].count("```") % 2 == 0
        elif b["type"] == "context":
            assert 1 <= len(b["elements"]) <= 10
            for e in b["elements"]:
                assert e["type"] == "mrkdwn" and 0 < len(e["text"]) <= 3000
                total += len(e["text"])
        else:
            assert set(b) == {"type"}
    if max_chars is not None:
        assert total <= max_chars


def test_slack_fixed_report_is_valid_block_kit() -> None:
    payload = json.loads(render("slack", fixed_report()))
    check_blocks(payload, 4000)
    blocks = payload["blocks"]
    assert blocks[0]["type"] == "header" and blocks[0]["text"]["text"].startswith("ERROR: IB transport")
    text = json.dumps(payload)
    assert "10.0.0.17&lt;51234&gt;" in text  # mrkdwn control characters escaped
    assert "gpu-node-06" in blocks[1]["text"]["text"]


@pytest.mark.parametrize("limit", [600, 2000, 4000, 12000])
def test_slack_limits_on_a_huge_report(limit: int) -> None:
    payload = json.loads(render("slack", big_report(), max_chars=limit, max_findings=60))
    check_blocks(payload, limit)
    assert "left out" in json.dumps(payload)


def test_slack_no_findings() -> None:
    rep = Report(findings=[], unexplained=[], summary={"hosts": [], "files": 1, "lines": 3})
    check_blocks(json.loads(render("slack", rep)))
