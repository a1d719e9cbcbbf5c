"""tools/fuzz.py itself: forked workers run the count asked for, and a crash and a hang are each
reported as findings (exit 1) with the input written out.  Run in a subprocess: the tool points
XDG_CACHE_HOME at a private folder for its whole process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "fuzz.py"

_INJECT = """
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("fuzz", sys.argv[1])
fuzz = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz)
real, parent, calls = fuzz.run_one, os.getpid(), [0]
def flaky(data, cache, rules, full):
    if os.getpid() == parent:  # the parent's warm-up: real
        return real(data, cache, rules, full)
    calls[0] += 1
    if calls[0] == 3:
        raise ValueError("injected")
    if calls[0] == 5:
        while True:  # an endless loop: the worker's timer stops it
            pass
    return real(data, cache, rules, full)
fuzz.run_one = flaky
sys.exit(fuzz.main(sys.argv[2:]))
"""


def test_count_reached_with_forked_workers(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(TOOL), "--count", "60", "--workers", "2", "--seed", "3", "--out",
                           str(tmp_path / "out"), "--analyze-every", "20", "--every", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fuzz: 60 inputs (4 through analyze)" in proc.stdout and "with 2 worker(s)" in proc.stdout
    assert "0 distinct problem(s)" in proc.stdout and "1,000,000 in" in proc.stdout
    assert not (tmp_path / "out").exists()


def test_crash_and_hang_are_findings(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _INJECT, str(TOOL), "--count", "8", "--workers", "1", "--seed", "3",
                           "--out", str(tmp_path / "out"), "--hang", "1", "--every", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FOUND ValueError at <string>" in proc.stdout and "injected" in proc.stdout
    assert "FOUND hang: past 1 s" in proc.stdout
    assert sorted(os.listdir(tmp_path / "out")) == ["crash-w0-001.log", "crash-w0-002.log"]
