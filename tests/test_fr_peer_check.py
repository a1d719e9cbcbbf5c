"""The peer check: ncclsleuth against torchfrtrace on every Flight Recorder fixture.

torchfrtrace's outputs are committed with the fixtures (CI has no torch); the live run is
``python tools/fr_peer_check.py --live``.  Wherever torchfrtrace names the culprit,
ncclsleuth names the same ranks and sequence number; where torchfrtrace gives up or
blames the wrong ranks, ncclsleuth still names the culprit (or says why the dumps hold
nothing)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fr_peer_check", ROOT / "tools" / "fr_peer_check.py")
assert _spec is not None and _spec.loader is not None
peer = importlib.util.module_from_spec(_spec)
sys.modules["fr_peer_check"] = peer
_spec.loader.exec_module(peer)

CASES = {c.name: c for c in peer.cases(live=False)}

#: case -> (what torchfrtrace says at best, how it compares, ncclsleuth's culprits)
EXPECTED = {
    "fr-bcast-vs-allreduce": ("culprit rank 2 at #11 (0:default_pg, COLLECTIVE_TYPE_MISMATCH)",
                              "same culprit and collective", {2}),
    "fr-killed-rank": ("cannot decide: missed FR dumps from ranks {3} (x11)", "torchfrtrace gives up", {3}),
    "fr-ring-wrap": ("culprit rank 1 at #16 (0:default_pg, COLLECTIVE_TYPE_MISMATCH)", "same culprit and collective",
                     {1}),
    "fr-size-mismatch": ("culprit rank 2 at #11 (0:default_pg, SIZE_OR_SYNTAX_MISMATCH)",
                         "same culprit and collective", {2}),
    "fr-size-mismatch-detail": ("no culprit: blocks with 'group info: :', 'expected ranks: set()'",
                                "torchfrtrace gives up", set()),
    "fr-skip-allreduce": ("culprit rank 1 at #16 (0:default_pg, COLLECTIVE_TYPE_MISMATCH)",
                          "same culprit and collective", {1}),
    "fr-slow-rank0": ("missing ranks {0} at #11 (0:default_pg)", "same culprit and collective", {0}),
    "fr-subgroup-skip": ("missing ranks {2} at #11 (0:default_pg); missing ranks {3} at #11 (2:dp_pair1)",
                         "torchfrtrace also names rank(s) [2]; ncclsleuth follows them to the culprit", {3}),
    "v1.4-missing-rank (constructed)": ("stops: KeyError: 'collective_seq_id'", "torchfrtrace gives up", {1}),
    "v2.1-size-mismatch (constructed)": ("culprit rank 3 at #3 (0:default_pg, SIZE_OR_SYNTAX_MISMATCH)",
                                         "same culprit and collective", {3}),
    "v2.9-desync (constructed)": ("culprit ranks 0,1,2,3,4,6,7 at #4 (0:default_pg, COLLECTIVE_TYPE_MISMATCH)",
                                  "torchfrtrace blames [0, 1, 2, 3, 4, 6, 7]: its reference rank was the culprit",
                                  {5}),
}


def test_every_dump_fixture_is_compared():
    assert set(CASES) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_ncclsleuth_names_the_culprit_torchfrtrace_names_and_more(name):
    said, how, culprits = EXPECTED[name]
    best, dumps_only, _, _, compared, problems = peer.compare(CASES[name])
    assert best.summary == said
    assert compared == how
    assert dumps_only.culprits == culprits
    assert problems == []
    if not best.gave_up and best.seqs:
        assert best.seqs & dumps_only.seqs


def test_the_torchfrtrace_outputs_as_written_are_the_ones_case_yaml_describes():
    raw = {n: peer.read_torchfrtrace(c.outputs["as written"]).summary for n, c in CASES.items()
           if "as written" in c.outputs and not n.endswith("(constructed)")}
    assert raw["fr-skip-allreduce"] == "stops: KeyError: ('0', 3)"
    assert raw["fr-subgroup-skip"] == "stops: KeyError: ('2', 3)"
    assert raw["fr-killed-rank"] == "stops: AssertionError: Missing dump files from ranks {3}"


def test_a_wrong_comparison_is_caught():
    case = CASES["fr-bcast-vs-allreduce"]
    fake = peer.Case(case.name, "rank 0", case.dumps, [], case.outputs)  # pretend the culprit was rank 0
    *_, how, problems = peer.compare(fake)
    assert how == "torchfrtrace blames [2]: its reference rank was the culprit"
    assert problems == ["ncclsleuth blames [2], not the culprit [0]"]
