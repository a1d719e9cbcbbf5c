"""A project's choice of rules (its configuration, :mod:`ncclsleuth.util.config`): which
rules are off, which severity a rule reports, and user rules that replace shipped ones.

Patterns match a rule's id or its name, as globs (``MSG2*``, ``net.*``), without regard
to case.  ``enable`` wins over ``disable``: ``disable: ["MSG*"]`` with ``enable: [MSG001]``
keeps MSG001 only.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from .schema import Rule, Severity


def matches(rule: Rule, patterns: Iterable[str]) -> bool:
    """Whether a pattern names this rule (its id or name, a glob, any case)."""
    keys = (rule.id.lower(), rule.name.lower())
    return any(fnmatchcase(k, str(p).lower()) for p in patterns for k in keys)


def select(rules: Sequence[Rule], config: Mapping[str, Any]) -> list[Rule]:
    """The rules the configuration keeps, with its severity overrides applied."""
    disable, enable = config.get("disable") or [], config.get("enable") or []
    severity: Mapping[str, str] = config.get("severity") or {}
    out: list[Rule] = []
    for r in rules:
        if disable and matches(r, disable) and not matches(r, enable):
            continue
        for pattern, sev in severity.items():
            if matches(r, [pattern]):
                r = dataclasses.replace(r, severity=Severity.parse(sev))
        out.append(r)
    return out


def override(shipped: Sequence[Rule], own: Sequence[Rule]) -> tuple[list[Rule], list[str]]:
    """The shipped rules with the user's rules of the same id in their place (and the
    user's other rules added): the rules, sorted by id, and one line per replacement."""
    by_id = {r.id: r for r in shipped}
    said: list[str] = []
    for r in own:
        if r.id in by_id:
            said.append(f"{r.path}: replaces the shipped rule {r.id} ({by_id[r.id].path})")
        by_id[r.id] = r
    return sorted(by_id.values(), key=lambda r: r.id), said
