"""Load the rule pack: every ``*.yaml`` of the rule folders, validated, sorted by id."""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..util import yaml_files
from ..util.cache import keep, kept
from .schema import Rule, RuleError, build_rule, check, validate


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


def load_rules(dirs: Iterable[str | Path] | None = None, keep_going: bool = False, cache: bool = True
               ) -> tuple[list[Rule], list[RuleError]]:
    """Every ``*.yaml`` under the given folders (default: the shipped pack), sorted by id.

    A malformed file raises :class:`RuleError` unless ``keep_going``, in which case the
    errors are returned and the other rules are used.  ``cache=False`` (``--no-cache``)
    reads and validates every file afresh and keeps nothing.
    """
    folders = [Path(d) for d in dirs] if dirs else [default_rule_dir()]
    rules: list[Rule] = []
    errors: list[RuleError] = []
    seen: dict[str, str] = {}
    for folder in folders:
        if not folder.is_dir():
            raise RuleError(str(folder), "rule folder not found")
        paths = yaml_files(folder)
        got = _validated(folder, paths) if cache else None
        if got is None or any(r.id in seen for r in got):  # a duplicate id: the slow path says where
            got, errs = _load_folder(folder, paths, seen, keep_going, cache)
            errors += errs
        else:
            seen.update((r.id, r.path) for r in got)
        rules += got
    rules.sort(key=lambda r: r.id)
    return rules, errors


def _load_folder(folder: Path, paths: list[str], seen: dict[str, str], keep_going: bool, cache: bool
                 ) -> tuple[list[Rule], list[RuleError]]:
    """The rules of one folder, each file validated (its parsed YAML from the cache when
    ``cache``); an error-free folder is kept validated for the next run."""
    from ..util.yamldocs import YamlFileError, cached_docs, read_yaml, save_docs  # not on a warm start

    cached = cached_docs("rules", folder, paths) if cache else None
    fresh: dict[str, Any] = {}
    rules: list[Rule] = []
    errors: list[RuleError] = []
    for path in paths:
        try:
            if cached is not None:
                doc = cached[path]
            else:
                try:
                    doc = fresh[path] = read_yaml(Path(path))
                except YamlFileError as exc:
                    raise RuleError(exc.path, exc.message) from None
            rule = validate(doc, path)
            if rule.id in seen:
                raise RuleError(path, f"duplicate id (also in {seen[rule.id]})", "id")
            seen[rule.id] = path
            rules.append(rule)
        except RuleError as exc:
            if not keep_going:
                raise
            errors.append(exc)
    if cache and cached is None and len(fresh) == len(paths):  # every file read: worth keeping
        save_docs("rules", folder, paths, fresh)
    if cache and not errors:
        docs = cached if cached is not None else fresh
        keep(*_pack_key(paths), [[p, docs[p]] for p in paths], _SCHEMA_VERSION)
    return rules, errors


# ---------------------------------------------------------------------- the validated pack, kept
#: the code a rule file's validity depends on: the schema and its placeholder syntax, and
#: what it checks names against (event kinds and their fields, facts and their fields,
#: categories).  When any of them is edited every rule file is validated again.
_SCHEMA_CODE = (("rules", "schema.py"), ("rules", "template.py"), ("knowledge", "schema.py"))
_SCHEMA_PACKAGES = (("events",), ("model", "facts"))
#: bump when what is kept changes shape
_SCHEMA_VERSION = 1


def _schema_sources() -> list[str]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # stat'ed, not compared: no resolve
    out = [os.path.join(root, *parts) for parts in _SCHEMA_CODE]
    for parts in _SCHEMA_PACKAGES:
        folder = os.path.join(root, *parts)
        out += sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".py"))
    return out


def _pack_key(paths: Sequence[str | os.PathLike[str]]) -> tuple[str, list[str]]:
    return "rulepack", [os.fspath(p) for p in paths] + _schema_sources()


def _validated(folder: Path, paths: list[str]) -> list[Rule] | None:
    """The rules of ``folder`` as validated by an earlier run, or None when a rule file or
    the schema's code changed since (by size and mtime), or none were kept.

    Validating the pack (``check`` of every file: kinds, fields, placeholders, regexes)
    took 70-130 ms of every start, more than the rest of a 200-line chat-ops answer; a
    pack that passed it and has not changed passes it again.  Only an error-free folder is
    kept, so a file that fails validation is checked (and refused) on every run.
    """
    found, docs = kept(*_pack_key(paths), _SCHEMA_VERSION)
    if not found or not isinstance(docs, list) or [d[0] for d in docs] != paths:
        return None
    return [build_rule(doc, path) for path, doc in docs]


def check_rules(dirs: Iterable[str | Path]) -> tuple[int, list[RuleError]]:
    """Every error of every rule file under ``dirs`` (``ncclsleuth rules check``): the
    files read afresh, each error with its file, line and key.  Returns (files, errors)."""
    from ..util.yamldocs import YamlFileError, key_lines, line_of, read_yaml

    errors: list[RuleError] = []
    seen: dict[str, str] = {}
    files = 0
    for folder in (Path(d) for d in dirs):
        if not folder.is_dir():
            errors.append(RuleError(str(folder), "rule folder not found"))
            continue
        for path in map(Path, yaml_files(folder)):
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
