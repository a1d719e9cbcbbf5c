"""Property-based fuzzing: random and mangled input never escapes as an exception.

Modest example counts keep the default run fast; ``python tools/fuzz.py --seconds 600``
runs the same targets for a fixed time budget.
"""
from __future__ import annotations

import json
import os
import tempfile

from _corpus import lines as corpus_lines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclsleuth import api
from ncclsleuth.model.job import JobModel
from ncclsleuth.parse.envelope import Record, peel
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser
from ncclsleuth.renderers import render
from ncclsleuth.rules.loader import load_rules

RULES, _ = load_rules()
CACHE = ShapeCache()
REAL = corpus_lines() or (b"node1:1:1 [0] NCCL WARN x",)
FUZZ = settings(max_examples=int(os.environ.get("NCCLSLEUTH_FUZZ_EXAMPLES", "60")), deadline=3000,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# characters the envelope and grammar care about, plus anything at all
_SPECIAL = list("[]<>():,.;=/-_`*> \t\r\x1b\x00\"'#%0123456789") + ["NCCL ", "WARN ", "INFO ", "<stdout>:",
            "[1,2]", "[rank3]:", "Traceback (most recent call last):", 'File "x.py", line 1, in f',
            "RuntimeError: ", "](http://a)", "  x.py:12", "[E", "ERROR", "node1:12:34 [0] ", "misc/socket.cc:1 "]
TEXT = st.lists(st.one_of(st.sampled_from(_SPECIAL), st.text(max_size=8)), max_size=40).map("".join)
REAL_LINE = st.sampled_from(REAL)


@st.composite
def mutated(draw) -> bytes:  # type: ignore[no-untyped-def]
    """A real line with byte flips, insertions, deletions or a cut."""
    b = bytearray(draw(REAL_LINE))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut", "dup"]))
        i = draw(st.integers(0, max(0, len(b) - 1)))
        if op == "flip" and b:
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and b:
            del b[i:i + draw(st.integers(1, 8))]
        elif op == "cut":
            del b[i:]
        elif op == "dup":
            b[i:i] = b[i:i + draw(st.integers(1, 20))]
    return bytes(b)


@st.composite
def spliced(draw) -> bytes:  # type: ignore[no-untyped-def]
    """Two real lines glued mid-line (interleaved ranks writing to one file)."""
    a, b = draw(REAL_LINE), draw(REAL_LINE)
    i = draw(st.integers(0, len(a)))
    j = draw(st.integers(0, len(b)))
    return a[:i] + b[j:] if draw(st.booleans()) else a[:i] + b + a[i:]


def check_report(report) -> None:  # type: ignore[no-untyped-def]
    out = json.loads(render("json", report))
    assert isinstance(out["findings"], list) and isinstance(out["unexplained"], list)


def analyze_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "rank0.log")
        with open(p, "wb") as fh:
            fh.write(data)
        report = api.analyze([p], api.Options(rules=RULES))
        check_report(report)


@FUZZ
@given(TEXT)
def test_peel_random_text(s):
    recs = peel(s)
    assert recs and all(isinstance(r, Record) for r in recs)
    assert all(r.family in ("nccl", "other") for r in recs)


@FUZZ
@given(st.lists(TEXT, max_size=20))
def test_file_parser_random_lines(ls):
    fp = FileParser("fuzz.log", CACHE)
    evs = list(fp.parse_lines((i + 1, s.replace("\n", " ")) for i, s in enumerate(ls)))
    for ev in evs:
        json.dumps(ev.to_dict())


@FUZZ
@given(st.lists(st.one_of(mutated(), spliced(), REAL_LINE), min_size=1, max_size=30))
def test_file_parser_mangled_real_lines(ls):
    fp = FileParser("fuzz.log", CACHE)
    text = [b.decode("utf-8", "replace").replace("\n", " ").replace("\r", " ") for b in ls]
    list(fp.parse_lines((i + 1, s) for i, s in enumerate(text)))
    fp2 = FileParser("fuzz.log", CACHE, keep_text=False, use_catalog=False, sink=JobModel())
    list(fp2.parse_block(1, "\n".join(text)))


@FUZZ
@given(st.binary(max_size=4096))
def test_analyze_random_bytes(data):
    analyze_bytes(data)


@FUZZ
@given(st.lists(st.one_of(mutated(), spliced(), REAL_LINE), min_size=1, max_size=40),
       st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_analyze_mangled_real_logs(ls, eol):
    analyze_bytes(eol.join(ls) + eol)


# ------------------------------------------------------------------ regressions found by fuzzing

_SHAPE_A = "gpu-node-05:41273:41273 [7] NCCL INFO Bootstrap : Using ib0:10.0.0.15<0>"
_SHAPE_B = "gpu-node-05:41273:4127# [7] NCCL INFO Bootstrap : Using ib0:10.0.0.15<0>"


def test_fuzz_regression_hash_in_number_field_lines():
    fp = FileParser("fuzz.log", ShapeCache())
    list(fp.parse_lines([(1, _SHAPE_A), (2, _SHAPE_B)]))




def test_fuzz_regression_hash_in_number_field_analyze():
    analyze_bytes((_SHAPE_A + "\n" + _SHAPE_B + "\n").encode())


_TREES = ("gpu-node-03:41133:4113s [3] NCCL INFO Channel node001:88133:88173 [6] NCCL INFO Trees [0] -1/-1/-1->14->6 "
          "[1] 12/11/-1->14->1501/0")


def test_fuzz_regression_glued_trees_line():
    analyze_bytes((_TREES + "\n").encode())


# ``str.isdigit`` is true for superscripts ("³") that ``int`` refuses: a number field holding
# one raised ValueError out of ``peel`` (tools/fuzz.py, seed 20261201, input 7xx,xxx).
_SUPERSCRIPT = "step 0 loss 0.7201 time 401.3ms427:41\u00b3427:41 [5] NCCL INFO NCCL version 2.23.4"


def test_fuzz_regression_superscript_digit_in_pid():
    rec = peel(_SUPERSCRIPT)[-1]
    assert (rec.family, rec.body, rec.pid, rec.tid, rec.dev) == ("nccl", "NCCL version 2.23.4", None, 41, 5)


def test_fuzz_regression_superscript_digit_analyze():
    analyze_bytes((_SUPERSCRIPT + "\n").encode())
