"""Load the rule pack: every ``*.yaml`` of the rule folders, validated, sorted by id."""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..util.yamldocs import YamlFileError, cached_docs, read_yaml, save_docs
from .schema import Rule, RuleError, check, validate


def default_rule_dir() -> Path:
    """The rule pack: ``rules/`` of a source checkout, else the copy shipped in the package."""
    env = os.environ.get("NCCLSLEUTH_RULES")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    for cand in (here.parent.parent / "rules", here.parent / "_rules"):
        if cand.is_dir():
            return cand
    return here.parent.parent / "rules"


def load_rules(dirs: Iterable[str | Path] | None = None, keep_going: bool = False
               ) -> tuple[list[Rule], list[RuleError]]:
    """Every ``*.yaml`` under the given folders (default: the shipped pack), sorted by id.

    A malformed file raises :class:`RuleError` unless ``keep_going``, in which case the
    errors are returned and the other rules are used.
    """
    folders = [Path(d) for d in dirs] if dirs else [default_rule_dir()]
    rules: list[Rule] = []
    errors: list[RuleError] = []
    seen: dict[str, str] = {}
    for folder in folders:
        if not folder.is_dir():
            raise RuleError(str(folder), "rule folder not found")
        paths = sorted(folder.rglob("*.yaml"))
        cached = cached_docs("rules", folder, paths)
        fresh: dict[str, Any] = {}
        for path in paths:
            try:
                if cached is not None:
                    doc = cached[str(path)]
                else:
                    try:
                        doc = fresh[str(path)] = read_yaml(path)
                    except YamlFileError as exc:
                        raise RuleError(exc.path, exc.message) from None
                rule = validate(doc, str(path))
                if rule.id in seen:
                    raise RuleError(str(path), f"duplicate id (also in {seen[rule.id]})", "id")
                seen[rule.id] = str(path)
                rules.append(rule)
            except RuleError as exc:
                if not keep_going:
                    raise
                errors.append(exc)
        if cached is None and len(fresh) == len(paths):  # every file read: worth keeping
            save_docs("rules", folder, paths, fresh)
    rules.sort(key=lambda r: r.id)
    return rules, errors


def check_rules(dirs: Iterable[str | Path]) -> tuple[int, list[RuleError]]:
    """Every error of every rule file under ``dirs`` (``ncclsleuth rules check``): the
    files read afresh, each error with its file, line and key.  Returns (files, errors)."""
    from ..util.yamldocs import key_lines, line_of

    errors: list[RuleError] = []
    seen: dict[str, str] = {}
    files = 0
    for folder in (Path(d) for d in dirs):
        if not folder.is_dir():
            errors.append(RuleError(str(folder), "rule folder not found"))
            continue
        for path in sorted(folder.rglob("*.yaml")):
            files += 1
            try:
                doc = read_yaml(path)
            except YamlFileError as exc:
                errors.append(RuleError(exc.path, exc.message))
                continue
            lines = key_lines(path.read_text(encoding="utf-8", errors="replace"))
            found = check(doc, str(path))
            if not found and isinstance(doc, dict):
                rid = doc["id"]
                if rid in seen:
                    found.append(RuleError(str(path), f"duplicate id (also in {seen[rid]})", "id"))
                seen.setdefault(rid, str(path))
            errors += [e.at(line_of(lines, e.key)) for e in found]
    return files, errors
