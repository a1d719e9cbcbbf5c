"""The prefilter's long scans by RE2 (``ncclsleuth.parse.bytescan``) find what ``re`` finds:
the same first keyword from any position to any end, the same events from every fixture and
corpus log, the same report; and without RE2 (or with one that finds otherwise) ``re`` scans."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclsleuth import api
from ncclsleuth.ingest.blocks import BLOCK, BlockReader
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.parse import anchors as A
from ncclsleuth.parse import bytescan
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser
from ncclsleuth.renderers import render

ROOT = Path(__file__).resolve().parent.parent
LOGS = sorted(p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and p.suffix in (".txt", ".log", ""))
CORPUS = sorted((ROOT.parent / "shared" / "corpus").glob("*/*/log.txt"))
re2 = pytest.importorskip("re2", reason="google-re2 is not installed (pip install 'ncclsleuth[fast]')")

#: training output with a progress bar's block characters (2- and 3-byte UTF-8), keywords of
#: both kinds of first character, a 3-byte keyword ("● "), NCCL INFO lines and a glog line
LINES = [
    "Epoch 1:  42%|\u2588\u2588\u2588\u2588\u258c     | 420/1000 [01:02<01:26, 6.71it/s, loss=2.31]",
    "{'loss': 2.3104, 'learning_rate': 4.9e-05, 'epoch': 0.42}",
    "node3:4242:4260 [1] NCCL INFO Channel 00/24 : 0[1] -> 1[1] via P2P/IPC",
    "caf\u00e9 step 420 \u00b5s terminate called after throwing an instance of 'c10::Error'",
    "\u25cf nvidia-fabricmanager.service - NVIDIA fabric manager service",
    "srun: error: node7: task 3: Exited with exit code 1",
    "E1129 10:02:03.123456 4242 ProcessGroupNCCL.cpp:1234] [Rank 3] Watchdog caught collective operation timeout",
    "[rank12]:[E1129 10:02:03.1 ProcessGroupNCCL.cpp:616] timeout",
    "\u0663\u0664 plain text with an Arabic-Indic digit after E\u0661\u0662\u0663\u0664 and [rank\u0661]:[E",
]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every block long enough for RE2, RE2 loaded at the first, and loaded again for this test."""
    monkeypatch.setattr(bytescan, "MIN_BLOCK", 0)
    monkeypatch.setattr(bytescan, "WARMUP_BLOCKS", 0)
    monkeypatch.setattr(A, "PREFILTER_BYTES", bytescan.ByteSearch(A.PREFILTER, A.PREFILTER_BYTES.samples))


def _start(m: object) -> int | None:
    return None if m is None else m.start()  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", ["\n".join(LINES), "\n".join(x.encode("ascii", "replace").decode() for x in LINES)],
                         ids=["utf-8", "ascii"])
def test_re2_finds_the_first_keyword_where_re_does_from_any_position_to_any_end(fresh: None, text: str) -> None:
    search, short = A.block_search(text, text.encode())
    assert isinstance(search(text), bytescan.At)  # RE2's, not re's
    found = 0
    for pos in range(len(text) + 1):
        for end in (len(text), pos + 9, pos + 17, pos + 40, pos + 200):
            full = A.PREFILTER.search(text, pos, end)
            assert _start(search(text, pos, end)) == _start(full), (pos, end)
            assert _start(short(text, pos, end)) == _start(full), (pos, end)
            found += full is not None
    for pos in reversed(range(0, len(text) + 1, 7)):  # positions that move back, as a caller may
        assert _start(search(text, pos)) == _start(A.PREFILTER.search(text, pos)), pos
    assert found


def test_digits_are_ascii_in_both_engines() -> None:
    """``\\d`` is any Unicode digit to ``re`` and an ASCII one to RE2: the keywords say [0-9]."""
    assert A.PREFILTER.search("xE\u0661\u0662\u0663\u0664 y") is None
    assert _start(A.PREFILTER.search("xE1129 y")) == 1
    text = "x [rank\u0661]:[E"
    assert _start(A.PREFILTER.search(text)) == text.index("[E")  # "[E" itself, not "[rank"
    assert _start(A.PREFILTER.search("x [rank1]:[E")) == 2


def _events(path: Path, with_re2: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, str]]:
    monkeypatch.setattr(bytescan, "ENABLED", with_re2)
    fp = FileParser(str(path), ShapeCache(), keep_text=False, use_catalog=False)
    reader = BlockReader(InputFile(str(path)))
    out = []
    for first, block in reader:
        out.extend((e.kind, e.line, e.text) for e in fp.parse_block(first, block, raw=reader.raw))
    out.extend((e.kind, e.line, e.text) for e in fp.finish())
    return out


@pytest.mark.parametrize("path", LOGS + CORPUS, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_the_same_events_with_and_without_re2(fresh: None, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _events(path, True, monkeypatch) == _events(path, False, monkeypatch)


def _noise_log(path: Path) -> None:
    """~600 KiB of training output around a watchdog timeout: blocks long enough for RE2."""
    out = []
    for i in range(6000):
        out.append(LINES[i % 2])
        if i % 997 == 0:
            out.append(f"node3:4242:4260 [1] NCCL INFO Channel {i % 24:02d}/24 : 0[1] -> 1[1] via P2P/IPC")
    out[4000:4000] = LINES[4:8]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


@pytest.mark.parametrize("jobs", [1, 2], ids=["whole", "split"])
def test_the_same_report_with_and_without_re2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    """Also on a file cut into pieces (``--jobs 2``): each piece's blocks come with their bytes."""
    log = tmp_path / "rank3.log"
    _noise_log(log)
    assert log.stat().st_size > 4 * bytescan.MIN_BLOCK
    monkeypatch.setattr(A, "PREFILTER_BYTES", bytescan.ByteSearch(A.PREFILTER, A.PREFILTER_BYTES.samples))
    monkeypatch.setattr(bytescan, "WARMUP_BLOCKS", 2)  # RE2 from the log's third long block
    reports = []
    for on in (True, False):
        monkeypatch.setattr(bytescan, "ENABLED", on)
        options = api.Options(jobs=jobs, cache=False, piece_bytes=BLOCK if jobs > 1 else None)
        reports.append(render("json", api.analyze([str(log)], options)))
    if jobs == 1:  # split: the worker parsed every piece here (a forked copy of this switch)
        assert A.PREFILTER_BYTES._engine is not None  # RE2 scanned the first run's blocks
    assert reports[0] == reports[1]
    assert "Watchdog caught collective operation timeout" in reports[0]  # RE2 found the keyword's line


def test_without_re2_re_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "re2", None)  # import re2 fails as where it is not installed
    monkeypatch.setattr(bytescan, "MIN_BLOCK", 0)
    monkeypatch.setattr(bytescan, "WARMUP_BLOCKS", 0)
    scan = bytescan.ByteSearch(A.PREFILTER, A.PREFILTER_BYTES.samples)
    text = "\n".join(x for x in LINES if "error" not in x and "terminate" not in x)
    assert scan.for_block(text, text.encode()) is None and scan._loaded  # tried, not there
    monkeypatch.setattr(A, "PREFILTER_BYTES", scan)
    assert A.block_search(text, text.encode()) == (A.PREFILTER_RARE.search, A.PREFILTER_RARE.search)


def test_a_short_block_the_first_long_ones_and_the_switch_keep_re(monkeypatch: pytest.MonkeyPatch) -> None:
    scan = bytescan.ByteSearch(A.PREFILTER, A.PREFILTER_BYTES.samples)
    text = "\n".join(LINES)
    assert scan.for_block(text, text.encode()) is None  # under MIN_BLOCK: a paste
    assert not scan._loaded  # and RE2 not even loaded for it
    monkeypatch.setattr(bytescan, "MIN_BLOCK", 0)
    monkeypatch.setattr(bytescan, "WARMUP_BLOCKS", 3)
    assert [scan.for_block(text, text.encode()) for _ in range(3)] == [None] * 3  # a small log: re
    assert not scan._loaded
    assert scan.for_block(text, text.encode()) is not None  # the 4th long block: RE2
    monkeypatch.setattr(bytescan, "ENABLED", False)
    assert scan.for_block(text, text.encode()) is None


class _Wrong:
    """An engine that finds every match one byte late."""

    def __init__(self, eng: bytescan._Engine) -> None:
        self.eng = eng

    def match(self, anchor: object, raw: bytes, pos: int, end: int) -> list[tuple[int, int]]:
        s, e = self.eng.match(anchor, raw, pos, end)[0]
        return [(s + 1, e + 1) if s >= 0 else (s, e)]


def test_an_engine_that_finds_otherwise_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    eng = bytescan._load(A.PREFILTER, A.PREFILTER_BYTES.samples)
    assert eng is not None and bytescan._probe(A.PREFILTER, A.PREFILTER_BYTES.samples, eng)
    wrong = bytescan._Engine(_Wrong(eng).match, eng.unanchored)
    assert not bytescan._probe(A.PREFILTER, A.PREFILTER_BYTES.samples, wrong)
    # a pattern RE2 reads otherwise than re (a back-reference: RE2 refuses it)
    import re

    assert bytescan._load(re.compile(r"(a)\1"), ("aa",)) is None


def test_status_says_which_engine_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    scan = bytescan.ByteSearch(A.PREFILTER, A.PREFILTER_BYTES.samples)
    assert scan.status().startswith("RE2 (google-re2 ")
    monkeypatch.setattr(bytescan, "ENABLED", False)
    assert scan.status() == "re (NCCLSLEUTH_NO_RE2 is set)"
    monkeypatch.setattr(bytescan, "ENABLED", True)
    monkeypatch.setitem(sys.modules, "re2", None)  # installed, but its module does not load
    assert bytescan.ByteSearch(A.PREFILTER, A.PREFILTER_BYTES.samples).status().endswith(
        "did not load or failed its check)")


def test_version_says_the_engine() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "ncclsleuth", "--version"], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("ncclsleuth, version ")
    assert lines[1].startswith("prefilter of big logs: RE2 (google-re2 ")
    env = dict(__import__("os").environ, NCCLSLEUTH_NO_RE2="1")
    out = subprocess.run([sys.executable, "-m", "ncclsleuth", "-V"], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.splitlines()[1] == "prefilter of big logs: re (NCCLSLEUTH_NO_RE2 is set)"


_ENGINE = bytescan._compile(A.PREFILTER)
assert _ENGINE is not None
_PIECES = [k[:n] for k in A.KEYWORDS[::7] for n in (1, 3, len(k))] + [
    "\n", " ", "\u2588", "\u00e9", "\u25cf ", "E1", "E1129 ", "[rank", "[rank7]:[E", "\u0661", "x"]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_PIECES), max_size=120), cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_re2_and_re_agree_on_keyword_fragments(parts: list[str], cuts: list[int]) -> None:
    """Text made of keyword fragments, multi-byte characters and line ends: the first keyword from
    any position to any end is where ``re`` finds it, for the long-range and short-range searches."""
    text = "".join(parts)
    # the searcher itself, not through the check made when RE2 loads (which would refuse a
    # searcher that finds otherwise and leave re scanning: the same results, nothing tested)
    search = bytescan._searcher(_ENGINE, text, text.encode())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bytescan, "MIN_BLOCK", 0)
        mp.setattr(bytescan, "WARMUP_BLOCKS", 0)
        short = A.block_search(text, text.encode())[1]
    for pos in sorted(c % (len(text) + 1) for c in cuts) or [0]:
        for end in (len(text), pos + 5, pos + 31):
            want = _start(A.PREFILTER.search(text, pos, end))
            assert _start(search(text, pos, end)) == want, (pos, end)
            assert _start(short(text, pos, end)) == want, (pos, end)


def test_preload_skips_the_warm_up_and_respects_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    scan = bytescan.ByteSearch(A.PREFILTER, A.PREFILTER_BYTES.samples)
    monkeypatch.setattr(bytescan, "ENABLED", False)
    scan.preload()
    assert not scan._loaded
    monkeypatch.setattr(bytescan, "ENABLED", True)
    scan.preload()
    assert scan._loaded and scan._engine is not None and scan._waited == 0


@pytest.mark.parametrize("split", [False, True], ids=["files", "one-file"])
def test_the_parallel_engines_load_re2_before_they_fork(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         split: bool) -> None:
    """Workers forked after the load inherit RE2 instead of each reading 3 MiB with re first."""
    import ncclsleuth.parallel.local as L
    import ncclsleuth.parallel.split as S

    scan = bytescan.ByteSearch(A.PREFILTER, A.PREFILTER_BYTES.samples)
    for mod in (L, S):
        monkeypatch.setattr(mod, "PREFILTER_BYTES", scan)
    monkeypatch.setattr(L, "PARALLEL_MIN_BYTES", 0)
    logs = [tmp_path / "rank0.log", tmp_path / "rank1.log"]
    for log in logs:
        _noise_log(log)
    paths = [str(logs[0])] if split else [str(p) for p in logs]
    api.build(paths, api.Options(jobs=2, cache=False, piece_bytes=BLOCK if split else None))
    assert scan._loaded and scan._waited == 0  # loaded here, before any block was scanned
