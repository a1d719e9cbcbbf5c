"""Crash safety of outputs: a full disk or a kill while a report is written leaves the old
file whole (or no file), never half of one.

Faults are injected where they happen for real: the write of the bytes fails with ENOSPC
part-way (the disk filled), the fsync fails with EIO, and the writing process is
SIGKILLed between its write and its rename.  Each output path is covered: ``analyze -o``,
``report -o``, ``topology --export`` (and the helpers they share, ``util.atomic``).
"""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclsleuth.cli import main
from ncclsleuth.util import atomic

ROOT = Path(__file__).resolve().parents[2]
OLD = b"the previous report, whole\n"


def _a_log(tmp_path: Path) -> Path:
    p = tmp_path / "rank0.log"
    p.write_text("node1:4242:4242 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, "
                 "opcode 1, len 0, vendor err 129\n"
                 "node1:4242:4242 [0] NCCL INFO Channel 00/02 :    0   1\n"
                 "node1:4242:4242 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n")
    return p


class _FullDisk:
    """A file object whose writes fail with ENOSPC after ``room`` bytes (the first bytes land)."""

    def __init__(self, f, room: int) -> None:  # type: ignore[no-untyped-def]
        self.f, self.room = f, room

    def write(self, b):  # type: ignore[no-untyped-def]
        if len(b) > self.room:
            self.f.write(b[: self.room])
            self.f.flush()
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(b)
        return self.f.write(b)

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        return getattr(self.f, name)

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
        self.f.close()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and ".tmp" in p.name)


def _full_disk(monkeypatch, room: int = 10) -> None:  # type: ignore[no-untyped-def]
    real_open = open

    def fake_open(path, mode="r", *a, **k):  # type: ignore[no-untyped-def]
        f = real_open(path, mode, *a, **k)
        return _FullDisk(f, room) if "w" in mode else f

    monkeypatch.setattr(atomic, "open", fake_open, raising=False)


@pytest.mark.parametrize("cmd", [["analyze", "--format", "json"], ["report", "--format", "html"]])
def test_full_disk_keeps_the_old_report(tmp_path, monkeypatch, cmd):
    log = _a_log(tmp_path)
    out = tmp_path / "out" / "report.txt"
    out.parent.mkdir()
    out.write_bytes(OLD)
    _full_disk(monkeypatch)
    res = CliRunner().invoke(main, [cmd[0], str(log), "-o", str(out), *cmd[1:]])
    assert res.exit_code == 2, res.output
    assert f"{out}: cannot write: No space left on device" in res.stderr
    assert "Traceback" not in res.stderr
    assert out.read_bytes() == OLD
    assert _leftovers(out.parent) == []


def test_full_disk_new_file_not_created(tmp_path, monkeypatch):
    log = _a_log(tmp_path)
    out = tmp_path / "report.json"
    _full_disk(monkeypatch)
    res = CliRunner().invoke(main, ["analyze", str(log), "-o", str(out), "--format", "json"])
    assert res.exit_code == 2
    assert not out.exists() and _leftovers(tmp_path) == []


def test_fsync_failure_keeps_the_old_report(tmp_path, monkeypatch):
    log = _a_log(tmp_path)
    out = tmp_path / "report.json"
    out.write_bytes(OLD)

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(atomic.os, "fsync", eio)
    res = CliRunner().invoke(main, ["analyze", str(log), "-o", str(out), "--format", "json"])
    assert res.exit_code == 2 and "Input/output error" in res.stderr
    assert out.read_bytes() == OLD and _leftovers(tmp_path) == []


def test_topology_export_full_disk(tmp_path, monkeypatch):
    from ncclsleuth.model import topology

    job = ROOT / "fixtures" / "examples" / "desync-16"
    out = tmp_path / "ring.dot"
    out.write_bytes(OLD)
    real_export = topology.export

    def half_then_enospc(t, path: str) -> None:  # type: ignore[no-untyped-def]
        real_export(t, path)
        with open(path, "r+b") as f:  # the disk filled half-way through the graph
            f.truncate(os.path.getsize(path) // 2)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(topology, "export", half_then_enospc)
    res = CliRunner().invoke(main, ["topology", str(job), "--export", str(out)])
    assert res.exit_code == 2 and f"{out}: cannot write: No space left on device" in res.stderr, res.stderr
    assert out.read_bytes() == OLD and _leftovers(tmp_path) == []
    monkeypatch.setattr(topology, "export", real_export)
    res = CliRunner().invoke(main, ["topology", str(job), "--export", str(out)])
    assert res.exit_code == 0 and out.read_text().startswith("digraph")


# The kill: a real process, SIGKILLed after it wrote the whole new report to the temporary file
# and before the rename (the widest window), and once while it is writing.
_KILLED = """
import os, sys, time
from ncclsleuth.util import atomic
ready = sys.argv[1]
where = sys.argv[2]
real_open = open
if where == "before-rename":
    real_replace = os.replace
    def replace(a, b):
        real_open(ready, "w").close()
        time.sleep(60)
    atomic.os.replace = replace
else:
    class Slow:
        def __init__(self, f): self.f = f
        def write(self, b):
            self.f.write(b[: len(b) // 2]); self.f.flush()
            real_open(ready, "w").close()
            time.sleep(60)
        def __getattr__(self, n): return getattr(self.f, n)
        def __enter__(self): return self
        def __exit__(self, *e): self.f.close()
    atomic.open = lambda p, m="r", *a, **k: Slow(real_open(p, m, *a, **k)) if "w" in m else real_open(p, m, *a, **k)
from ncclsleuth.cli import main
main(sys.argv[3:])
"""


@pytest.mark.parametrize("where", ["before-rename", "mid-write"])
@pytest.mark.parametrize("existed", [True, False])
def test_kill_leaves_no_half_report(tmp_path, where, existed):
    log = _a_log(tmp_path)
    out = tmp_path / "out" / "report.json"
    out.parent.mkdir()
    if existed:
        out.write_bytes(OLD)
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(ready), where, "analyze", str(log), "-o", str(out),
                             "--format", "json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the writer never reached the injected fault"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    if existed:
        assert out.read_bytes() == OLD
    else:
        assert not out.exists()
    # what the kill left is a hidden temporary file beside the target, never the target itself
    assert all(name.startswith(".report.json.") for name in _leftovers(out.parent))


def test_write_file_replaces_whole_and_keeps_mode(tmp_path):
    out = tmp_path / "r.md"
    out.write_bytes(OLD)
    out.chmod(0o640)
    atomic.write_file(str(out), "new report\n")
    assert out.read_text() == "new report\n"
    assert (out.stat().st_mode & 0o777) == 0o640
    assert _leftovers(tmp_path) == []


def test_symlink_target_replaced_link_kept(tmp_path):
    real = tmp_path / "real.json"
    real.write_bytes(OLD)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    atomic.write_file(str(link), "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_device_written_in_place(tmp_path):
    atomic.write_file(os.devnull, "discarded")  # renaming over /dev/null would replace the device node
    assert Path(os.devnull).is_char_device()
