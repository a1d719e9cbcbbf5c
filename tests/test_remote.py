"""Inputs anywhere: URLs through fsspec give the same report as the same files on disk.

How the reports are compared: evidence and notices name files by their display path,
which for an object is its URL (``s3://logs/run1/job/nccl...log``) and for a local file
the path given (``job/nccl...log`` when run from the job's parent folder).  The local
reference is made from the parent folder with the relative name ``job``, and the one
prefix that differs (``s3://logs/run1/`` -> ``""``) is mapped back in the remote JSON;
the test asserts the mapping was applied (the URL was there) and that the result then
equals the local report byte for byte.  Everything else - finding order, ranks, line
numbers, counts - must match untouched.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _jobs import S3Store, make_job
from click.testing import CliRunner

from ncclsleuth.cli import main
from ncclsleuth.ingest.remote import is_url, local_path, url_protocol


def _local_json(job: Path) -> str:
    """``ncclsleuth analyze job --format json`` run from the job's parent folder."""
    cwd = os.getcwd()
    os.chdir(job.parent)
    try:
        res = CliRunner().invoke(main, ["analyze", job.name, "--format", "json", "-j", "1"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 1, res.output  # findings -> 1
    return res.stdout


def _mapped(remote_json: str, prefix: str) -> str:
    assert prefix in remote_json  # the report really names the objects
    return remote_json.replace(prefix, "")


def test_url_detection():
    assert url_protocol("s3://b/k") == "s3" and is_url("gs://b/k") and is_url("az://c/k")
    assert not is_url("/tmp/x") and not is_url("job/x.log") and not is_url("-") and not is_url(r"C:\x\y")
    assert not is_url("file:///tmp/x") and local_path("file:///tmp/a%20b") == "/tmp/a b"


def test_file_url_is_the_local_path(tmp_path):
    job, _ = make_job(tmp_path, ranks=16, noise=0)
    a = CliRunner().invoke(main, ["analyze", str(job), "--format", "json", "-j", "1"])
    b = CliRunner().invoke(main, ["analyze", "file://" + str(job), "--format", "json", "-j", "1"])
    assert a.exit_code == b.exit_code == 1
    assert a.stdout == b.stdout


def test_url_without_fsspec_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec -> ImportError
    res = CliRunner().invoke(main, ["analyze", "s3://bucket/job"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'ncclsleuth[dask]'" in lines[0]


def test_local_analysis_never_imports_fsspec_or_dask(tmp_path):
    job, _ = make_job(tmp_path, ranks=8, noise=0, gzip_every=0)
    code = ("import sys; from ncclsleuth.cli import main\n"
            f"try: main(['analyze', {str(job)!r}, '--format', 'json', '-o', {str(tmp_path / 'r.json')!r}])\n"
            "except SystemExit: pass\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('fsspec', 's3fs', 'dask', 'distributed'))\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------- fsspec stores


fsspec = pytest.importorskip("fsspec")


def test_memory_store_lists_lazily_and_reads_each_object_once(tmp_path, monkeypatch):
    """Listing pages through ``ls`` once per folder (no ``find``), each object is opened once."""
    from fsspec.implementations.memory import MemoryFileSystem

    from ncclsleuth import api
    from ncclsleuth.api import analyze
    from ncclsleuth.renderers import render

    job, man = make_job(tmp_path, ranks=32)
    (tmp_path / "job" / "notes.png").write_bytes(b"\x89PNG")  # skipped by extension, like on disk
    fs = MemoryFileSystem()
    for p in sorted(job.iterdir()):
        fs.pipe(f"/t/job/{p.name}", p.read_bytes())
    fs.pipe("/t/job/sub/extra.log", (job / sorted(os.listdir(job))[1]).read_bytes())
    (job / "sub").mkdir()
    (job / "sub" / "extra.log").write_bytes(fs.cat("/t/job/sub/extra.log"))

    opened: list[str] = []
    listed: list[str] = []
    real_open, real_ls = MemoryFileSystem._open, MemoryFileSystem.ls
    monkeypatch.setattr(MemoryFileSystem, "_open", lambda self, path, *a, **k: (opened.append(path),
                                                                                real_open(self, path, *a, **k))[1])
    monkeypatch.setattr(MemoryFileSystem, "ls", lambda self, path, *a, **k: (listed.append(path),
                                                                            real_ls(self, path, *a, **k))[1])
    monkeypatch.setattr(MemoryFileSystem, "find", lambda *a, **k: pytest.fail("find materialises the prefix"))
    try:
        report = analyze(["memory://t/job"], api.Options(jobs=1))
        files = report.files_read
    finally:
        monkeypatch.undo()
        fs.rm("/t", recursive=True)
    assert files == man["files"] + 1
    assert sorted(opened) == sorted(set(opened)) and len(opened) == files  # each object read once
    assert listed.count("/t/job") == 1 and listed.count("/t/job/sub") == 1
    top = report.findings[0]
    assert top.rule_id == "DESYNC002" and f"Rank {man['culprit_ranks'][0]} " in top.message
    assert _mapped(render("json", report), "memory:///t/") == _local_json(job)


@pytest.fixture(scope="module")
def s3():
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    with S3Store() as store:
        yield store


def test_s3_report_is_byte_identical_to_the_local_one(tmp_path, s3):
    job, man = make_job(tmp_path, ranks=64)
    url = s3.upload(job, "logs", "run1/job")
    res = CliRunner().invoke(main, ["analyze", url, "--format", "json", "-j", "1"])
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    assert report["findings"][0]["rule_id"] == "DESYNC002"
    assert f"Rank {man['culprit_ranks'][0]} (host {man['culprit_hosts'][0]})" in report["findings"][0]["message"]
    assert _mapped(res.stdout, "s3://logs/run1/") == _local_json(job)


def test_s3_single_object_glob_and_missing_prefix(tmp_path, s3):
    job, _ = make_job(tmp_path, ranks=8, gzip_every=2, noise=0)
    url = s3.upload(job, "logs2", "j")
    one = sorted(os.listdir(job))[0]  # gzipped: read through the magic bytes
    res = CliRunner().invoke(main, ["analyze", f"{url}/{one}", "--format", "json", "-j", "1", "--fail-on", "never"])
    assert res.exit_code == 0, res.output
    assert f"{url}/{one}" in res.stdout
    res = CliRunner().invoke(main, ["analyze", f"{url}/*.log", "--format", "json", "-j", "1", "--fail-on", "never"])
    assert res.exit_code == 0 and res.stdout.count("s3://logs2/j/nccl.") >= 8
    res = CliRunner().invoke(main, ["analyze", "s3://logs2/nothing-here", "-j", "1"])
    assert res.exit_code == 2 and "no such file or folder" in res.stderr


def test_a_remote_folder_given_twice_says_its_files_were_read(tmp_path):
    """As for a local folder: the second listing reads nothing new, and says why (not "no readable
    log files")."""
    pytest.importorskip("fsspec")
    from fsspec.implementations.memory import MemoryFileSystem

    from ncclsleuth.ingest.remote import LazyDiscovery

    fs = MemoryFileSystem()
    fs.pipe("/twice/job/rank0.log", b"a\n")
    fs.pipe("/twice/job/rank1.log", b"b\n")
    fs.pipe("/twice/empty/notes.png", b"\x89PNG")
    try:
        found = LazyDiscovery(["memory://twice/job", "memory://twice/job", "memory://twice/empty"])
        files = [f.path for f in found]
    finally:
        fs.rm("/twice", recursive=True)
    assert files == ["memory:///twice/job/rank0.log", "memory:///twice/job/rank1.log"]
    assert [(n.path, n.message, n.severity) for n in found.notices] == [
        ("memory://twice/job", "every log file in it was read already under another name (2)", "info"),
        ("memory:///twice/empty/notes.png", "not a log file (by its extension), skipped", "info"),
        ("memory://twice/empty", "folder holds no readable log files", "warning")]
