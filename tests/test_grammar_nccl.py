"""Exact field assertions for nccl lines (data: fixtures/parse/nccl_lines.yaml)."""
from __future__ import annotations

import re

import pytest
from _linecases import PARSE, check, ident, load, plain

from ncclsleuth.events import REGISTRY
from ncclsleuth.ingest.decode import LineReader
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.parse.build import ALIASES
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

GRAMMAR = PARSE.parent.parent / "ncclsleuth" / "parse" / "grammar"

CASES = load("nccl_lines.yaml")


@pytest.mark.parametrize("case", CASES, ids=[ident(c) for c in CASES])
def test_line(case):
    check(case)


# --------------------------------------------------------------------------- real corpus lines

CORPUS_CASES = load("corpus_lines.yaml")
_FIX = PARSE.parent / "corpus"


def _corpus_events(case_id: str) -> list:
    path = _FIX / case_id / "log.txt"
    fp = FileParser(str(path), ShapeCache(enabled=False))
    return list(fp.parse_lines(LineReader(InputFile(str(path)))))


@pytest.mark.parametrize("case", CORPUS_CASES, ids=[f"{c['case']}:{c['lineno']}" for c in CORPUS_CASES])
def test_corpus_line(case):
    assert (_FIX / case["case"] / "SOURCE").read_text().startswith("https://")
    evs = [plain(e) for e in _corpus_events(case["case"]) if e.line == case["lineno"] and e.kind == case["kind"]]
    assert evs, f"no {case['kind']} event at {case['case']}:{case['lineno']}"
    assert evs[0] == {"kind": case["kind"], **case["fields"]}


def test_every_grammar_kind_has_a_case():
    """Every event kind the grammar can produce is asserted by at least one line case."""
    rules = set(re.findall(r"->\s*(\w+)", (GRAMMAR / "messages.lark").read_text()))
    rules |= set(re.findall(r"^\??(\w+):", (GRAMMAR / "messages.lark").read_text(), re.M))
    kinds = {ALIASES.get(r, (r, {}))[0] for r in rules} & set(REGISTRY)
    kinds |= {"comm_end", "socket_retry", "ibv_retry", "ibv_error", "socket_error", "shm_error"}
    kinds -= {"nccl_other"}
    seen = set()
    for name in ("nccl_lines.yaml", "torch_lines.yaml", "nccltests_lines.yaml", "envelope_lines.yaml",
                 "corpus_lines.yaml", "host_lines.yaml"):
        for c in load(name):
            seen.add(c.get("kind"))
            seen.update(e["kind"] for e in c.get("events", ()))
    seen |= {"failure_field", "failure_block_head", "traceback", "exception"}  # block tests (torch)
    assert not kinds - seen, sorted(kinds - seen)
