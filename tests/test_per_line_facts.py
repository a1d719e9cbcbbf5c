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



def test_a_known_message_record_reads_its_fields_from_its_line_and_meaning(tmp_path):
    """A record is every field its fact declares, read when asked from the line's event, the
    message identified and the knowledge base's meaning: no dict of its own (a 21-key dict and
    its evidence list were ~530 bytes of the rule step's peak a problem line no finding explains,
    9,352 of them on issue 16's 8,000-rank file); rules filter on it as on a dict."""
    import sys

    from ncclsleuth import knowledge
    from ncclsleuth.model.facts import knowledge as K
    from ncclsleuth.model.facts.base import record_fields

    log = tmp_path / "job.log"
    log.write_text("node1:11:11 [0] NCCL INFO comm 0x10 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
                   "node1:11:11 [0] misc/socket.cc:484 NCCL WARN socketPollConnect: Connect to 10.0.0.2<34567> "
                   "returned 113(No route to host) errno 115(Operation now in progress)\n")
    model = api.build([str(log)], api.Options(jobs=1, cache=False)).model
    ev = model.error_events()[0]
    rec = next(r for r in K.known_message(model) if r["evidence"][0] is ev)
    known, meaning = knowledge.explain(ev.text, "runtime")  # type: ignore[misc]
    assert set(rec) == record_fields(K.KnownMessage) and len(rec) == len(set(rec))
    assert dict(rec) == {
        "id": meaning.id, "source": meaning.source, "subsystem": meaning.subsystem, "role": meaning.role,
        "category": meaning.category, "categories": list(meaning.categories), "severity": meaning.severity,
        "meaning": meaning.meaning, "fix": meaning.fix, "why": meaning.why, "ref": meaning.ref,
        "function": meaning.function, "file": known.file or "", "message": known.message, "phase": "runtime",
        "kind": ev.kind, "host": "node1", "rank": ev.rank, "ranks": [], "pid": 11, "evidence": [ev]}
    assert rec.get("nothing") is None and "nothing" not in rec and rec["evidence"] == [ev]
    assert not hasattr(rec, "__dict__") and sys.getsizeof(rec) < 100
    # a rule's `where` reads it as it reads a dict's fields
    assert match._getter("role", events=False)(rec) == meaning.role
    assert match._getter("evidence.host", events=False)(rec) == ["node1"]  # a nested path: through the record
