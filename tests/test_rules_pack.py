"""Every rule's embedded tests (one pytest case each) and meta-tests over the pack."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ncclsleuth.rules.loader import default_rule_dir, load_rules
from ncclsleuth.rules.schema import CATEGORIES
from ncclsleuth.ruletests import findings_of, run_rule_test

RULES, _ = load_rules()
CASES = [(r, t) for r in RULES for t in r.tests]


@pytest.mark.parametrize("rule,case", CASES, ids=[f"{r.id}_{t.name}" for r, t in CASES])
def test_rule_case(rule, case):
    problem = run_rule_test(rule, case)
    assert problem is None, f"{rule.id} {case.name}: {problem}"


@pytest.mark.parametrize("rule,case", [(r, t) for r, t in CASES if t.should_fire],
                         ids=[f"{r.id}_{t.name}" for r, t in CASES if t.should_fire])
def test_fail_case_names_exact_rule_and_line(rule, case):
    """The finding carries this rule's id and the expected evidence line, exactly."""
    findings = findings_of(rule, case)  # through the orchestrator, as analyze (or watch) reads logs
    assert [f.rule_id for f in findings] == [rule.id]
    ev = findings[0].evidence
    if case.expect_line is not None:
        assert case.expect_line in [e.line for e in ev]
    if case.expect_text is not None:
        assert any(case.expect_text in e.text for e in ev)


def test_pack_is_not_empty_and_covers_every_root_cause_label():
    labels = {"wrong_interface", "socket_fallback", "roce_gid", "ib_link_error", "network_blocked",
              "rendezvous_misconfig", "collective_desync", "collective_timeout", "duplicate_gpu", "shm_limit",
              "ulimit", "p2p_topology", "cuda_oom", "version_mismatch", "gdr_peermem", "hardware_fault"}
    covered = {r.category for r in RULES}
    assert labels <= covered, f"no rule for {sorted(labels - covered)}"


def test_ids_and_names_unique():
    ids = [r.id for r in RULES]
    names = [r.name for r in RULES]
    assert len(ids) == len(set(ids))
    assert len(names) == len(set(names))


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_has_fix_references_and_both_test_kinds(rule):
    assert rule.fix.strip()
    assert rule.references
    assert any(t.should_fire for t in rule.tests), "needs a fail snippet"
    assert any(not t.should_fire for t in rule.tests), "needs a pass snippet"
    assert rule.category in CATEGORIES
    assert Path(rule.path).stem == rule.id, "file name must be the rule id"


def test_no_rule_advises_nccl_timeout():
    """NCCL reads no NCCL_TIMEOUT variable: a fix must never tell users to set it."""
    for r in RULES:
        for line in r.fix.splitlines():
            assert not re.search(r"export\s+NCCL_TIMEOUT\b|NCCL_TIMEOUT=", line), r.id


def test_rule_files_are_plain_yaml_data():
    for path in default_rule_dir().rglob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        assert isinstance(doc, dict)


def test_count_says_at_least_when_events_were_capped(tmp_path, monkeypatch):
    """Beyond KEEP_PER_KIND events of a kind are counted, not kept: {count} reads 'N+'."""
    import ncclsleuth.model.job as J
    from ncclsleuth.api import analyze

    line = "node1:1:1 [0] misc/socket.cc:40 NCCL WARN ncclOsSocketTryAccept: Accept failed: Too many open files\n"
    (tmp_path / "a.log").write_text(line * 5)
    report = analyze([str(tmp_path / "a.log")])
    assert "(5 line(s))" in next(f for f in report.findings if f.rule_id == "ULIM001").message
    monkeypatch.setattr(J, "KEEP_PER_KIND", 3)
    report = analyze([str(tmp_path / "a.log")])
    assert "(3+ line(s))" in next(f for f in report.findings if f.rule_id == "ULIM001").message


_BARE_QUESTION = re.compile(r"(?:^|[\s(\[,:/])\?(?:$|[\s)\],.:;/])")


@pytest.mark.parametrize("rule,case", [(r, t) for r, t in CASES if t.should_fire],
                         ids=[f"{r.id}_{t.name}" for r, t in CASES if t.should_fire])
def test_fail_case_says_words_not_placeholders(rule, case):
    """Every placeholder of the title, message and fix is filled, dropped with its clause or
    given a default on the rule's own fail snippets: no 'unknown' stand-in, no bare '?'."""
    for f in findings_of(rule, case):
        assert not f.unfilled, f"{rule.id} {case.name}: no value for {f.unfilled}"
        for text in (f.title, f.message):
            assert not _BARE_QUESTION.search(text), f"{rule.id} {case.name}: {text!r}"
            assert not re.search(r"\{[A-Za-z_][\w.]*(\|[^{}]*)?\}", text), text
