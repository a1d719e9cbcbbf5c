"""Run the ``tests:`` embedded in a rule: its fail snippets must fire with the expected
evidence line, its pass snippets must not fire.

Snippets go through the orchestrator like any log (:func:`ncclsleuth.api.analyze`: the
block reader, the prefilter, per-file models), so a rule test exercises the path
``analyze`` takes.  A test with ``quiet_for`` is about a job watched live: its files are
followed by the watcher (:mod:`ncclsleuth.live`) and the rule evaluated that many
seconds after their last line was read.
"""
from __future__ import annotations

import os
import tempfile

from . import api
from .model.job import JobModel
from .rules.findings import Finding
from .rules.schema import Rule, RuleTest


def model_of(log: str | dict[str, str]) -> JobModel:
    """The job model of an in-memory snippet (or several named files), as ``analyze`` builds it."""
    return api.build(api.memory_sources(log, dedent=True)).model


def findings_of(rule: Rule, test: RuleTest) -> list[Finding]:
    """What ``rule``, alone, finds on the test's snippet."""
    if test.quiet_for is not None:
        return _watched(rule, test.log, test.quiet_for)
    return api.analyze(api.memory_sources(test.log, dedent=True), api.Options(rules=[rule])).findings


def _watched(rule: Rule, log: str | dict[str, str], quiet_for: float) -> list[Finding]:
    """The watcher on the snippet's files, polled once, then again ``quiet_for`` seconds later."""
    import textwrap

    from .live import Watcher

    files = log if isinstance(log, dict) else {"snippet.log": log}
    now = [1000.0]
    with tempfile.TemporaryDirectory(prefix="ncclsleuth-ruletest-") as d:
        for name, text in files.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
                fh.write(textwrap.dedent(text))
        w = Watcher([d], rules=[rule], clock=lambda: now[0])
        w.poll(force=True)
        now[0] += quiet_for
        w.poll(force=True)
    for f in w.findings:  # evidence names the files as the snippet does
        f.evidence = [type(e)(os.path.relpath(e.file, d), e.line, e.text) for e in f.evidence]
    return w.findings


def run_rule_test(rule: Rule, test: RuleTest) -> str | None:
    """None when the test passes, else what went wrong."""
    findings = findings_of(rule, test)
    if not test.should_fire:
        return f"fired on a pass snippet: {findings[0].message}" if findings else None
    if not findings:
        return "did not fire on the fail snippet"
    ev = findings[0].evidence
    if test.expect_line is not None and not any(e.line == test.expect_line for e in ev):
        return f"evidence lines {[e.line for e in ev]} do not include line {test.expect_line}"
    if test.expect_text is not None and not any(test.expect_text in e.text for e in ev):
        return f"no evidence line contains {test.expect_text!r}"
    return None
