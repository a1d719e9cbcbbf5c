"""Deterministic output: the same logs give byte-identical JSON whatever the order files were
written in on disk, whatever PYTHONHASHSEED, and whatever --jobs."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclsleuth.cli import main

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "fixtures" / "examples" / "desync-16"
EXTRA = [ROOT / "fixtures" / "corpus" / "nccl-426-roce-gid" / "log.txt",
         ROOT / "fixtures" / "corpus" / "horovod-584-lo-interface" / "log.txt"]


def _files() -> list[tuple[str, bytes]]:
    out = [(f"job/{p.name}", p.read_bytes()) for p in sorted(JOB.glob("*.log"))]
    out += [(f"job/extra/{i}-{p.parent.name}.log", p.read_bytes()) for i, p in enumerate(EXTRA) if p.exists()]
    return out


def _make(base: Path, order: list[tuple[str, bytes]], decoys: bool) -> Path:
    base.mkdir()
    for name, data in order:
        if decoys:  # churn the folder so directory entries land in another order
            (base / "job").mkdir(exist_ok=True)
            (base / "job" / f"zz-{len(name)}.tmp").write_bytes(b"x")
            (base / "job" / f"zz-{len(name)}.tmp").unlink()
        p = base / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return base


def _cli(cwd: Path, *extra: str, seed: str = "0") -> bytes:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    proc = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", "job", "--format", "json", *extra],
                          cwd=cwd, env=env, capture_output=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    assert b"Traceback" not in proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def trees(tmp_path_factory):  # type: ignore[no-untyped-def]
    if not JOB.is_dir():
        pytest.skip("fixtures/examples/desync-16 missing")
    files = _files()
    t = tmp_path_factory.mktemp("det")
    a = _make(t / "a", files, decoys=False)
    b = _make(t / "b", list(reversed(files)), decoys=True)
    return a, b


def test_file_order_on_disk_and_hash_seed(trees):
    a, b = trees
    outs = {_cli(a, seed="0"), _cli(b, seed="12345"), _cli(a, seed="12345"), _cli(b, seed="0")}
    assert len(outs) == 1
    assert b'"findings"' in outs.pop()


def test_repeated_in_process_runs_identical(trees):
    a, _ = trees
    cwd = os.getcwd()
    try:
        os.chdir(a)
        outs = {CliRunner().invoke(main, ["analyze", "job", "--format", "json"]).stdout for _ in range(2)}
    finally:
        os.chdir(cwd)
    assert len(outs) == 1


def test_jobs_do_not_change_output(trees, monkeypatch):
    res = CliRunner().invoke(main, ["analyze", "--help"])
    if "--jobs" not in res.stdout:
        pytest.skip("analyze has no --jobs option yet")
    from ncclsleuth.parallel import local

    monkeypatch.setattr(local, "PARALLEL_MIN_BYTES", 0, raising=False)  # really use worker processes
    a, _ = trees
    monkeypatch.chdir(a)
    outs = [CliRunner().invoke(main, ["analyze", "job", "--format", "json", "--jobs", str(j)]).stdout
            for j in (1, 3, 8)]
    assert outs[0] and outs[0] == outs[1] == outs[2]


def test_folder_copy_identical(trees, tmp_path):
    a, _ = trees
    c = tmp_path / "c"
    shutil.copytree(a, c)
    assert _cli(a) == _cli(c)


def test_two_nccl_versions_without_a_process_keep_their_order_whatever_the_hash_seed() -> None:
    """fixtures/healthy holds files of NCCL 2.7, 2.20 and others whose version line names no
    process: VER001's evidence came out in set order, different with every hash seed."""
    root = Path(__file__).resolve().parents[2]
    outs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", "fixtures/healthy", "--format", "json",
                               "--fail-on", "never"], cwd=root, env=env, capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert b'"VER001"' in proc.stdout
        outs.add(proc.stdout)
    assert len(outs) == 1
