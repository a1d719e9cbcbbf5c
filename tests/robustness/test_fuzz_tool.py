"""tools/fuzz.py itself: forked workers run the count asked for, and a crash, a hang and a dead
worker are each reported as findings (exit 1) with the input written out."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fuzz():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ncclsleuth_fuzz_tool", ROOT / "tools" / "fuzz.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    if not mod.corpus_lines():
        pytest.skip("no corpus lines")
    return mod


def test_count_reached_with_forked_workers(fuzz, tmp_path, capsys):  # type: ignore[no-untyped-def]
    rc = fuzz.main(["--count", "60", "--workers", "2", "--seed", "3", "--out", str(tmp_path / "out"),
                    "--analyze-every", "20", "--every", "1"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "fuzz: 60 inputs (4 through analyze)" in out and "with 2 worker(s)" in out
    assert "0 distinct problem(s)" in out and "1,000,000 in" in out
    assert not (tmp_path / "out").exists()


def test_crash_and_hang_are_findings(fuzz, tmp_path, capsys, monkeypatch):  # type: ignore[no-untyped-def]
    real = fuzz.run_one
    parent = os.getpid()
    calls = {"n": 0}

    def flaky(data, cache, rules, full):  # type: ignore[no-untyped-def]
        if os.getpid() == parent:  # the parent's warm-up: real
            return real(data, cache, rules, full)
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError("injected")
        if calls["n"] == 5:
            while True:  # an endless loop: the worker's timer stops it
                pass
        return real(data, cache, rules, full)

    monkeypatch.setattr(fuzz, "run_one", flaky)
    rc = fuzz.main(["--count", "8", "--workers", "1", "--seed", "3", "--out", str(tmp_path / "out"), "--hang", "1",
                    "--every", "1"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FOUND ValueError at test_fuzz_tool.py" in out and "injected" in out
    assert "FOUND hang: past 1 s" in out
    assert sorted(os.listdir(tmp_path / "out")) == ["crash-w0-001.log", "crash-w0-002.log"]
