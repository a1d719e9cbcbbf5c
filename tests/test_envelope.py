"""The line envelope: every wrapper of corpus/README.md 'Shapes seen in real logs'.

Data: fixtures/parse/envelope_lines.yaml (line -> records from peel() and the event).
"""
from __future__ import annotations

import pytest
from _linecases import check, ident, load

from ncclsleuth.parse.envelope import peel

CASES = load("envelope_lines.yaml")


@pytest.mark.parametrize("case", CASES, ids=[ident(c) for c in CASES])
def test_records(case):
    got = [{k: v for k, v in r._asdict().items() if v is not None} for r in peel(case["line"])]
    assert got == case["records"]


@pytest.mark.parametrize("case", CASES, ids=[ident(c) for c in CASES])
def test_event(case):
    check(case)
