"""Problem lines never depend on parsed fields (issue 19, part 6).

Whether a line is a problem (a WARN, an error-level record, an exception) is decided by
its level and its kind, never by a field that happens to be empty: a poster's redaction,
a release's other wording or a parser gap leaves fields empty, and the line must still be
in the report.  Checked for every event kind of the registry: an event of a problem kind
with every field left at its default is a problem line and reaches the report (evidence
of a finding, explained by one, or unexplained), and so is an event of any kind at a
problem level; the model's handlers must take such events without failing.
"""
from __future__ import annotations

import pytest

from ncclsleuth import api
from ncclsleuth.events import ERROR_KINDS, REGISTRY, Event
from ncclsleuth.model.job import JobModel

KINDS = sorted(REGISTRY)
PROBLEM_LEVELS = ("WARN", "ERROR", "FATAL", "CRITICAL")


@pytest.fixture(scope="module")
def rules():
    return api.load_rules(api.Options())


def reported(ev: Event, rules) -> str | None:  # type: ignore[no-untyped-def]
    """How the report accounts for ``ev``'s line: 'evidence', 'explained', 'unexplained' or None."""
    model = JobModel()
    model.add_source(ev.source)
    model.add(ev)
    rep = api.diagnose(model, rules)
    key = (ev.source, ev.line)
    for f in rep.findings:
        if any((e.file, e.line) == key for e in f.evidence):
            return "evidence"
        if key in f.explained:
            return "explained"
    if any((u.file, u.line) == key for u in rep.unexplained):
        return "unexplained"
    return None


def test_registry_has_problem_kinds():
    assert len(ERROR_KINDS) > 20 and ERROR_KINDS <= set(REGISTRY)


@pytest.mark.parametrize("kind", sorted(ERROR_KINDS))
def test_problem_kind_with_empty_fields_is_a_problem(kind, rules):
    ev = REGISTRY[kind](source=f"{kind}.log", line=7, text=f"a {kind} line")
    assert ev.is_problem, f"{kind}: an event with empty fields is not a problem line"
    assert reported(ev, rules) is not None, f"{kind}: the line is missing from the report"


@pytest.mark.parametrize("level", PROBLEM_LEVELS)
@pytest.mark.parametrize("kind", KINDS)
def test_any_kind_at_a_problem_level_is_a_problem(kind, level, rules):
    ev = REGISTRY[kind](source=f"{kind}.log", line=3, text=f"a {kind} line", level=level)
    assert ev.is_problem, f"{kind} at {level}: not a problem line"
    assert reported(ev, rules) is not None, f"{kind} at {level}: the line is missing from the report"


@pytest.mark.parametrize("kind", sorted(set(KINDS) - ERROR_KINDS))
def test_other_kinds_at_info_are_not_problems(kind):
    """The other side of the invariant: a kind that is no problem at INFO (no field decides)."""
    assert not REGISTRY[kind](source="x.log", line=1, text="x", level="INFO").is_problem
