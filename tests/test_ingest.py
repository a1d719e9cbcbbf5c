"""Ingest: compressed, damaged and odd inputs are read (or skipped) with a notice, never a crash."""
from __future__ import annotations

import bz2
import gzip
import lzma

import pytest
from click.testing import CliRunner

from ncclsleuth.cli import main
from ncclsleuth.ingest.decode import LineReader, clean
from ncclsleuth.ingest.sources import InputFile, discover

LINE = "node1:10:10 [0] NCCL INFO Using network IB"


def read(path, **kw):
    r = LineReader(InputFile(str(path)), **kw)
    return list(r), [n.message for n in r.notices]


@pytest.mark.parametrize("suffix,opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_compressed(tmp_path, suffix, opener):
    p = tmp_path / ("log" + suffix)
    with opener(p, "wb") as fh:
        fh.write(f"{LINE}\nsecond\n".encode())
    lines, notices = read(p)
    assert lines == [(1, LINE), (2, "second")]
    assert notices == []


def test_compressed_name_does_not_matter(tmp_path):
    p = tmp_path / "log.txt"
    p.write_bytes(gzip.compress(b"a\nb\n"))
    assert read(p)[0] == [(1, "a"), (2, "b")]


def test_invalid_utf8_replaced_with_notice(tmp_path):
    p = tmp_path / "log.txt"
    p.write_bytes(b"ok\nbad \xff\xfe here\n")
    lines, notices = read(p)
    assert lines == [(1, "ok"), (2, "bad \ufffd\ufffd here")]
    assert notices == ["1 line(s) with invalid UTF-8, decoded with replacement characters"]


def test_crlf(tmp_path):
    p = tmp_path / "log.txt"
    p.write_bytes(b"a\r\nb\r\n")
    assert read(p) == ([(1, "a"), (2, "b")], [])


def test_cr_redraws_keep_every_segment(tmp_path):
    p = tmp_path / "log.txt"
    p.write_bytes(b"start\n 10%|#  \r 50%|### \r" + LINE.encode() + b"\r\n")
    lines, _ = read(p)
    assert lines == [(1, "start"), (2, " 10%|#  "), (2, " 50%|### "), (2, LINE)]
    assert clean("a\r\rb\r") == ["a", "b"]


def test_ansi_stripped(tmp_path):
    p = tmp_path / "log.txt"
    p.write_bytes(b"\x1b[31mERROR\x1b[0m: \x1b[1mboom\x1b[0m\n")
    assert read(p)[0] == [(1, "ERROR: boom")]


def test_utf16_bom(tmp_path):
    p = tmp_path / "log.txt"
    p.write_bytes(("a\n" + LINE + "\n").encode("utf-16"))
    lines, notices = read(p)
    assert lines == [(1, "a"), (2, LINE)]
    assert notices == ["UTF-16 text, decoded"]


def test_nul_bytes_dropped(tmp_path):
    p = tmp_path / "log.txt"
    p.write_bytes(b"x" * 200 + b"\n" + b"ab\x00cd\n")
    assert read(p)[0] == [(1, "x" * 200), (2, "abcd")]


def test_binary_file_skipped(tmp_path):
    p = tmp_path / "core"
    p.write_bytes(b"\x7fELF" + bytes(range(256)) * 4)
    assert read(p) == ([], ["binary file, not a text log, skipped"])


def test_long_line_cut(tmp_path):
    p = tmp_path / "log.txt"
    p.write_bytes(b"x" * 5000 + b"\nnext\n")
    lines, notices = read(p, max_line=1024)
    assert lines == [(1, "x" * 1024), (2, "next")]
    assert notices == ["line 1 is longer than 1024 bytes: cut at 1024 bytes (3977 bytes dropped)"]


def test_empty_folder_notice(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    found = discover([str(d)])
    assert found.files == []
    assert [(n.path, n.message) for n in found.notices] == [(str(d), "folder holds no readable log files")]


def test_folder_walk_sorted_recursive(tmp_path):
    for rel in ("b/z.log", "b/a.log", "a.log", "c/d/e.txt", ".hidden", "img.png"):
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x\n")
    found = discover([str(tmp_path)])
    assert [f.path[len(str(tmp_path)) + 1:] for f in found.files] == ["a.log", "b/a.log", "b/z.log", "c/d/e.txt"]
    assert [n.message for n in found.notices] == ["not a log file (by its extension), skipped"]


def test_stdin_dash():
    res = CliRunner().invoke(main, ["parse", "-"], input=LINE + "\n")
    assert res.exit_code == 0, res.output
    assert '"kind": "net_selected"' in res.output and '"network": "IB"' in res.output
    assert '"source": "<stdin>"' in res.output


def _stderr_lines(res):
    return [ln for ln in res.stderr.splitlines() if ln.strip()]


def test_nonexistent_path_exit_2_no_traceback(tmp_path):
    res = CliRunner().invoke(main, ["parse", str(tmp_path / "nope.log")])
    assert res.exit_code == 2
    assert res.stdout == ""
    assert "Traceback" not in res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert any(str(tmp_path / "nope.log") in ln for ln in _stderr_lines(res))


def test_nonexistent_path_one_stderr_line(tmp_path):
    res = CliRunner().invoke(main, ["parse", str(tmp_path / "nope.log")])
    assert len(_stderr_lines(res)) == 1


@pytest.mark.parametrize("data", [
    b"a\nb\nc\n", b"a\nb\nc", b"one line, no end", b"x\r\ny\r\nz\r\n", b"p\x00q\nr\n", b"\xff\xfebad utf-8\nok\n",
    b"short\n" + b"L" * 300 + b"\nafter\n" + b"M" * 500, b"\n\n\n", b"",
    "\ufeffh\u00e9llo\n\u2588\u2588 progress\rredraw\n".encode(),
])
@pytest.mark.parametrize("block", [8, 64, 4096])
def test_a_blocks_line_count_is_its_newlines_plus_one(tmp_path, data, block):
    """``BlockReader.block_lines`` (handed to ``FileParser.parse_block`` so it does not count
    again) is the yielded block's newlines + 1, or -1 where the reader did not count them;
    long lines cut (max_line), CRLF folded, NULs removed, a last line with no line end."""
    from ncclsleuth.ingest.blocks import BlockReader

    p = tmp_path / "x.log"
    p.write_bytes(data)
    reader = BlockReader(InputFile(str(p)), block=block, max_line=128)
    counts = []
    for first, text in reader:
        assert reader.block_lines in (-1, text.count("\n") + 1), (first, text)
        counts.append(reader.block_lines)
    if not data.startswith((b"\xff\xfe", b"\xfe\xff")) and b"\x00" not in data:  # read by blocks, not re-blocked
        assert all(n > 0 for n in counts), counts


def test_a_file_reached_twice_is_read_once(tmp_path):
    """The walk names a file by its folder's real path and its name (one realpath a folder):
    the same file given on the command line, through a link inside the folder, or through a
    linked folder inside it is still one input, read under its first name."""
    root = tmp_path / "job"
    (root / "sub").mkdir(parents=True)
    (root / "rank0.log").write_text("a\n")
    (root / "sub" / "rank1.log").write_text("b\n")
    (root / "zz-alias.log").symlink_to(root / "rank0.log")  # a link to a file inside: followed, once
    (tmp_path / "job-link").symlink_to(root)  # the folder through a link to it
    found = discover([str(root / "rank0.log"), str(root), str(tmp_path / "job-link")])
    assert [f.path for f in found.files] == [str(root / "rank0.log"), str(root / "sub" / "rank1.log")]
    # the linked folder's files were all read: said so, not "no readable log files"
    assert [(n.path, n.message, n.severity) for n in found.notices] == [
        (str(tmp_path / "job-link"), "every log file in it was read already under another name (3)", "info")]  # rank0, zz-alias, sub/rank1


def test_a_walked_folder_that_is_a_link_names_its_files_by_the_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "rank0.log").write_text("a\n")
    (tmp_path / "alias").symlink_to(real)
    found = discover([str(tmp_path / "alias")])
    assert [f.path for f in found.files] == [str(tmp_path / "alias" / "rank0.log")]


@pytest.mark.parametrize("block", [4, 16, 4096])
def test_a_blocks_last_line_has_no_cr_in_a_crlf_file(tmp_path, block):
    """Before: the LF that ends a block is cut, not folded, so the CR of a CRLF file's block's last
    line stayed on it (only CRLFs inside a block were folded): every block's last line, and a
    file of one rank's last line in the report, ended in a CR (a terminal returns to the start
    of the line there).  A lone CR at the end of the file (no LF) is a progress redraw: kept."""
    from ncclsleuth.ingest.blocks import BlockReader

    lines = [f"line {i} {'x' * (i % 7)}" for i in range(30)]
    p = tmp_path / "x.log"
    p.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    reader = BlockReader(InputFile(str(p)), block=block)
    got, plain = [], []
    for _, text in reader:
        got += text.split("\n")
        plain.append(reader.plain)
    assert got == lines and not any(plain)
    p.write_bytes(b"a\r\nb\r")
    assert [t for _, t in BlockReader(InputFile(str(p)), block=block)] in (["a\nb\r"], ["a", "b\r"])
