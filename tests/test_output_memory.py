"""What the end of a run holds: the report written in pieces, a finding's lines as line numbers per file."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ncclsleuth import api
from ncclsleuth.cli import main
from ncclsleuth.renderers import json_out, render, render_chunks
from ncclsleuth.report.redact import Redactor, redact_finding
from ncclsleuth.rules.lineset import FileIds, LineSet

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "fixtures/examples/desync-16"


def _dumps(report: Any) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_json_report_comes_in_pieces_that_make_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: one ``json.dumps`` string, its encoder holding every piece (a line number each) in a
    list first (on 4,096 per-rank files ~0.85 KiB a rank of the run's peak)."""
    report = api.analyze([str(LOG)])
    monkeypatch.setattr(json_out, "CHUNK_PIECES", 1)  # each of the encoder's pieces handed on alone
    pieces = list(render_chunks("json", report))
    text = _dumps(report)
    assert "".join(pieces) == text == render("json", report)
    assert len(pieces) >= len(text) // 2048 > 4
    longest = max(len(line) for line in text.splitlines()) + 64  # one encoder piece: a line and its indent at most
    assert all(len(p) <= 512 + longest for p in pieces)


def test_a_format_without_pieces_is_one_piece() -> None:
    report = api.analyze([str(LOG)])
    assert list(render_chunks("markdown", report)) == [render("markdown", report)]


def test_analyze_writes_json_as_it_is_made_to_stdout_and_to_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI writes the encoder's pieces as they come (never the whole text: ``render`` unused)."""
    expected = _dumps(api.analyze([str(LOG)]))
    monkeypatch.setattr(json_out, "CHUNK_PIECES", 8)

    def whole(*_: Any, **__: Any) -> str:
        raise AssertionError("the JSON report was made whole")

    monkeypatch.setattr(json_out, "render", whole)
    runner = CliRunner()
    res = runner.invoke(main, ["analyze", str(LOG), "--format", "json"])
    assert res.exit_code == 1 and res.output == expected
    out = tmp_path / "r.json"
    res = runner.invoke(main, ["analyze", str(LOG), "-o", str(out)])
    assert res.exit_code == 1 and out.read_text(encoding="utf-8") == expected


def test_a_redacted_json_report_is_still_redacted_whole() -> None:
    res = CliRunner().invoke(main, ["analyze", str(LOG), "--format", "json", "--redact"])
    assert res.exit_code == 1 and json.loads(res.output)["findings"]


PAIRS = [("b.log", 7), ("a.log", 300), ("a.log", 2), ("b.log", 7), ("a.log", 10**12)]


def test_a_lineset_is_the_set_of_its_pairs() -> None:
    """Before: a finding's lines were a ``set`` of (file, line) tuples."""
    ls = LineSet(PAIRS)
    plain = set(PAIRS)
    assert ls == plain and plain == ls and len(ls) == 4 and bool(ls) and not LineSet()
    assert set(ls) == plain and sorted(ls) == sorted(plain)
    for p in [*plain, ("a.log", 3), ("c.log", 7), ("a.log", "2"), ("a.log",), "a.log", None, ("a.log", 2.0)]:
        assert (p in ls) == (p in plain and type(p[1]) is int), p  # type: ignore[index]
    assert {("a.log", 2)} <= ls and not {("a.log", 2), ("c.log", 1)} <= ls
    assert ls >= {("b.log", 7)} and (ls & {("b.log", 7), ("x", 1)}) == {("b.log", 7)}
    assert ls.per_file() == {"a.log": [2, 300, 10**12], "b.log": [7]}
    assert sorted(ls.files()) == ["a.log", "b.log"]


def test_a_lineset_adds_in_bursts_and_reads_sorted() -> None:
    ls = LineSet.of_lines([("a.log", 5), ("a.log", 1), ("a.log", 5)])
    assert ls.per_file() == {"a.log": [1, 5]} and ls.files() == ["a.log"] and len(ls) == 2
    kept = LineSet.of_lines([("a.log", 1), ("a.log", 5)])
    assert kept.per_file() == {"a.log": [1, 5]} and not LineSet.of_lines([])
    ls.update([("a.log", 3), ("a.log", 1)])
    ls.update(LineSet([("b.log", 9), ("a.log", 4)]))
    ls.add(("c.log", 0))
    assert ls.per_file() == {"a.log": [1, 3, 4, 5], "b.log": [9], "c.log": [0]}
    assert ("a.log", 4) in ls and ("a.log", 2) not in ls and len(ls) == 6
    merged = ls.renamed(lambda f: "x.log" if f in ("a.log", "b.log") else f)
    assert merged.per_file() == {"c.log": [0], "x.log": [1, 3, 4, 5, 9]}
    assert ls.per_file()["a.log"] == [1, 3, 4, 5]  # the original is left as it was


def test_a_lineset_costs_8_bytes_a_line_and_nothing_a_file_of_the_run() -> None:
    """~100 bytes a line as tuples in a set; an array a file (the first LineSet) ~100 bytes a file
    more; here 8 bytes a line, the file ids the model's own index."""
    names = [f"rank{r}.log" for r in range(64)]
    index = {n: i for i, n in enumerate(names)}
    pairs = [(n, 1000 + k) for n in names for k in range(3)]
    plain = set(pairs)
    tuples = sys.getsizeof(plain) + sum(sys.getsizeof(p) + sys.getsizeof(p[1]) for p in plain)
    ids = FileIds(index, names)
    ls = LineSet(pairs, ids)
    assert ls == plain
    keys = ls._keys  # noqa: SLF001 - the storage being measured
    assert sys.getsizeof(keys) <= 96 + 9 * len(pairs) and sys.getsizeof(keys) * 10 < tuples  # appended: ~6% spare
    assert ids.get("other.log") is None and ("other.log", 1000) not in ls and ids.get("other.log") is None
    other = LineSet([("rank1.log", 5)], FileIds(index, names))  # another finding of the same run
    ls.update(other)
    assert ls._keys[-1] == 1 << 40 | 5 and ("rank1.log", 5) in ls  # noqa: SLF001 - by its number, as it was
    ls.update(LineSet([("new.log", 1)]))  # a set of its own ids: by name
    assert ("new.log", 1) in ls and len(ls) == len(pairs) + 2 and ls.files()[-1] == "new.log"
    for bad in (-1, 1 << 40, 2.0):
        with pytest.raises(ValueError):
            LineSet([("a.log", bad)])  # type: ignore[list-item]


def test_findings_keep_linesets_and_redaction_renames_their_files() -> None:
    report = api.analyze([str(LOG)])
    f = report.findings[0]
    assert type(f.explained) is LineSet and f.explained
    assert {(e.file, e.line) for e in f.evidence} <= f.explained
    r = Redactor()
    red = redact_finding(f, r)
    assert type(red.explained) is LineSet and len(red.explained) == len(f.explained)
    assert red.explained == {(r.sub(s), n) for s, n in f.explained}
