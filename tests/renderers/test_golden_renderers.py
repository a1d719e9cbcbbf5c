"""Golden files for every renderer on a fixed Report; UPDATE_GOLDEN=1 rewrites them."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _fixed import fixed_figures, fixed_report  # noqa: E402

from ncclsleuth.renderers import RENDERERS, render  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"

CASES = {
    "terminal.txt": lambda: render("terminal", fixed_report(), color=False, width=100),
    "terminal_piped.txt": lambda: render("terminal", fixed_report(), color=False),
    "json.json": lambda: render("json", fixed_report()),
    "markdown.md": lambda: render("markdown", fixed_report()),
    "markdown_short.md": lambda: render("markdown", fixed_report(), max_chars=700),
    "markdown_postmortem.md": lambda: render("markdown", fixed_report(), postmortem=True, figures=fixed_figures()),
    "slack.json": lambda: render("slack", fixed_report()),
    "html.html": lambda: render("html", fixed_report(), figures=fixed_figures()),
    "html_nofigures.html": lambda: render("html", fixed_report()),
}


def test_every_renderer_has_a_golden() -> None:
    covered = {name.split(".")[0].split("_")[0] for name in CASES}
    assert set(RENDERERS) <= covered


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    text = CASES[name]()
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; if intended: UPDATE_GOLDEN=1 pytest {__file__}"


def test_renderers_are_pure() -> None:
    """Rendering twice gives the same text and leaves the Report untouched."""
    rep = fixed_report()
    before = rep.to_dict()
    for fmt in RENDERERS:
        assert render(fmt, rep) == render(fmt, rep)
    assert rep.to_dict() == before


def test_a_thousand_hosts_and_communicators_are_counted_not_listed() -> None:
    """The summary of the 8k job: 1,000 hosts on one network, 1,001 communicators (the summary keeps
    32). The terminal names 4 hosts and 4 communicators, the post-mortem 8 hosts and its 32, each
    with how many more (before: every host in one Markdown cell, 9 KB; no word of the others)."""
    report = fixed_report()
    comms = report.summary["communicators"]
    report.summary = {**report.summary, "network": {"IB": [f"node{i:03d}" for i in range(1000)]},
                      "communicators": [dict(comms[0], comm=f"0x{i:016x}") for i in range(32)],
                      "communicators_total": 1001}
    term = render("terminal", report, color=False, width=100)
    assert "IB: node000, node001, node002, node003 and 996 more" in term
    assert term.count("comm 0x") == 4 and "… and 997 more communicators" in term
    md = render("markdown", report, postmortem=True, figures=fixed_figures())
    assert "| network IB | node000, node001, node002, node003, node004, node005, node006, node007 and 992 more |" in md
    assert md.count("| comm `0x") == 32 and "| | … and 969 more communicators |" in md and "node008" not in md
    page = render("html", report, figures=fixed_figures())
    assert "<tr><th></th><td>… and 969 more communicators</td></tr>" in page


def test_a_big_jobs_counts_have_thousands_separators() -> None:
    report = fixed_report()
    report.summary = {**report.summary, "ranks": 8000, "lines": 992031, "files": 16384,
                      "hosts": [f"node{i:04d}" for i in range(1000)], "nccl_versions": {"2.23.4": 8000}}
    term = render("terminal", report, color=False, width=100)
    assert "16,384 / 992,031" in term and "8,000 / 1,000" in term and "2.23.4 (8,000)" in term
    md = render("markdown", report, postmortem=True, figures=fixed_figures())
    assert "| ranks / hosts | 8,000 / 1,000 |" in md and "| files / lines | 16,384 / 992,031 |" in md
    assert "| NCCL | 2.23.4 (8,000) |" in md
    page = render("html", report, figures=fixed_figures())
    assert "<td>8,000 / 1,000</td>" in page and "<td>16,384 / 992,031</td>" in page
    assert "2.23.4 (8,000 processes)" in page
