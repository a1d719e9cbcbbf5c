"""Per-line facts (``known_message``) computed for the fallback rules leave out the lines that
findings already explain (``model.facts.base.PER_LINE``): the same report, fewer records."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclsleuth import api
from ncclsleuth.model.facts import PER_LINE
from ncclsleuth.rules import match

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EXAMPLES = FIXTURES / "examples"
CASES = sorted(p for d in ("examples", "real") for p in (FIXTURES / d).iterdir() if p.is_dir() and p.name[0] != "_")


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_the_report_is_the_same_with_every_record_made(case, monkeypatch):
    lean = api.analyze([str(case)], api.Options(jobs=1)).to_dict()
    monkeypatch.setattr(match, "PER_LINE", {})  # every problem line gets its record
    full = api.analyze([str(case)], api.Options(jobs=1)).to_dict()
    assert json.dumps(lean, sort_keys=True) == json.dumps(full, sort_keys=True)


def test_explained_lines_get_no_record(monkeypatch):
    """On a desync every rank's watchdog lines are explained before the fallbacks run."""
    seen: list[tuple[int, int, set[tuple[str, int]]]] = []
    real = PER_LINE["known_message"]

    def spy(model, skip):
        recs = real(model, skip)
        seen.append((len(model.error_events()), len(recs), {(ev.source, ev.line) for r in recs for ev in r["evidence"]}))
        return recs

    monkeypatch.setitem(PER_LINE, "known_message", spy)
    report = api.analyze([str(EXAMPLES / "desync-16")], api.Options(jobs=1))
    ((lines, records, kept),) = seen
    explained = {x for f in report.findings if not f.rule_id.startswith("MSG") for x in f.explained}
    assert records < lines / 2 and not kept & explained

