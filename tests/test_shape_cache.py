"""The shape cache replays a parse for lines of the same shape: it must never change a result."""
from __future__ import annotations

from pathlib import Path

import pytest
from _linecases import PARSE, load
from conftest import CORPUS

from ncclsleuth.ingest.decode import LineReader
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

FIXTURE_LOGS = sorted((PARSE.parent / "corpus").glob("*/log.txt"))
CORPUS_LOGS = sorted(CORPUS.glob("*/*/log.txt")) if CORPUS.exists() else []


def _events(lines, enabled, keep_text=True):
    fp = FileParser("t", ShapeCache(enabled=enabled, store=False), keep_text=keep_text)
    return [e.to_dict() for e in fp.parse_lines(lines)]


def _file_lines(path: Path):
    return list(LineReader(InputFile(str(path))))


@pytest.mark.parametrize("path", FIXTURE_LOGS + CORPUS_LOGS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_cache_equals_plain_on_logs(path):
    lines = _file_lines(path)
    # parse twice in the same cache so that the second pass is all cache hits
    assert _events(lines + lines, True) == _events(lines + lines, False)


def test_cache_equals_plain_on_line_fixtures():
    lines = []
    for name in ("nccl_lines.yaml", "torch_lines.yaml", "nccltests_lines.yaml", "envelope_lines.yaml"):
        lines += [c["line"] for c in load(name)]
    numbered = list(enumerate(lines + lines, 1))
    assert _events(numbered, True) == _events(numbered, False)


def test_same_shape_different_numbers():
    cache = ShapeCache(enabled=True)
    a = "Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/3/GDRDMA"
    b = "Channel 13/1 : 15[3] -> 0[12] [send] via NET/IB/11(4)/GDRDMA"
    c = "Channel 05/1 : 123[5] -> 4567[6] [send] via NET/IB/2/GDRDMA"
    ra, rb, rc = cache.parse(a), cache.parse(b), cache.parse(c)
    assert ra[0] == rb[0] == rc[0] == "channel_conn"
    assert ra[1]["src"] == "7[7]" and rc[1]["src"] == "123[5]" and rc[1]["dst"] == "4567[6]"
    assert rb[1]["via"] == "NET/IB/11(4)/GDRDMA" and rb[1]["chan"] == "13/1"
    assert cache.hits >= 1
    # hex values and pointers in the same shape
    p1 = cache.parse("comm 0x7f3a2c000e00 rank 3 nranks 16 cudaDev 3 busId 5d000 - Init COMPLETE")
    p2 = cache.parse("comm 0x55d5c8a0e6b0 rank 12 nranks 128 cudaDev 7 busId db000 - Init COMPLETE")
    assert p1[1]["comm"] == "0x7f3a2c000e00" and p1[1]["bus_id"] == "5d000" and p1[1]["comm_rank"] == "3"
    assert p2[1]["comm"] == "0x55d5c8a0e6b0" and p2[1]["bus_id"] == "db000" and p2[1]["comm_rank"] == "12"
    assert p2[1]["nranks"] == "128" and p2[1]["cuda_dev"] == "7"
    # and the same through the whole parser: typed values differ per line
    fp = FileParser("t", ShapeCache(enabled=True))
    e1 = fp.parse_line(1, "h:1:1 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/3/GDRDMA")[0]
    e2 = fp.parse_line(2, "h:1:1 [0] NCCL INFO Channel 31/1 : 70[3] -> 81[10] [send] via NET/IB/13(9)/GDRDMA")[0]
    assert (e1.channel, e1.src, e1.dst, e1.nic, e1.proxy_rank) == (0, 7, 8, 3, None)
    assert (e2.channel, e2.conn_index, e2.src, e2.dst, e2.dst_dev, e2.nic, e2.proxy_rank) == (31, 1, 70, 81, "10", 13, 9)


@pytest.mark.parametrize("keep_text", [True, False], ids=["message-shapes", "whole-line-shapes"])
@pytest.mark.parametrize("compile_after", [1, 2, 10**9])
def test_interpreted_and_compiled_fills_agree(monkeypatch, compile_after, keep_text):
    """A template fills by reading its spans for its first uses, then by generated code
    (message shapes, whole NCCL lines and their position-exact fills): every mix must
    give the plain parse."""
    import ncclsleuth.parse.grammar as G

    monkeypatch.setattr(G, "COMPILE_AFTER", compile_after)
    lines = []
    for name in ("nccl_lines.yaml", "torch_lines.yaml", "nccltests_lines.yaml", "envelope_lines.yaml"):
        lines += [c["line"] for c in load(name)]
    numbered = list(enumerate(lines * 3, 1))
    assert _events(numbered, True, keep_text) == _events(numbered, False, keep_text)


def test_each_span_form_reads_the_same_both_ways():
    import ncclsleuth.parse.grammar as G

    parts = ["ab", "12", "cd", "345", "ef"]
    spans = {"one": (0, 0, 0, None), "inner": (2, 1, 2, 2), "tail": (2, 1, 2, None), "across": (0, 1, 4, 1),
             "digits": (1, 0, 1, None), "two": (1, 0, 3, None), "many": [(0, 0, 0, None), (3, 0, 4, 2)]}
    compiled = G._compile_fill(spans)(parts)
    assert compiled == {name: [G._cut(parts, x) for x in sp] if isinstance(sp, list) else G._cut(parts, sp)
                        for name, sp in spans.items()}
    assert compiled["across"] == "b12cd345e" and compiled["two"] == "12cd345"


@pytest.mark.parametrize("compile_after", [1, 2])
def test_a_line_too_big_to_compile_fills_the_same_every_time(monkeypatch, compile_after):
    """The desync report of a 16,384-rank job lists every rank on one line; its fill
    once compiled to a '+' chain the compiler recursed into until RecursionError, and
    the line vanished from the second occurrence of its shape on (with a warm cache,
    from the first)."""
    import ncclsleuth.parse.grammar as G

    monkeypatch.setattr(G, "COMPILE_AFTER", compile_after)
    ranks = ", ".join(str(i) for i in range(16384))
    lines = ["[rank0]:[E1129 11:41:55.335404799 ProcessGroupNCCL.cpp:1936] Rank 0",
             "\t - [0] Timeout at collective: ALLREDUCE, #1245",
             "\t   #1245 started ranks:",
             f"\t     [{ranks}] started ALLREDUCE"]
    numbered = list(enumerate(lines * 3, 1))
    for keep_text in (True, False):
        cached = _events(numbered, True, keep_text)
        assert cached == _events(numbered, False, keep_text)
        started = [e for e in cached if e["kind"] == "desync_report" and e.get("what") == "started"]
        assert [e["line"] for e in started] == [4, 8, 12] and len(started[0]["ranks"]) == 16384
    spans = {"all": (0, 0, 2 * 16384, None)}
    parts = G._DIGITS.split(lines[3])
    assert G._compile_fill(spans)(parts) == {"all": G._cut(parts, spans["all"])} == {"all": lines[3]}


def test_value_runs_split_as_the_plain_pattern():
    """The fast split (a pattern that starts with a character set) cuts every text where the
    plain definition of a value run does: hex after 0x, digit runs, non-ASCII digits too."""
    import random

    from ncclsleuth.parse import grammar as G

    rnd = random.Random(5)
    alphabet = "0123456789xXabfgAF .:[]\u0663\u0660"
    texts = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14))) for _ in range(50_000)]
    texts += ["0x1f 10x5 00x1 0x x0xg", "comm 0x5587676e6446 rank 12 nranks 1600", "\u0660x1 \u0663\u0660"]
    assert [G.value_runs(t) for t in texts] == [G._DIGITS.split(t) for t in texts]


def test_info_key_masks_the_value_runs_the_split_finds():
    """grammar.info_key: each digit run of value_runs masked by NULs, each hex run by 0x80 bytes,
    every other character in place (so that lines of one key have their runs where the key says)."""
    import random

    from ncclsleuth.parse import grammar as G

    rng = random.Random(20261202)
    texts = ["comm 0x55f6e5fcdc29 rank 5238 busId ba000 commId 0xb5ca0139f4c8d965", "10x5 a0x1 0xab0x12 0x 0xg"]
    texts += ["".join(rng.choice("0x1a9fF g=") for _ in range(rng.randint(0, 16))) for _ in range(20_000)]
    for t in texts:
        parts = G.value_runs(t)
        want = "".join(p if i % 2 == 0 else ("\x80" if p.startswith("0x") else "\0") * len(p)
                       for i, p in enumerate(parts))
        assert G.info_key(t) == want.encode("latin-1"), t
