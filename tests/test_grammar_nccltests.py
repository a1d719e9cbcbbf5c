"""Exact field assertions for nccltests lines (data: fixtures/parse/nccltests_lines.yaml)."""
from __future__ import annotations

import pytest
from _linecases import check, ident, load

CASES = load("nccltests_lines.yaml")


@pytest.mark.parametrize("case", CASES, ids=[ident(c) for c in CASES])
def test_line(case):
    check(case)
