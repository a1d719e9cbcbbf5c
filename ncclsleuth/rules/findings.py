"""Findings: what a rule that fired says, with its evidence lines, built from the matched items.

A :class:`Finding` is one rule's diagnosis (id, category, severity, title, message, fix,
evidence lines, hosts and ranks); the message templates are filled from the first
matched item (``{field}``), a named one (``{name.field}``) or the counts
(``{count}``, ``{hosts}``, ``{nhosts}``, ``{ranks}``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..events import Event
from ..model.facts.said import said
from ..model.job import JobModel
from .schema import CATEGORIES, KNOWLEDGE, Rule, Severity

_TEMPLATE = re.compile(r"\{([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?\}")


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass
class Finding:
    rule_id: str
    name: str
    category: str
    severity: str
    confidence: float
    title: str
    message: str
    fix: str
    evidence: list[Evidence]
    references: list[str]
    evidence_total: int = 0
    caused_by: str | None = None
    role: str = "cause"
    hosts: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    #: every (file, line) this finding explains, also beyond the evidence shown
    explained: set[tuple[str, int]] = field(default_factory=set, repr=False, compare=False)
    #: a symptom's possible causes (categories or rule ids): the rule's, or the knowledge
    #: base's for the matched line (``category_from`` rules)
    symptom_of: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"rule_id": self.rule_id, "name": self.name, "category": self.category, "severity": self.severity,
                "confidence": round(self.confidence, 2), "title": self.title, "message": self.message,
                "evidence": [e.to_dict() for e in self.evidence], "evidence_total": self.evidence_total,
                "fix": self.fix, "references": self.references, "caused_by": self.caused_by, "role": self.role,
                "hosts": self.hosts, "ranks": self.ranks, "explained_lines": self.explained_lines()}

    def explained_lines(self) -> dict[str, list[int]]:
        """Every line this finding accounts for, per file (also beyond the evidence shown)."""
        out: dict[str, list[int]] = {}
        for f, line in self.explained:
            out.setdefault(f, []).append(line)
        return {f: sorted(v) for f, v in sorted(out.items())}


def finding(rule: Rule, items: Sequence[Mapping[str, Any]], named: Mapping[str, Mapping[str, Any]],
             model: JobModel) -> tuple[Finding, tuple[Any, ...]]:
    evs: dict[tuple[str, int], Event] = {}
    for it in items:
        for ev in it.get("evidence", ()):
            evs.setdefault((ev.source, ev.line), ev)
    ordered = sorted(evs.values(), key=model.order_key)
    lead = [ev for ev in (items[0].get("evidence", ()) if items else ())]
    if lead:  # the primary item's own lines first (the culprit before the messengers)
        ordered = lead[:1] + [ev for ev in ordered if ev is not lead[0]]
    # who the finding is about: the matched records' own host/rank where they name one (a
    # laggard fact names the culprit; its evidence also quotes the messengers), else the lines'
    item_hosts = {str(it["host"]) for it in items if it.get("host") not in (None, "?")}
    item_ranks = {it["rank"] for it in items if isinstance(it.get("rank"), int)}
    item_ranks.update(r for it in items if isinstance(it.get("ranks"), list) for r in it["ranks"] if isinstance(r, int))
    file_host = model.source_hosts()
    hosts = sorted(item_hosts or {h for ev in ordered if (h := ev.host or file_host.get(ev.source))})
    ranks = sorted(item_ranks or {ev.rank for ev in ordered if ev.rank is not None})
    primary = items[0] if items else {}
    # events beyond KEEP_PER_KIND of a kind are counted, not kept: say "at least" then
    capped = any(model.folded.get(k) for k in {ev.kind for ev in ordered})
    # the placeholders besides the items' fields (schema.EXTRA_PLACEHOLDERS: the rule schema checks them)
    extra = {"count": f"{len(items)}+" if capped else len(items), "hosts": ", ".join(hosts[:8]) or "?",
             "nhosts": len(hosts),
             "ranks": ", ".join(map(str, ranks[:16])) or "?"}
    fill = lambda s: _fill(s, primary, named, extra)  # noqa: E731
    category, severity, symptom_of = rule.category, rule.severity.name, rule.symptom_of
    if rule.category_from == KNOWLEDGE:  # the knowledge base's reading of the first line, in context
        read = [c for c in (said(lead[0]).categories if lead else ()) if c in CATEGORIES]
        if read:
            category = read[0]
            symptom_of = tuple(dict.fromkeys([*symptom_of, *read])) if rule.role == "symptom" else symptom_of
    elif rule.category_from:  # the knowledge base's verdict on the matched line
        cats = primary.get(rule.category_from)
        cats = [c for c in (cats if isinstance(cats, (list, tuple)) else [cats]) if c in CATEGORIES]
        if cats:
            category = cats[0]
            symptom_of = tuple(cats) if rule.role == "symptom" else symptom_of
    if rule.severity_from and primary.get(rule.severity_from) in Severity.__members__:
        severity = str(primary[rule.severity_from])
    f = Finding(rule_id=rule.id, name=rule.name, category=category, severity=severity,
                confidence=rule.confidence, title=fill(rule.title), message=" ".join(fill(rule.message).split()),
                fix=fill(rule.fix).strip(), references=list(rule.references),
                evidence=[Evidence(ev.source, ev.line, ev.text) for ev in ordered[: rule.limit]],
                evidence_total=len(ordered), role=rule.role, hosts=hosts, ranks=ranks,
                explained=set(evs), symptom_of=symptom_of)
    first = model.order_key(ordered[0]) if ordered else (1 << 30, 0)
    return f, first


def _fill(tpl: str, primary: Mapping[str, Any], named: Mapping[str, Mapping[str, Any]],
          extra: Mapping[str, Any]) -> str:
    def sub(m: re.Match[str]) -> str:
        a, b = m.group(1), m.group(2)
        if b is not None:
            src = named.get(a)
            val = src.get(b) if src is not None else None
        else:
            val = primary.get(a, extra.get(a))
        if val is None or val == "":
            return "?"
        if isinstance(val, (list, tuple)):
            return ", ".join(_short(v) for v in val)
        return _short(val)

    return _TEMPLATE.sub(sub, tpl)


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return str(v.get("name") or v.get("hca") or v)
    return str(v)
