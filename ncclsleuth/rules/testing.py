"""Run the ``tests:`` embedded in a rule: its fail snippets must fire with the expected
evidence line, its pass snippets must not fire."""
from __future__ import annotations

import textwrap

from ..grammar import ShapeCache
from ..model import JobModel
from ..parse import FileParser
from .engine import run_rules
from .schema import Rule, RuleTest


def model_of(log: str | dict[str, str]) -> JobModel:
    """A job model from an in-memory snippet (or several named files)."""
    files = log if isinstance(log, dict) else {"snippet.log": log}
    model = JobModel()
    cache = ShapeCache()
    for name, text in files.items():
        lines = textwrap.dedent(text).splitlines()
        fp = FileParser(name, cache)
        model.add_source(name, len(lines))
        for ev in fp.parse_lines(enumerate(lines, 1)):
            model.add(ev)
    return model


def run_rule_test(rule: Rule, test: RuleTest) -> str | None:
    """None when the test passes, else what went wrong."""
    findings = [f for f in run_rules(model_of(test.log), [rule]) if f.rule_id == rule.id]
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
