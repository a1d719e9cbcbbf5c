"""The HTML post-mortem: self-contained, pictures present, renders in headless Chromium."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
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


def test_an_evidence_line_of_every_rank_is_cut(tmp_path: Path) -> None:
    """PyTorch prints some lists of every rank on one line (the desync report's ``started ranks``:
    46 KB at 8,000 ranks, 68% of the 8k job's post-mortem): the page shows its first 1,000
    characters, as the terminal and Markdown show 400, with its line number."""
    ranks = "[" + ", ".join(map(str, range(8000))) + "]"
    log = tmp_path / "job.log"
    log.write_text("".join(
        f"[rank{r}]:[E1129 11:41:55.056547440 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1245, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
        "Timeout(ms)=600000) ran for 600047 milliseconds before timing out." + (f" started ranks: {ranks}" if not r else "")
        + "\n" for r in range(16)))
    report = api.analyze([str(log)])
    assert len(report.findings[0].evidence[0].text) > 40_000
    page = render("html", report)
    code = re.search(r'job\.log:1</code><code>([^<]*)</code>', page)
    assert code is not None and len(code.group(1)) <= 1000 and code.group(1).endswith(" …")
    assert ", 150, " in code.group(1) and "7999" not in page and len(page) < 10_000


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


# ----------------------------------------------------------------------------- the post-mortem as people see it

DESYNC = ROOT / "fixtures" / "examples" / "desync-16"


def _page(tmp: Path, job: Path, name: str) -> tuple[Path, str]:
    out = tmp / f"{name}.html"
    res = CliRunner().invoke(main, ["report", str(job), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out, out.read_text(encoding="utf-8")


def test_header_culprit_rank_and_hang_timeline_of_a_desync(tmp_path: Path) -> None:
    _, text = _page(tmp_path, DESYNC, "desync")
    head = text.split('<header class="pm">')[1].split("</header>")[0]
    assert "<b>Job failed:</b> Nov 29 11:41:55.747 (first error line)" in head
    assert "<b>ncclsleuth</b> 0.1.0" in head and "fixtures/examples/desync-16" in head
    assert "<b>Command:</b> <code>ncclsleuth report" in head
    ring = text.split("<h2>Topology</h2>")[1].split("</svg>")[0]
    assert ring.count('fill="#ffcdd2"') == 1  # rank 4 alone, not its whole host
    assert "culprit: rank 4" in ring and 'stroke="#d32f2f" stroke-width="6"' not in ring
    assert "<h2>Last collective per rank</h2>" in text and "<h2>Init timeline</h2>" not in text
    assert "completed #1244, never started #1245" in text
    assert "×15, ranks 0-3, 5-15" in text  # 15 watchdog lines, one line with its count and ranks
    for url in re.findall(r"References: (.*?)</p>", text):
        assert "shared/" not in url
    assert all(u.startswith("https://") for u in re.findall(r"<code>([^<]+)</code>", " ".join(
        re.findall(r"References: (.*?)</p>", text))))


def test_64_ranks_keep_their_labels_and_the_broken_hop_is_drawn(tmp_path: Path) -> None:
    _, text = _page(tmp_path, JOB64, "job64")
    ring = text.split("<h2>Topology</h2>")[1].split("</svg>")[0]
    labels = re.findall(r'<text x="[\d.]+" y="[\d.]+" font-size="([\d.]+)" text-anchor="middle"[^>]*>(\d+)</text>', ring)
    assert sorted(int(n) for _, n in labels) == list(range(64))  # every rank numbered inside its node
    assert min(float(size) for size, _ in labels) >= 8
    assert ring.count('stroke-dasharray="7 4"') == 1  # gpu-node-06 -> gpu-node-07, the link IB003 names
    assert "47 → 48" in ring.split('stroke-dasharray="7 4"')[1].split("</title>")[0]
    assert "<h2>Init timeline</h2>" in text  # not a hang: the init phases


def test_a_1024_rank_ring_is_a_summary_of_hosts() -> None:
    from ncclsleuth.renderers.html import ring_svg

    comm = {"key": "c", "nranks": 1024, "ranks": list(range(1024)), "rings": [[0, list(range(1024))]],
            "rank_host": {str(r): f"node{r // 8:03d}" for r in range(1024)}, "hops": []}
    svg = ring_svg(comm, {"node077"}, {617})
    assert "Summary view" in svg and "1,024 ranks on 128 host runs" in svg
    assert svg.count("<circle") == 128 + 2  # one per host, the track, the legend's mark
    assert 'font-weight="700">node077 (616–623)</text>' in svg
    assert len(svg) < 60_000


def test_a_16384_rank_ring_on_2048_hosts_draws_a_node_per_8_hosts() -> None:
    """Past 256 host runs, consecutive runs share a node (2,048 dots of 2.5 px overlapped, 263 KB
    a picture); the culprit's host is still red and named by itself, with its ranks."""
    from ncclsleuth.renderers.html import host_ring_svg

    order = list(range(16384))
    rank_host = {r: f"node{r // 8:04d}" for r in order}
    svg = host_ring_svg(order, rank_host, {"key": "0xabc"}, set(), {2896})
    nodes = re.findall(r'<circle cx="[\d.]+" cy="[\d.]+" r="[\d.]+" fill="(#fff|#ffcdd2)"', svg)
    assert len(nodes) == 256 + 1 and nodes.count("#ffcdd2") == 1 + 1  # 256 nodes, the legend's; one red each
    assert "16,384 ranks on 2,048 host runs;" in svg and "one node per 8 host runs, in ring order" in svg
    assert "<title>node0362: ranks 2880–2943</title>" in svg and ">node0362 (2880–2943)</text>" in svg
    assert "<title>node0000–node0007: ranks 0–63</title>" in svg
    assert len(svg) < 60_000
    small = host_ring_svg(order[:1024], rank_host, {"key": "0xabc"}, set(), {5})  # 128 hosts: a node each
    assert "one node per host, in ring order" in small and "<title>node0000: ranks 0–7</title>" in small


def test_a_1024_rank_job_is_summarised_through_the_cli(tmp_path: Path) -> None:
    """``ncclsleuth report`` on 1,024 ranks (128 hosts, an IB link broken between node047
    and node048): the ring is the host summary, the host table a row per network with the
    culprit's hosts first, in red, not 128 rows."""
    job = tmp_path / "j1024"
    subprocess.run([sys.executable, str(ROOT / "bench" / "generate.py"), "--ranks", "1024", "--per-host", "8",
                    "--channels", "2", "--inject", "ib_error", "--nccl-version", "2.23", "--out", str(job),
                    "--seed", "3"], check=True, capture_output=True, timeout=300)
    _, text = _page(tmp_path, job, "j1024")
    ring = text.split("<h2>Topology</h2>")[1].split("</svg>")[0]
    assert "Summary view" in ring and "1,024 ranks on 128 host runs" in ring
    hosts = text.split("<th>network</th><th>hosts</th><th>which</th>")[1].split("</table>")[0]
    assert hosts.count("<tr>") == 1  # one network, one row
    assert re.search(r"<td>IB</td><td>128</td><td><span style=\"color:#d32f2f;font-weight:700\">node047</span>", hosts)
    assert "and 120 more" in hosts


def _screenshot(exe: str, page: Path, png: Path, width: int) -> bytes:
    res = _run_chromium(exe, "--hide-scrollbars", f"--screenshot={png}", f"--window-size={width},2400", page.as_uri())
    assert png.exists(), res.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == width  # the PNG is as wide as the window
    return data


@pytest.fixture(scope="module")
def init64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 64-rank job (8 hosts x 8 GPUs) whose init fails: node002 bootstraps on docker0, the
    other 56 ranks cannot connect to it (the benchmark generator, deterministic)."""
    out = tmp_path_factory.mktemp("init64") / "init64"
    subprocess.run([sys.executable, str(ROOT / "bench" / "generate.py"), "--ranks", "64", "--per-host", "8",
                    "--channels", "2", "--inject", "wrong_iface", "--nccl-version", "2.23", "--out", str(out),
                    "--seed", "3"], check=True, capture_output=True, timeout=120)
    return out


def test_an_init_failure_shows_how_far_each_host_got(tmp_path: Path, init64: Path) -> None:
    _, text = _page(tmp_path, init64, "init64")
    assert "<h2>Init progress</h2>" in text and "<h2>Init timeline</h2>" not in text
    assert "Init completed on 0 of 64 ranks" in text
    table = text.split("<h2>Init progress</h2>")[1].split("</table>")[0]
    rows = re.findall(r"<tr><td[^>]*>(node\d+)</td><td[^>]*>([\d, -]+)</td><td>(\w+)</td><td>(\w+)</td><td>(.*?)</td>",
                      table)
    assert [(h, r) for h, r, *_ in rows] == [(f"node{i:03d}", f"{8 * i}-{8 * i + 7}") for i in range(8)]
    bad = rows[2]  # node002: the culprit, red, logged nothing; the others could not reach its docker0 address
    assert bad[4] == "none logged" and 'color:#d32f2f;font-weight:700">node002<' in table
    assert all("Connect to 172.17.0.1&lt;" in r[4] and "Connection refused" in r[4] for i, r in enumerate(rows) if i != 2)
    md = CliRunner().invoke(main, ["report", str(init64), "--format", "markdown"]).output
    assert "## Init progress" in md and "| node002 | 16-23 | yes | no | none logged |" in md


@pytest.mark.parametrize("name", ["desync-16", "job64", "init64"])
def test_postmortem_screenshots_at_two_widths(tmp_path: Path, name: str, request: pytest.FixtureRequest) -> None:
    """Headless Chromium renders the page at a laptop's width and a narrow window's: the
    pictures scale to the page (no fixed-width overflow) and carry something to see."""
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium not installed (apt-get install -y chromium); screenshots skipped")
    job = {"desync-16": DESYNC, "job64": JOB64}.get(name) or request.getfixturevalue("init64")
    page, text = _page(tmp_path, job, job.name)
    assert ".fig svg{max-width:100%;height:auto}" in text
    assert "break-all" not in text  # a fix wraps at its spaces in a narrow window ('checkpoin|t' it was)
    wide = _screenshot(exe, page, tmp_path / "wide.png", 1400)
    narrow = _screenshot(exe, page, tmp_path / "narrow.png", 820)
    assert len(wide) > 100_000 and len(narrow) > 100_000
    dom = _run_chromium(exe, "--dump-dom", page.as_uri()).stdout
    assert "Job failed:" in dom and "culprit:" in dom
    if name == "init64":  # the ring, and how far init got instead of a timeline with nothing to draw
        assert dom.count("<svg") == 1 and "Init progress" in dom
    else:
        assert dom.count("<svg") == 2
