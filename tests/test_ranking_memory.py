"""The rule step's memory: what a rule matched lives as long as its findings are being made."""
from __future__ import annotations

import weakref
from typing import Any

import pytest

from ncclsleuth import api
from ncclsleuth.rules import match, ranking
from ncclsleuth.rules.schema import build_rule


class _Item(dict):  # type: ignore[type-arg]
    """A match item that can be watched (a plain dict takes no weak reference)."""


def _rule(rid: str, cond: dict[str, Any]) -> Any:
    return build_rule({"id": rid, "name": rid.lower(), "title": rid, "category": "app_crash",
                       "severity": "error", "confidence": 0.5, "description": "d",
                       "match": cond, "message": "m", "fix": "f", "references": [], "tests": []}, "test")


def test_a_fired_rules_items_are_gone_before_the_next_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the items of the last rule that fired were locals of the loop over the rules and
    lived on through every rule that did not fire (on the 8,000-rank file, 28,000 watchdog items,
    7 MB, at the rule step's peak)."""
    lines = "".join(f"host{r}:1{r}:2{r} [0] NCCL WARN Cuda failure 'out of memory' rank {r}\n" for r in range(4))
    model = api.build(api.memory_sources({"job.log": lines})).model
    assert [ev.kind for ev in model.events["nccl_other"]] == ["nccl_other"] * 4
    made: list[weakref.ref[_Item]] = []

    def light(ev: Any) -> _Item:
        it = _Item(evidence=[ev], host=ev.host, rank=ev.rank)
        made.append(weakref.ref(it))
        return it

    monkeypatch.setattr(match, "_light_item", light)
    alive_later: list[int] = []
    real = ranking.evaluate

    def watched(cond: dict[str, Any], ctx: match.Context) -> match.Match:
        if cond.get("fact") == "nothing_here":
            alive_later.append(sum(r() is not None for r in made))
        return real(cond, ctx)

    monkeypatch.setattr(ranking, "evaluate", watched)
    monkeypatch.setitem(match.FACTS, "nothing_here", lambda model: [])
    found = ranking.run_rules(model, [_rule("T001", {"event": "nccl_other"}),
                                      _rule("T002", {"fact": "nothing_here"})])
    assert [f.rule_id for f in found] == ["T001"] and found[0].evidence_total == 4
    assert len(made) == 3  # the lines after the first (the first is the full item)
    assert alive_later == [0]
