"""The report: findings (most likely root cause first), unexplained problem lines, summary.

One :class:`Report` object feeds every renderer (terminal, JSON, Markdown, Slack,
HTML); renderers never look at the model or the events.  ``to_dict`` is the stable
JSON schema (``SCHEMA_VERSION``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = "1.0"


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


@dataclass
class Report:
    findings: list[Finding]
    unexplained: list[Evidence]
    summary: dict[str, Any]
    notices: list[dict[str, str]] = field(default_factory=list)
    unexplained_total: int = 0

    @property
    def verdict(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION,
                "verdict": self.findings[0].title if self.findings else "no problem found",
                "findings": [f.to_dict() for f in self.findings],
                "unexplained": [e.to_dict() for e in self.unexplained],
                "unexplained_total": self.unexplained_total,
                "summary": self.summary, "notices": self.notices}
