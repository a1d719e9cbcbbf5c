"""Bounds with notices: what reading an input may cost is capped, and each cap met is said.

Issue 17's reproductions: a gzip bomb of newlines ran past 120 s with no cap or notice;
folders nested ~980 deep gave an internal RecursionError; an unreadable subfolder was
skipped silently; a symbolic link to ``/etc`` was followed out of the given folder;
``local://…/fifo`` hung; ``zip://…`` was an internal error.  Each is checked through the
real CLI (no traceback, the notice naming the path and the flag that raises the cap) and
the log beside the bad input still analysed.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from test_bad_inputs import GOOD, analysed, analyze, cli, notice_lines, one_notice

from ncclsleuth.ingest import sources
from ncclsleuth.ingest.blocks import BlockReader
from ncclsleuth.ingest.decode import LineReader, open_regular
from ncclsleuth.ingest.sources import InputFile


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank0.log").write_bytes(GOOD)
    return d


def _bomb(p: Path, mib: int, line: bytes = b"\n") -> None:
    """``mib`` MiB of ``line`` repeated, gzip level 9 (newlines: ~1,030:1, as the issue's 10 MB ->
    10.7 GB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = line * ((1 << 20) // len(line))
    with open(p, "wb") as fh:
        for _ in range(mib):
            fh.write(c.compress(chunk))
        fh.write(c.flush())


# ------------------------------------------------------------------ decompression caps


def test_gzip_bomb_stops_at_the_ratio_cap(tmp_path):
    """The default caps alone stop a bomb: 311 KB of gzip that decompress to 320 MiB of newlines
    are read to the ratio cap (256 MiB), with a notice, in bounded time."""
    bomb = tmp_path / "bomb.log.gz"
    _bomb(bomb, 320)
    reader = BlockReader(InputFile(str(bomb)))
    t0 = time.monotonic()
    lines = sum(text.count("\n") + 1 for _, text in reader)
    took = time.monotonic() - t0
    # stopped early (at 256 MiB the decompressor's read-ahead keeps the ratio just under 1000:1
    # for a few more MiB), not at the end of the 320 MiB
    assert (256 << 20) < reader.bytes_read < (300 << 20) and lines <= reader.bytes_read + 1
    assert [n.message for n in reader.notices] == [
        "gzip data decompresses more than 1000:1 past 256 MiB, a decompression bomb? (--max-ratio raises the cap): "
        f"read stopped after line {reader.lines}; the lines before were analysed"]
    assert took < 30, f"{took:.0f} s"


def test_line_reader_checks_the_caps(tmp_path):
    bomb = tmp_path / "bomb.log.gz"
    _bomb(bomb, 6, b"x" * 63 + b"\n")
    before = sources.set_limits(max_decompressed=2 << 20)
    try:
        reader = LineReader(InputFile(str(bomb)))
        n = sum(1 for _ in reader)
    finally:
        sources.restore_limits(before)
    assert n <= (3 << 20) // 64
    assert [m.message.split(":")[0] for m in reader.notices] == ["gzip data decompresses to more than 2 MiB (--max-decompressed raises the cap)"]


def test_cli_bomb_beside_a_log(logdir):
    bomb = logdir / "bomb.log.gz"
    _bomb(bomb, 4)
    res = cli("analyze", str(logdir), "--format", "json", "--max-decompressed", "1M")
    assert res.exit_code == 1, res.stderr
    one_notice(res, bomb, "decompresses to more than 1 MiB", "--max-decompressed", "read stopped after line")
    analysed(res)


def test_max_decompressed_cap_and_flag(tmp_path):
    p = tmp_path / "rank0.log.gz"
    body = GOOD + b"node1:4242:4242 [0] NCCL INFO filler line to make the file bigger than one MiB\n" * 20_000
    p.write_bytes(gzip.compress(body))  # ~1.6 MiB of text
    res = cli("analyze", str(p), "--format", "json", "--max-decompressed", "1M")
    assert res.exit_code == 1, res.stderr
    one_notice(res, p, "decompresses to more than 1 MiB", "--max-decompressed", "the lines before were analysed")
    analysed(res)  # line 1 was before the cap
    raised = cli("analyze", str(p), "--format", "json", "--max-decompressed", "4M")
    assert not [ln for ln in notice_lines(raised) if "decompress" in ln], raised.stderr
    # the flag's value was for that command only
    assert sources.limits() == sources.Limits()


def test_bad_size_is_a_usage_error(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(GOOD)
    res = cli("analyze", str(p), "--max-decompressed", "lots")
    assert res.exit_code == 2 and "is not a size" in res.stderr


# ------------------------------------------------------------------ the folder walk


@pytest.fixture
def deep(tmp_path):  # type: ignore[no-untyped-def]
    """A log 1,000 folders down (deeper than Python's recursion limit: os.walk recursed per
    level; pathlib's and os.makedirs's parents=True, and shutil.rmtree, recurse too)."""
    root = tmp_path / "job"
    d = str(root)
    os.mkdir(d)
    for _ in range(1000):
        d += "/d"
        os.mkdir(d)
    Path(d, "rank0.log").write_bytes(GOOD)
    (root / "rank1.log").write_bytes(GOOD)
    yield root
    os.remove(os.path.join(d, "rank0.log"))
    while d != str(root):
        os.rmdir(d)
        d = os.path.dirname(d)


def test_deep_folders_no_recursion_error(deep):
    res = analyze(deep)
    assert res.exit_code == 1, res.stderr[-2000:]
    nested = [ln for ln in notice_lines(res) if "nested more than 64 levels" in ln]
    assert len(nested) == 1 and "--max-depth" in nested[0], res.stderr[-2000:]
    analysed(res)
    full = cli("analyze", str(deep), "--format", "json", "--max-depth", "2000")
    assert full.exit_code == 1 and "nested more than" not in full.stderr, full.stderr[-2000:]
    assert json.loads(full.stdout)["summary"]["files"] == 2


def test_walk_order_is_depth_first_sorted(tmp_path):
    for rel in ("b/x.log", "a/z/y.log", "a/b.log", "c.log", "a.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(GOOD)
    got = [os.path.relpath(f.path, tmp_path) for f in sources.discover([str(tmp_path)]).files]
    # os.walk's order (a folder's files, then each sub-folder in name order), as before
    assert got == ["a.log", "c.log", "a/b.log", "a/z/y.log", "b/x.log"]


def test_unreadable_subfolder_is_reported(logdir, monkeypatch):
    sub = logdir / "locked"
    sub.mkdir()
    (sub / "rank1.log").write_bytes(GOOD)
    real_scandir = os.scandir

    def scandir(path):  # type: ignore[no-untyped-def]
        if os.fspath(path) == str(sub):  # as chmod 000 does for a user who is not root
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(sources.os, "scandir", scandir)
    res = analyze(logdir)
    assert res.exit_code == 1, res.stderr
    one_notice(res, sub, "cannot read folder: Permission denied", "skipped")
    analysed(res)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 folder")
def test_unreadable_subfolder_chmod(logdir):
    sub = logdir / "locked"
    sub.mkdir()
    (sub / "rank1.log").write_bytes(GOOD)
    sub.chmod(0)
    try:
        res = analyze(logdir)
        one_notice(res, sub, "cannot read folder", "skipped")
    finally:
        sub.chmod(0o755)


def test_symlink_out_of_folder_not_followed(logdir, tmp_path):
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (elsewhere / "passwd.log").write_bytes(b"root:x:0:0:secret\n")
    (logdir / "etc").symlink_to(elsewhere)
    (logdir / "hosts.log").symlink_to(elsewhere / "passwd.log")
    (logdir / "inside.log").symlink_to(logdir / "rank0.log")  # inside the folder: followed (same file, once)
    res = analyze(logdir)
    assert res.exit_code == 1, res.stderr
    one_notice(res, logdir / "etc", f"symbolic link to {elsewhere}", "not followed", "--follow-symlinks")
    one_notice(res, logdir / "hosts.log", "symbolic link to", "not followed")
    d = analysed(res)
    assert d["summary"]["files"] == 1
    followed = cli("analyze", str(logdir), "--format", "json", "--follow-symlinks")
    assert "not followed" not in followed.stderr
    assert json.loads(followed.stdout)["summary"]["files"] == 2  # rank0.log and etc/passwd.log (hosts.log = same)


def test_many_links_out_one_notice_counts_the_rest(logdir, tmp_path):
    for i in range(sources.MAX_LINK_NOTICES + 5):
        (logdir / f"l{i:02d}").symlink_to("/etc")
    res = analyze(logdir)
    links = [ln for ln in notice_lines(res) if "not followed" in ln]
    assert len(links) == sources.MAX_LINK_NOTICES + 1, res.stderr
    assert "5 more symbolic link(s) out of the folder" in links[-1]


# ------------------------------------------------------------------ FIFOs, devices, archives by URL


@pytest.mark.parametrize("scheme", ["local://", "file://"])
def test_fifo_by_url_does_not_hang(tmp_path, scheme):
    pytest.importorskip("fsspec")
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", scheme + str(fifo)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "not a regular file (FIFO, device or socket)" in proc.stderr


def test_device_by_url_refused(tmp_path):
    pytest.importorskip("fsspec")
    proc = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", "local:///dev/zero"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "not a regular file" in proc.stderr


def test_zip_url_is_a_clear_error(tmp_path):
    pytest.importorskip("fsspec")
    res = cli("analyze", f"zip://{tmp_path}/x.zip")
    assert res.exit_code == 2
    assert "zip:// (an archive) is not read: unpack it and give the folder" in res.stderr


def test_fifo_swapped_in_after_discovery_is_refused(tmp_path):
    fifo = tmp_path / "rank0.log"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(OSError, match="not a regular file"):
        open_regular(str(fifo))
    assert time.monotonic() - t0 < 5
    p = tmp_path / "ok.log"
    p.write_bytes(GOOD)
    with open_regular(str(p)) as fh:
        assert fh.read() == GOOD
