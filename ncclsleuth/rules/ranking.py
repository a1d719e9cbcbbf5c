"""Evaluate the rules on a job model and rank what fired: most likely root cause first.

Problems before information, causes before symptoms (a symptom names its cause in
``caused_by``), then severity, rule priority, confidence and the earliest evidence line.
"""
from __future__ import annotations

from typing import Any

from ..model.job import JobModel
from .findings import Finding, finding
from .match import Context, evaluate
from .schema import Rule, Severity


def run_rules(model: JobModel, rules: list[Rule], ctx: Context | None = None) -> list[Finding]:
    """Findings of all rules that fire, most likely root cause first."""
    ctx = ctx or Context(model)
    fired: list[tuple[Rule, Finding, tuple[Any, ...]]] = []
    for rule in rules:
        m = evaluate(rule.match, ctx)
        if not m.ok:
            continue
        lead: tuple[Any, ...] | None = None
        for items in ([it] for it in m.items) if rule.per_record else [m.items]:
            f, first = finding(rule, items, m.named, model)
            for cond in rule.explains:  # the consequences it accounts for (never evidence)
                f.explained.update((ev.source, ev.line) for it in evaluate(cond, ctx).items
                                   for ev in it.get("evidence", ()))
            lead = lead or first  # one finding per record: they keep the fact's order among themselves
            fired.append((rule, f, lead))
    fired.sort(key=lambda t: _rank_key(t[0], t[2]))
    _link_causes(fired)
    # causes first: a symptom whose cause fired moves below it
    fired.sort(key=lambda t: (_tier(t[0]), t[1].caused_by is not None, *_rank_key(t[0], t[2])[1:]))
    return [f for _, f, _ in fired]


def _tier(rule: Rule) -> int:
    return 0 if rule.severity >= Severity.warning else 1


def _rank_key(rule: Rule, first: tuple[Any, ...]) -> tuple[Any, ...]:
    return (_tier(rule), rule.role == "symptom", -int(rule.severity), -rule.priority, -rule.confidence, first, rule.id)


def _link_causes(fired: list[tuple[Rule, Finding, tuple[Any, ...]]]) -> None:
    causes = [(r, f) for r, f, _ in fired if r.role == "cause" and r.severity >= Severity.warning]
    for rule, f, _ in fired:
        if rule.role != "symptom":
            continue
        for cr, _cf in causes:
            if not rule.symptom_of or cr.category in rule.symptom_of or cr.id in rule.symptom_of:
                f.caused_by = cr.id
                break
