"""Dask as the engine: a real LocalCluster (2 worker processes) gives the single-machine report.

The reference is ``ncclsleuth analyze job --format json`` run from the job's parent
folder; the cluster analyses the same relative folder (so display paths are equal and
the JSON must match byte for byte with no mapping at all), and the same files from an
S3 store served by moto on loopback (display paths are then URLs: the one differing
prefix is mapped back, see tests/test_remote.py).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _jobs import S3Store, make_job
from click.testing import CliRunner

from ncclsleuth.cli import main


def _analyze(args: list[str], cwd: Path) -> str:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(main, ["analyze", *args, "--format", "json"])
    finally:
        os.chdir(old)
    assert res.exit_code == 1, res.output
    return res.stdout


def test_scheduler_without_dask_says_how_to_install(monkeypatch, tmp_path):
    for mod in ("dask", "dask.distributed", "distributed"):
        monkeypatch.setitem(sys.modules, mod, None)
    (tmp_path / "x.log").write_text("hello\n")
    res = CliRunner().invoke(main, ["analyze", str(tmp_path), "--scheduler", "local:2"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'ncclsleuth[dask]'" in lines[0]


def test_bad_scheduler_address_is_a_usage_error(tmp_path):
    pytest.importorskip("dask.distributed")
    (tmp_path / "x.log").write_text("hello\n")
    res = CliRunner().invoke(main, ["analyze", str(tmp_path), "--scheduler", "host:8786"])
    assert res.exit_code == 2 and "tcp://host:port" in res.stderr


# --------------------------------------------------------------------------- on a cluster


@pytest.fixture(scope="module")
def store():
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    with S3Store() as s:  # env (credentials, endpoint) set before the workers start: they inherit it
        yield s


@pytest.fixture(scope="module")
def cluster(store):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
                                  host="127.0.0.1") as c:
        yield c


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    path, man = make_job(root, ranks=128)
    return path, man


def test_cluster_on_a_local_folder_is_byte_identical(job, cluster):
    path, man = job
    local = _analyze([path.name, "-j", "1"], path.parent)
    remote = _analyze([path.name, "--scheduler", cluster.scheduler_address], path.parent)
    assert remote == local
    assert '"rule_id": "DESYNC002"' in local and f"Rank {man['culprit_ranks'][0]} " in local


def test_cluster_reading_s3_is_byte_identical(job, cluster, store):
    path, man = job
    url = store.upload(path, "fleet", "run7/job")
    local = _analyze([path.name, "-j", "1"], path.parent)
    remote = _analyze([url, "--scheduler", cluster.scheduler_address], path.parent)
    assert "s3://fleet/run7/job/nccl." in remote
    assert remote.replace("s3://fleet/run7/", "") == local


def test_results_merge_in_input_order_whatever_finishes_first(job, cluster, tmp_path):
    """A huge first file finishes last; the reorder buffer still hands files over in order."""
    from ncclsleuth.ingest.sources import discover
    from ncclsleuth.parallel.cluster import DaskSource

    path, _ = job
    big = tmp_path / "a-big.log"
    big.write_bytes((path / sorted(os.listdir(path))[1]).read_bytes() + b"iter 1: loss 1.0\n" * 300_000)
    small = [str(p) for p in sorted(path.iterdir())[:24]]
    seen: list[tuple[int, int]] = []
    src = DaskSource([str(big), *small], True, cluster.scheduler_address, batch_files=1,
                     on_progress=lambda files, lines, rate: seen.append((files, lines)))
    try:
        from distributed import Client

        got = [part.sources[0] for part, _, _ in src]
        assert Client.current().nthreads()  # the source connected to the given cluster
    finally:
        src.close()
    assert got == [f.display for f in discover([str(big), *small]).files]
    assert seen[-1][0] == 25 and seen[-1][1] > 300_000 and src.stats["batches"] == 25
    assert src.stats["max_buffered"] > 0  # later files did arrive first and waited for the big one


def test_local_n_starts_its_own_cluster(tmp_path):
    pytest.importorskip("dask.distributed")
    path, _ = make_job(tmp_path, ranks=16, noise=0)
    assert _analyze([path.name, "--scheduler", "local:2"], path.parent) == _analyze([path.name, "-j", "1"],
                                                                                       path.parent)
