"""Bad input gets a clear one-line answer through the real CLI: no crash, no hang, no traceback.

Each case puts the bad input next to (or instead of) a real log and checks: a warning
naming the file and what was done, the rest analysed, the exit code per the contract
(2 only when nothing could be analysed or the usage is wrong), never a Python traceback.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclsleuth.cli import main
from ncclsleuth.ingest.decode import LineReader
from ncclsleuth.ingest.sources import InputFile

WARN = "node1:4242:4242 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129"
GOOD = (WARN + "\n").encode()


def cli(*args: str, input: bytes | None = None):  # type: ignore[no-untyped-def]
    res = CliRunner().invoke(main, list(args), input=input)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def analyze(*paths: Path | str):  # type: ignore[no-untyped-def]
    return cli("analyze", *map(str, paths), "--format", "json")


def notice_lines(res) -> list[str]:  # type: ignore[no-untyped-def]
    return [ln for ln in res.stderr.splitlines() if ln.startswith("ncclsleuth: ")]


def one_notice(res, path: Path | str, *words: str) -> str:  # type: ignore[no-untyped-def]
    """Exactly one stderr line names ``path`` and it says every one of ``words``."""
    lines = [ln for ln in notice_lines(res) if str(path) in ln]
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def analysed(res) -> dict:  # type: ignore[type-arg]
    """The real log beside the bad input was analysed: its WARN is in the report."""
    d = json.loads(res.stdout)
    lines = [e["text"] for f in d["findings"] for e in f["evidence"]] + [e["text"] for e in d["unexplained"]]
    assert WARN in lines, d
    return d


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank0.log").write_bytes(GOOD)
    return d


# ------------------------------------------------------------------ nothing to analyse: exit 2


def test_nonexistent_path(tmp_path):
    res = analyze(tmp_path / "nope.log")
    assert res.exit_code == 2
    assert "nope.log" in res.stderr and "no such file or folder" in res.stderr


def test_empty_folder(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    res = analyze(d)
    assert res.exit_code == 2
    assert f"{d}: folder holds no readable log files" in res.stderr


def test_folder_without_logs(tmp_path):
    d = tmp_path / "nologs"
    d.mkdir()
    (d / "model.pt").write_bytes(b"\x80\x02weights")
    (d / "core").write_bytes(b"\x7fELF" + os.urandom(4096))
    res = analyze(d)
    assert res.exit_code == 2
    assert "nothing could be analysed" in res.stderr
    assert "core: binary file, not a text log, skipped" in res.stderr


def test_empty_file_alone_exit_2(tmp_path):
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    res = analyze(p)
    assert res.exit_code == 2
    assert "empty file" in res.stderr


def test_empty_file_parse_command(tmp_path):
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    res = cli("parse", str(p))
    assert res.exit_code == 2
    assert f"{p}: empty file, nothing to analyse" in res.stderr


def test_wrong_usage_exit_2(tmp_path):
    res = cli("analyze", "--format", "nope", str(tmp_path))
    assert res.exit_code == 2
    res = cli("analyze")
    assert res.exit_code == 2


# ------------------------------------------------------------------ bad file beside a real log


def test_binary_core_beside_log(logdir):
    (logdir / "core.1234").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 64)
    res = analyze(logdir)
    assert res.exit_code == 1
    one_notice(res, logdir / "core.1234", "binary file", "skipped")
    analysed(res)


def test_tarball_beside_log(logdir):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("inner.log")
        info.size = len(GOOD)
        tf.addfile(info, io.BytesIO(GOOD))
    (logdir / "logs-bundle").write_bytes(buf.getvalue())  # no .tar suffix: sniffed
    (logdir / "logs.tar").write_bytes(buf.getvalue())
    res = analyze(logdir)
    assert res.exit_code == 1
    one_notice(res, logdir / "logs-bundle", "tar archive", "skipped")
    one_notice(res, logdir / "logs.tar", "skipped")
    analysed(res)


def test_nul_bytes_noticed(logdir):
    (logdir / "nul.log").write_bytes(b"x" * 300 + b"\nab\x00\x00cd\n" + GOOD)
    res = analyze(logdir)
    one_notice(res, logdir / "nul.log", "NUL")


def test_nul_bytes_line_reader(tmp_path):
    p = tmp_path / "nul.log"
    p.write_bytes(b"x" * 300 + b"\nab\x00\x00cd\n" + GOOD)
    r = LineReader(InputFile(str(p)))
    lines = list(r)
    assert (2, "abcd") in lines and (3, WARN) in lines
    assert [n.message for n in r.notices] == ["1 line(s) with NUL bytes, NUL bytes removed"]


def test_nul_bytes_rest_analysed(logdir):
    (logdir / "nul.log").write_bytes(b"x" * 300 + b"\nab\x00\x00cd\n" + GOOD)
    res = analyze(logdir)
    assert res.exit_code == 1
    analysed(res)


def test_invalid_utf8(logdir):
    (logdir / "bad.log").write_bytes(b"ok\nbad \xff\xfe\xc3 here\n" + GOOD)
    res = analyze(logdir)
    assert res.exit_code == 1
    one_notice(res, logdir / "bad.log", "invalid UTF-8", "replacement")
    analysed(res)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be"])
def test_utf16_bom(tmp_path, codec):
    p = tmp_path / "win.log"
    text = "hello\n" + WARN + "\n"
    p.write_bytes((b"\xfe\xff" + text.encode(codec)) if codec == "utf-16-be" else text.encode(codec))
    res = analyze(p)
    assert res.exit_code == 1
    one_notice(res, p, "UTF-16", "decoded")
    analysed(res)


def test_utf16_le_without_bom_line_reader(tmp_path):
    p = tmp_path / "win.log"
    p.write_bytes(("hello\n" + WARN + "\n").encode("utf-16-le"))
    r = LineReader(InputFile(str(p)))
    assert list(r) == [(1, "hello"), (2, WARN)]
    assert "UTF-16" in r.notices[0].message


def test_cr_only_line_ends(tmp_path):
    p = tmp_path / "mac.log"
    p.write_bytes(b"first\r" + WARN.encode() + b"\rlast\r")
    res = analyze(p)
    assert res.exit_code == 1
    one_notice(res, p, "CR-only", "split on CR")
    analysed(res)


def _truncated_gz(p: Path) -> None:
    data = b"".join(b"node1:1:1 [0] NCCL INFO line %d %s\n" % (i, os.urandom(16).hex().encode()) for i in range(4000))
    gz = gzip.compress(data)
    p.write_bytes(gz[: len(gz) // 2])


def test_truncated_gzip(logdir):
    _truncated_gz(logdir / "rank1.log.gz")
    res = analyze(logdir)
    assert res.exit_code == 1
    one_notice(res, logdir / "rank1.log.gz", "read stopped after line", "truncated or corrupt")
    analysed(res)


def test_truncated_gzip_line_reader_keeps_lines_before(tmp_path):
    p = tmp_path / "r.log.gz"
    _truncated_gz(p)
    r = LineReader(InputFile(str(p)))
    n = sum(1 for _ in r)
    assert 1000 < n < 4000 and r.lines == n
    assert r.notices[0].message.startswith(f"read stopped after line {n}: ")


def test_truncated_gzip_analyze_keeps_lines_before(tmp_path):
    p = tmp_path / "r.log.gz"
    _truncated_gz(p)
    res = analyze(p)
    line = one_notice(res, p, "read stopped after line")
    n = int(line.split("read stopped after line ")[1].split(":")[0])
    assert n > 1000


def test_corrupt_gzip_header_only(logdir):
    (logdir / "x.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    res = analyze(logdir)
    assert res.exit_code == 1
    one_notice(res, logdir / "x.gz", "read stopped after line 0")
    analysed(res)


def test_unreadable_file(logdir):
    p = logdir / "secret.log"
    p.write_bytes(GOOD)
    p.chmod(0)
    try:
        if os.access(p, os.R_OK):
            pytest.skip("running as a user (root) who can read a chmod 000 file")
        res = analyze(logdir)
        assert res.exit_code == 1
        one_notice(res, p, "cannot read", "skipped")
        analysed(res)
    finally:
        p.chmod(0o644)


def test_symlink_loop(logdir):
    (logdir / "sub").mkdir()
    (logdir / "sub" / "up").symlink_to("..")          # folder loop
    (logdir / "self").symlink_to("self")              # link to itself
    res = analyze(logdir)
    assert res.exit_code == 1
    one_notice(res, logdir / "self", "cannot read", "skipped")
    assert "symlink loop" in res.stderr
    d = analysed(res)
    assert d["summary"]["files"] == 1  # the log was not read twice through the loop


def test_nonexistent_beside_real(logdir, tmp_path):
    res = analyze(logdir, tmp_path / "missing.log")
    assert res.exit_code == 1
    one_notice(res, tmp_path / "missing.log", "no such file")
    analysed(res)


# ------------------------------------------------------------------ a 100 MB single line


def _write_huge(p: Path, mb: int = 100) -> int:
    """A realistic monster line (a printed tensor), WARN lines before and after."""
    unit = b"tensor([0.1234, 0.5678, 0.9012]), "
    n = (mb << 20) // len(unit)
    with open(p, "wb") as fh:
        fh.write(b"start\n")
        for _ in range(n // 10000):
            fh.write(unit * 10000)
        fh.write(b"\n" + GOOD)
    return (n // 10000) * 10000 * len(unit) + 1  # bytes of line 2 incl. its newline


def test_hundred_mb_single_line(tmp_path):
    p = tmp_path / "huge.log"
    size = _write_huge(p)
    code = ("import resource,sys;from ncclsleuth.cli import main\n"
            "try: main(['analyze', sys.argv[1], '--format', 'json'])\n"
            "finally: print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stderr
    cut = [ln for ln in proc.stderr.splitlines() if str(p) in ln]
    assert len(cut) == 1 and "line 2 is longer than 1048576 bytes: cut at 1048576 bytes" in cut[0], proc.stderr
    rss_kb = int(proc.stderr.split("MAXRSS ")[1].split()[0])
    assert rss_kb < 400 * 1024, f"peak RSS {rss_kb} KiB for a {size} byte line"
    assert WARN in proc.stdout


def test_long_line_notice_names_dropped_bytes(tmp_path):
    p = tmp_path / "long.log"
    p.write_bytes(b"a" * (3 << 20) + b"\n" + GOOD)
    r = LineReader(InputFile(str(p)))
    lines = list(r)
    assert lines[-1] == (2, WARN) and len(lines[0][1]) == 1 << 20
    assert r.notices[0].message == f"line 1 is longer than {1 << 20} bytes: cut at {1 << 20} bytes ({(2 << 20) + 1} bytes dropped)"


def test_long_cr_only_line_is_cut_too(tmp_path):
    """Decoded paths (UTF-16, CR-only) have the same cap: memory of one line, not the file."""
    p = tmp_path / "u16.log"
    p.write_bytes(("x" * (3 << 20) + "\n" + WARN + "\n").encode("utf-16"))
    r = LineReader(InputFile(str(p)))
    lines = list(r)
    assert lines[-1] == (2, WARN) and len(lines[0][1]) == 1 << 20
    assert "cut at" in r.notices[-1].message


def test_long_word_line_is_fast(tmp_path):
    p = tmp_path / "word.log"
    p.write_bytes(GOOD + b"Error: " + b"Connection" * 6500 + b"\n")
    try:
        proc = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", str(p), "--format", "json"],
                              capture_output=True, timeout=3)
    except subprocess.TimeoutExpired:
        pytest.fail("analyze of one 64 KB line took over 3 s")
    assert proc.returncode == 1


# ------------------------------------------------------------------ FIFO and stdin: never block


def test_fifo_does_not_block(logdir):
    fifo = logdir / "pipe.log"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", str(logdir), "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stderr
    assert f"{fifo}: not a regular file (FIFO, device or socket), skipped" in proc.stderr
    assert WARN in proc.stdout


def test_fifo_alone_exit_2(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", str(fifo)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "not a regular file" in proc.stderr


def test_stdin_binary_and_text():
    res = cli("analyze", "-", "--format", "json", input=GOOD)
    assert res.exit_code == 1
    analysed(res)
    res = cli("parse", "-", input=b"\x7fELF" + bytes(range(256)) * 8)
    assert res.exit_code == 2 and "<stdin>" in res.stderr and "binary" in res.stderr


# ------------------------------------------------------------------ internal errors: --debug


def test_internal_error_one_line_and_debug_traceback(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(GOOD)
    code = ("import sys, ncclsleuth.api as A\n"
            "def boom(*a, **k): raise RuntimeError('injected failure')\n"
            "A.analyze = boom\n"
            "from ncclsleuth.cli import main\n"
            "main(sys.argv[1:])\n")
    plain = subprocess.run([sys.executable, "-c", code, "analyze", str(p)], capture_output=True, text=True, timeout=60)
    assert plain.returncode == 2
    assert "Traceback" not in plain.stderr
    lines = [ln for ln in plain.stderr.splitlines() if ln.strip()]
    assert lines == ["ncclsleuth: internal error: RuntimeError: injected failure (run with --debug for details)"]
    debug = subprocess.run([sys.executable, "-c", code, "--debug", "analyze", str(p)], capture_output=True,
                           text=True, timeout=60)
    assert debug.returncode != 0
    assert "Traceback (most recent call last)" in debug.stderr and "injected failure" in debug.stderr


def test_rss_helper_sane():
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
