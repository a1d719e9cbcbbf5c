"""A big job's counts read with thousands separators in the reports people read (the summary's
communicators, the evidence lines past those shown), as the summary's other counts do."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _fixed import fixed_report  # noqa: E402

from ncclsleuth.model.stats import counted  # noqa: E402
from ncclsleuth.renderers import comm_counts, render  # noqa: E402


def _big() -> object:
    report = fixed_report()
    c = report.summary["communicators"][0]
    c.update(nranks=8000, ranks_seen=8000, init_complete=7999, transports={"NET/IB": 48000, "P2P": 167832})
    report.findings[0].evidence_total = 23905  # 2 shown
    return report


@pytest.mark.parametrize("fmt,more", [("terminal", "... 23,903 more lines (see --format json)"),
                                      ("markdown", "- _… 23,903 more lines_"),
                                      ("html", "… 23,903 more lines")])
def test_counts_of_a_big_job_have_separators(fmt: str, more: str) -> None:
    """Before: ``8000/8000 ranks, 7999 init complete`` and ``23903 more lines``."""
    opts = {"postmortem": True} if fmt == "markdown" else {}
    text = render(fmt, _big(), color=False, width=120, **opts) if fmt == "terminal" else render(fmt, _big(), **opts)
    assert "8,000/8,000 ranks, 7,999 init complete" in text
    assert more in text
    assert "8000/8000" not in text and "23903" not in text
    if fmt == "html":
        assert "NET/IB 48,000, P2P 167,832" in text


def test_json_keeps_the_numbers() -> None:
    text = render("json", _big())
    assert '"ranks_seen": 8000' in text and '"init_complete": 7999' in text and '"evidence_total": 23905' in text


def test_comm_counts_and_counted() -> None:
    assert comm_counts({"ranks_seen": 12, "nranks": None, "init_complete": 0}) == "12 ranks, 0 init complete"
    assert comm_counts({"ranks_seen": 1000, "nranks": 1024, "init_complete": 1000}) == \
        "1,000/1,024 ranks, 1,000 init complete"
    assert counted(1, "more line") == "1 more line" and counted(1234, "more line") == "1,234 more lines"
    assert counted(0, "file") == "0 files" and counted(992031, "line") == "992,031 lines"


def test_chat_summary_line_and_slack_counts() -> None:
    """Before: ``8000 ranks on 1000 hosts · ... · 1 files / 992031 lines`` and ``23904 more evidence lines``."""
    from ncclsleuth.renderers.markdown import summary_line

    report = _big()
    report.summary.update(ranks=8000, hosts=[f"node{i:04d}" for i in range(1000)], files=1, lines=992031,
                          network={"IB": [f"node{i:04d}" for i in range(1000)]})
    line = summary_line(report.summary)
    assert line.startswith("8,000 ranks on 1,000 hosts · ")
    assert "network IB (1,000 hosts)" in line and line.endswith("1 file / 992,031 lines")
    assert "… 23,904 more evidence lines" in render("slack", report)
    assert "… 23,904 more evidence lines" in render("markdown", _big())  # one line shown in chat
