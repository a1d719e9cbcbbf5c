"""bench/targets.py, issue 16's scorecard: its arithmetic and one cheap check run end to end."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "targets.py"


def _targets():
    spec = importlib.util.spec_from_file_location("ncclsleuth_bench_targets", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_projection_is_the_line_through_the_two_jobs():
    t = _targets()
    # 74 MB at 2,048 ranks and 114 MB at 4,096: 40 MB for 2,048 more ranks
    per, at = t.projected(74.0, 114.0, 2048, 4096, 100_000)
    assert per == pytest.approx(40.0 / 2048)
    assert at == pytest.approx(114.0 + 40.0 / 2048 * (100_000 - 4096))
    # no growth: the projection is the bigger job's own peak
    assert t.projected(50.0, 50.0, 10, 20, 1000) == (0.0, 50.0)


def test_every_check_has_its_logs_or_is_the_paste():
    t = _targets()
    assert set(t.CHECKS) == {"8k", "16k", "per-rank", "noise", "cold"}
    for name in ("8k", "16k", "r2048", "r4096", "noise"):
        assert {"ranks", "lines", "layout"} <= set(t.LOGS[name])
    assert t.LOGS["8k"]["layout"] == "one-file" and t.LOGS["8k"]["ranks"] == 8000
    assert t.LOGS["16k"]["ranks"] == 16384 and t.LOGS["16k"]["lines"] == 10_000_000
    # the projected job, measured on demand only (not part of a default run): the 16k job's mix
    assert t.ON_DEMAND == ("100k", "8k-5m") and not set(t.ON_DEMAND) & set(t.CHECKS)
    # the 8k job's ranks in five times its lines: what lines, not ranks, cost
    assert t.LOGS["8k-5m"]["ranks"] == t.LOGS["8k"]["ranks"] and t.LOGS["8k-5m"]["layout"] == "one-file"
    assert t.LOGS["8k-5m"]["lines"] == 5 * t.LOGS["8k"]["lines"]
    big, mix = t.LOGS["100k"], t.LOGS["r4096"]
    assert big["ranks"] == t.PROJECTED_RANKS and big["lines"] // big["ranks"] == mix["lines"] // mix["ranks"]
    assert {k: v for k, v in big.items() if k not in ("ranks", "lines")} == \
        {k: v for k, v in mix.items() if k not in ("ranks", "lines")}


def test_cold_check_runs_and_reports_a_row(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--only", "cold", "--cold-runs", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| cold head |")]
    assert len(rows) == 3
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1] == "200-line paste / `python -c pass`" and cells[2] == "<= 4x"
    assert cells[3].split("x ")[0].replace(".", "").isdigit()  # the ratio, then the two medians
    assert cells[4] in ("**met**", "not met")
    first = [c.strip() for c in rows[1].strip("|").split("|")]
    assert first[1].startswith("the same paste on a fresh cache folder (a first run") and first[2] == first[4] == ""
    ratio, rest = first[3].split("x (")
    assert float(ratio) > 0 and rest.endswith("; median of 1)") and " ms, peak " in rest
    served = [c.strip() for c in rows[2].strip("|").split("|")]
    assert served[1] == "the same paste to `ncclsleuth serve` (per request)"
    assert served[3].endswith(" ms (median of 1)") and float(served[3].split(" ms")[0]) > 0
    assert (tmp_path / "paste-200.log").read_text(encoding="utf-8").count("\n") == 200


def test_first_runs_measure_each_run_on_a_new_empty_cache_folder(tmp_path, monkeypatch):
    t = _targets()
    seen: list[tuple[str, list[str]]] = []

    def measure(cmd, *a, **k):
        folder = next(w for w in cmd if w.startswith("XDG_CACHE_HOME=")).partition("=")[2]
        seen.append((folder, os.listdir(folder)))
        # the build's command as it was, its own cache folder replaced
        assert [w for w in cmd if not w.startswith("XDG_CACHE_HOME=")] == \
            ["env", "PYTHONPATH=/old", "python", "-m", "ncclsleuth", "analyze", "--format", "json", "paste.log"]
        return {"wall": 1.0, "cpu": 1.0, "rss_kb": 1000, "rc": 1, "stderr": ""}

    monkeypatch.setattr(t.R, "measure", measure)
    exe = ["env", "XDG_CACHE_HOME=/the/build/own", "PYTHONPATH=/old", "python", "-m", "ncclsleuth"]
    got = t.first_runs(exe, "paste.log", 3, str(tmp_path))
    assert got["wall"] == 1.0 and got["runs"] == 3
    folders = [f for f, _ in seen]
    assert len(set(folders)) == 3 and all(Path(f).parent == tmp_path for f in folders)
    assert all(listed == [] for _, listed in seen)  # empty when the run starts
    assert not any(Path(f).exists() for f in folders)  # removed after it


def test_unknown_check_is_a_usage_error(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--only", "cold,bogus", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "unknown check(s): bogus" in r.stderr


def test_measured_commands_do_not_run_in_the_checkout(tmp_path):
    """``python -m ncclsleuth`` imports the current folder's package before ``PYTHONPATH``'s: from
    the repository's root a ``--before "env PYTHONPATH=/old python -m ncclsleuth"`` build ran this
    checkout.  The measured commands run in a folder of their own, and import what they are given."""
    t = _targets()
    out = tmp_path / "where.txt"
    t.R.measure([sys.executable, "-c", "import os, sys; print(os.getcwd()); print(sys.path[0])"],
                stdout_path=str(out))
    cwd, first = out.read_text().splitlines()
    assert cwd == t.R.NEUTRAL_CWD and Path(cwd).resolve() != ROOT
    old = tmp_path / "old"
    (old / "ncclsleuth").mkdir(parents=True)
    (old / "ncclsleuth" / "__init__.py").write_text("")
    (old / "ncclsleuth" / "__main__.py").write_text("import ncclsleuth; print(ncclsleuth.__file__)")
    t.R.measure([sys.executable, "-m", "ncclsleuth"], stdout_path=str(out),
                env=dict(os.environ, PYTHONPATH=str(old)))
    assert out.read_text().strip() == str(old / "ncclsleuth" / "__init__.py")


def test_per_rank_slope_is_of_warm_runs_of_both_jobs(monkeypatch, tmp_path):
    """Each build runs each job once before the measured rounds: the bigger job has line shapes
    (digit widths) the smaller has not, and a run that learns them loads Lark (~10 MB more peak)."""
    t = _targets()
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(t, "logs", lambda name: name)
    monkeypatch.setattr(t.R, "warm", lambda paths: 0)
    monkeypatch.setattr(t.R, "measure", lambda cmd, **kw: calls.append(("warm-up", cmd[-1])))

    def measured(self, name, cmd, keep=True):  # type: ignore[no-untyped-def]
        calls.append(("measured", self.path))
        self.runs.setdefault(name, []).append({"rss_kb": 100_000 if self.path == "r4096" else 60_000})

    monkeypatch.setattr(t.Round, "measure", measured)
    rows = t.check_per_rank([("head", ["ncclsleuth"])], 1, str(tmp_path))
    assert calls[:2] == [("warm-up", "r2048"), ("warm-up", "r4096")]
    assert all(kind == "measured" for kind, _ in calls[2:]) and len(calls) == 4
    assert rows[0][3].startswith("61 / 102 MB")


def test_lines_check_reports_the_5m_job_against_the_baseline_and_its_peak(monkeypatch, tmp_path):
    t = _targets()
    monkeypatch.setattr(t, "logs", lambda name: name)
    monkeypatch.setattr(t.R, "warm", lambda paths: 0)
    walls = {"baseline": 4.0, "head --jobs 1": 16.0, "head --jobs 2": 8.0}
    peaks = iter([130_000, 120_000, 110_000, 118_000])  # kB: --jobs 1, --jobs 2, then warm --jobs 1, --jobs 2

    def measured(self, name, cmd, keep=True):  # type: ignore[no-untyped-def]
        assert self.path == "8k-5m"
        rss = 0 if name == "baseline" else next(peaks)
        self.runs.setdefault(name, []).append({"wall": walls[name], "cpu": walls[name], "rss_kb": rss})
        if keep:
            out = tmp_path / f"{name.replace(' ', '_')}.json"
            out.write_text("{}")
            self.outputs.setdefault(name, str(out))

    monkeypatch.setattr(t.Round, "measure", measured)
    rows = t.check_lines([("head", ["ncclsleuth"])], 2, str(tmp_path))
    assert [r[1] for r in rows] == ["`--jobs 1` / baseline", "`--jobs 2` / `--jobs 1`",
                                    "peak RSS: every run / after the first, `--jobs 1` / `--jobs 2`",
                                    "reports identical (`--jobs 1`, `--jobs 2`, every build)"]
    assert rows[0][3].startswith("0.25x (16.00-16.00 s; baseline 4.00-4.00 s)")
    assert rows[1][3].startswith("2.00x")
    assert rows[2][3] == f"{130_000 * 1024 / 1e6:.0f} MB / {110_000 * 1024 / 1e6:.0f} MB / {118_000 * 1024 / 1e6:.0f} MB"
    assert rows[3][3] == "same"


def test_16k_check_reports_its_wall_against_the_baseline_of_the_same_rounds(monkeypatch, tmp_path):
    """The 16k target is in seconds on a VM whose speed moves within a day: the baseline measured in
    the same rounds gives the ratio that compares runs of different days."""
    t = _targets()
    monkeypatch.setattr(t, "logs", lambda name: name)
    monkeypatch.setattr(t.R, "warm", lambda paths: 0)
    walls = {"baseline": 3.0, "head --jobs 2": 12.0}
    order: list[str] = []

    def measured(self, name, cmd, keep=True):  # type: ignore[no-untyped-def]
        assert self.path == "16k"
        order.append(name)
        self.runs.setdefault(name, []).append({"wall": walls[name], "cpu": 2 * walls[name],
                                                "rss_kb": 0 if name == "baseline" else 150_000})

    monkeypatch.setattr(t.Round, "measure", measured)
    rows = t.check_16k([("head", ["ncclsleuth"])], 2, str(tmp_path))
    assert order == ["baseline", "head --jobs 2"] * 2  # alternating, round by round
    assert [r[1] for r in rows] == ["`--jobs 2` wall", "`--jobs 2` / baseline (the machine's speed taken out)",
                                    "peak RSS"]
    assert rows[0][3] == "12.00 s (12.00-12.00; CPU 24.0 s)" and rows[0][4] == "**met**"
    assert rows[1][3] == "0.25x (baseline 3.00-3.00 s)"
    assert rows[2][3] == f"{150_000 * 1024 / 1e6:.0f} MB"
