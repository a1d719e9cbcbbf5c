"""The HTML post-mortem: self-contained, pictures present, renders in headless Chromium."""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclsleuth import api
from ncclsleuth.cli import main
from ncclsleuth.renderers import render

ROOT = Path(__file__).resolve().parents[2]
JOB64 = ROOT / "fixtures" / "report" / "job64"


@pytest.fixture(scope="module")
def job64_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pm") / "postmortem.html"
    res = CliRunner().invoke(main, ["report", str(JOB64), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_figures_of_the_64_rank_job() -> None:
    report = api.analyze([str(JOB64)], api.Options(with_figures=True))
    figures = report.figures
    assert report.files_read == 64 and figures is not None
    comm = figures["comms"][0]
    assert comm["nranks"] == 64 and len(comm["ranks"]) == 64
    assert comm["rings"][0][1] == list(range(64))
    kinds = {h["transport"] for h in comm["hops"]}
    assert kinds == {"P2P", "NET/IB"}
    assert comm["rank_host"]["44"] == "gpu-node-06"
    assert len(figures["init"]) == 64
    slow = max(figures["init"], key=lambda r: r["duration"])
    assert slow["host"] == "gpu-node-06" and dict(slow["phases"])["bootstrap"] > 20
    assert report.verdict is not None and "gpu-node-06" in report.verdict.hosts


def test_html_is_self_contained(job64_html: Path) -> None:
    text = job64_html.read_text(encoding="utf-8")
    low = text.lower()
    for bad in ("<script", "<link", "<img", "<iframe", "@import", "url(", " src=", " href=", "@font-face"):
        assert bad not in low, bad
    assert text.count("<svg") == 2  # ring + timeline
    for part in ("Findings", "Job summary", "Topology", "Init timeline", "Unexplained warnings",
                 "GID table change", "slowest: rank 4", "NET/IB (RDMA)", "P2P / NVLink", "gpu-node-06"):
        assert part in text, part
    # the top finding's host is drawn in the highlight colour
    assert re.search(r'fill="#d32f2f" font-weight="700">gpu-node-06<', text)


def test_markdown_postmortem_has_mermaid(tmp_path: Path) -> None:
    out = tmp_path / "pm.md"
    res = CliRunner().invoke(main, ["report", str(JOB64), "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text(encoding="utf-8")
    assert "```mermaid\ngraph LR" in text and "```mermaid\ngantt" in text
    assert "class g5 hot" in text  # gpu-node-06 highlighted in the ring
    assert ":crit, " in text  # slowest rank marked in the gantt
    assert "## Unexplained warnings" in text


def test_html_without_figures_says_so() -> None:
    report = api.analyze([str(JOB64)])
    assert report.figures is None and "No topology data" in render("html", report)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _run_chromium(exe: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                               "--disable-component-update", "--disable-sync", "--no-first-run",
                               f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)


def test_html_renders_in_headless_chromium(job64_html: Path, tmp_path: Path) -> None:
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium not installed (apt-get install -y chromium); HTML screenshot check skipped")
    png = tmp_path / "out.png"
    res = _run_chromium(exe, "--enable-logging=stderr", "--v=0", f"--screenshot={png}", "--window-size=1400,2000",
                        job64_html.as_uri())
    assert png.exists(), res.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000, "screenshot is nearly empty"
    bad = [ln for ln in res.stderr.splitlines() if "Uncaught" in ln or "ERROR:CONSOLE" in ln or ":CONSOLE(" in ln]
    assert not bad, bad
    dom = _run_chromium(exe, "--dump-dom", job64_html.as_uri())
    assert "<svg" in dom.stdout and "Init timeline" in dom.stdout and "slowest: rank" in dom.stdout


def test_report_takes_jobs_and_writes_the_same_post_mortem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ncclsleuth.parallel.local as local

    monkeypatch.setattr(local, "PARALLEL_MIN_BYTES", 0)  # really fork workers on this 64-file job
    out = {}
    for jobs in ("1", "2"):
        res = CliRunner().invoke(main, ["report", str(JOB64), "--format", "markdown", "--jobs", jobs])
        assert res.exit_code == 0, res.output
        out[jobs] = res.output
    assert out["1"] == out["2"] and "```mermaid" in out["1"]
