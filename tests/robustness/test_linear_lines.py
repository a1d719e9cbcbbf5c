"""Linear time and bounded memory on every line: 1 MB adversarial lines of each shape through
every per-line path (the envelope, the line parser, the block parser, redaction).

The issue's reproduction: ``envelope.peel`` recursed once per record glued onto a line and
copied the rest each time; one 1 MB line of glued NCCL prefixes cost 5 s and 530 MB before
a RecursionError (and the redactor, recursing the same way, let every host through past
~1,000 glued records).  Each shape is a 1 MB line (the longest line the readers keep);
each path must take under ``BUDGET_S`` (CPU) and allocate at its peak under ``BUDGET_MB``
per MB of line, and 1 MB must cost no more than ``RATIO`` times 256 KB (a quadratic path
is 16x).
"""
from __future__ import annotations

import re
import time
import tracemalloc
from collections.abc import Callable

import pytest

from ncclsleuth.model.job import JobModel
from ncclsleuth.parse import envelope
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser
from ncclsleuth.report.redact import Redactor, redact_text

MB = 1 << 20
BUDGET_S = 4.0
BUDGET_MB = 64
RATIO = 8.0


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


#: shape -> a line of n characters
SHAPES: dict[str, Callable[[int], str]] = {
    "glued records": lambda n: _fill("node1:4242:4242 [0] misc/socket.cc:540 NCCL WARN socketPollConnect x ", n),
    "glued hosts": lambda n: "".join(f"node{i:06d}:1:1 [0] NCCL WARN x " for i in range(n // 30))[:n],
    "prefixes only": lambda n: _fill("node1:4242:4242 [0] ", n),
    "torch prefixes": lambda n: _fill("[rank0]:[E1129 11:41:55.585986114 ProcessGroupNCCL.cpp:1895] ", n),
    "nested quotes": lambda n: _fill("\"'(\"[", n),
    "long digits": lambda n: "NCCL INFO Channel " + "1" * (n - 18),
    "hex colons": lambda n: _fill("fe80:", n),
    "glued addresses": lambda n: _fill("10.1.2.3<40031>fe80::1:2(node1, 29500)aa:bb:cc:dd:ee:ff", n),
    "unbalanced [": lambda n: "[" * n,
    "unbalanced <": lambda n: _fill("node<", n),
    "markdown links": lambda n: _fill("[x](http://a/", n),  # was quadratic in peel (minutes for 256 KB)
    "spaces": lambda n: " " * (n - 8) + "a.py:1 x",
}

_CACHE = ShapeCache(store=False)


def _peel(line: str) -> None:
    envelope.peel(line)


def _parse_line(line: str) -> None:
    fp = FileParser("adv.log", _CACHE)
    for _ in fp.parse_lines([(1, line), (2, "node1:1:1 [0] NCCL WARN after")]):
        pass


def _parse_block(line: str) -> None:
    fp = FileParser("adv.log", _CACHE, keep_text=False, use_catalog=False, sink=JobModel())
    for _ in fp.parse_block(1, line + "\nnode1:1:1 [0] NCCL WARN after"):
        pass


def _redact(line: str) -> None:
    redact_text(line, Redactor())  # collect every identifier of the line, then replace them


PATHS = {"peel": _peel, "parse_lines": _parse_line, "parse_block": _parse_block, "redact": _redact}


def _cpu(fn: Callable[[str], None], line: str) -> float:
    t = time.process_time()
    fn(line)
    return time.process_time() - t


def _peak(fn: Callable[[str], None], line: str) -> int:
    tracemalloc.start()
    try:
        fn(line)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_one_mb_line_is_linear_and_bounded(shape: str, path: str) -> None:
    fn = PATHS[path]
    line = SHAPES[shape](MB)
    fn(SHAPES[shape](MB // 16))  # warm: grammar and catalog loaded, regexes compiled
    small = SHAPES[shape](MB // 4)
    small_t = _cpu(fn, small)
    took = _cpu(fn, line)
    # CPU time still moves under load (a CI run on a busy VM measured 0.199 s -> 1.616 s, 8.1x, for
    # a path that takes 4.1-4.3x alone): up to three more rounds, interleaved, the best of each
    for _ in range(3):
        if took < max(RATIO * small_t, 0.25):
            break
        small_t = min(small_t, _cpu(fn, small))
        took = min(took, _cpu(fn, line))
    assert took < BUDGET_S, f"{shape} through {path}: {took:.2f} s"
    # 4x the input, at most RATIO x the time (quadratic would be 16x); below 0.25 s noise rules
    assert took < max(RATIO * small_t, 0.25), f"{shape} through {path}: {small_t:.3f} s -> {took:.3f} s for 4x"
    # memory, traced on 64 KB (tracing every allocation of a 1 MB line takes a minute): at most
    # BUDGET_MB per MB of line (the old peel: 530 MB for 1 MB)
    peak = _peak(fn, SHAPES[shape](MB // 16))
    assert peak < BUDGET_MB * MB // 16, f"{shape} through {path}: {peak / MB:.1f} MB at the peak for 64 KB"


def test_glued_records_all_recovered_and_redacted() -> None:
    """Linear is not lossy: every glued record is a record, every host of them is redacted."""
    glued = "".join(f"node{i:05d}:1:1 [0] misc/socket.cc:540 NCCL WARN x " for i in range(20_000))
    records = envelope.peel(glued)
    assert len(records) == 20_000
    assert [r.host for r in records[:2]] == ["node00000", "node00001"]
    r = Redactor()
    for rec in records:
        r.add_host(rec.host)
    out = redact_text(glued, r)
    assert not re.search(r"node\d{5}", out)
