"""``where`` filtering with predicates run once per distinct value (rules/match.py) selects
exactly what running every predicate on every item selects."""
from __future__ import annotations

from typing import Any

import pytest

from ncclsleuth.model.job import JobModel
from ncclsleuth.rules import match
from ncclsleuth.rules.match import Context, evaluate

#: values that compare equal but read differently (True == 1 == 1.0, str(True) != "1"),
#: lists (any element matches), None and missing fields
VALUES: list[Any] = ["1", 1, True, 1.0, 0.0, -0.0, None, ["1", "x"], [], "x", "cause", False, 0]
RECORDS = [{"v": v, "w": w, "i": n, "evidence": []}
           for n, (v, w) in enumerate((v, w) for v in VALUES for w in ("cause", "symptom", None))]
RECORDS.append({"i": len(RECORDS), "evidence": []})  # no "v" at all

PREDICATES: list[Any] = [1, "1", True, None, {"regex": "^1$"}, {"regex": "True"}, {"eq": 0},
                         {"in": [1, "x"]}, {"exists": True}, {"exists": False}, {"ge": 1},
                         {"not_regex": "^-"}, {"contains": "0"}, {"ne": "x"}]


def _naive(where: dict[str, Any]) -> list[int]:
    """Every predicate on every record: what ``_leaf`` selected before the memo."""
    tests = match._tests(where, False)
    return [r["i"] for r in RECORDS if all(match._pred(get(r), p) for get, p in tests)]


@pytest.fixture
def ctx(monkeypatch: pytest.MonkeyPatch) -> Context:
    monkeypatch.setitem(match.FACTS, "test_records", lambda model: RECORDS)
    return Context(JobModel())


@pytest.mark.parametrize("pred", PREDICATES, ids=repr)
def test_memoised_where_selects_what_every_item_check_selects(ctx: Context, pred: Any) -> None:
    for where in ({"v": pred}, {"w": "cause", "v": pred}, {"v": pred, "w": {"ne": "symptom"}}):
        got = evaluate({"fact": "test_records", "where": where, "count": {"ge": 0}}, ctx)
        assert [it["i"] for it in got.items] == _naive(where), where


def test_column_is_read_once_per_evaluation_and_shared_by_rules(ctx: Context) -> None:
    evaluate({"fact": "test_records", "where": {"w": "cause"}}, ctx)
    col = ctx._columns[("fact", "test_records", False, "w")]
    evaluate({"fact": "test_records", "where": {"w": "symptom"}}, ctx)
    assert ctx._columns[("fact", "test_records", False, "w")] is col
    assert [RECORDS[i]["w"] for i in col.groups["cause"]] == ["cause"] * len(VALUES)
