"""Exact field assertions for torch lines (data: fixtures/parse/torch_lines.yaml)."""
from __future__ import annotations

import pytest
from _linecases import check, ident, load

from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

CASES = load("torch_lines.yaml")


@pytest.mark.parametrize("case", CASES, ids=[ident(c) for c in CASES])
def test_line(case):
    check(case)


BLOCKS = load("torch_blocks.yaml")


@pytest.mark.parametrize("block", BLOCKS, ids=[b["name"] for b in BLOCKS])
def test_block(block):
    fp = FileParser("t", ShapeCache(enabled=False))
    got = [{k: v for k, v in e.to_dict().items() if k not in ("text", "source")}
           for e in fp.parse_lines(enumerate(block["lines"], 1)) if e.kind != "text"]
    assert got == block["events"]
