"""Load the rule pack: every ``*.yaml`` of the rule folders, validated, sorted by id."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..util.cache import cache_dir, digest, read_json, write_atomic
from .schema import Rule, RuleError, validate


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
        cached = _cached_docs(folder, paths)
        fresh: dict[str, Any] = {}
        for path in paths:
            try:
                if cached is not None:
                    doc = cached[str(path)]
                else:
                    doc = fresh[str(path)] = _read_yaml(path)
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
            _save_docs(folder, paths, fresh)
    rules.sort(key=lambda r: r.id)
    return rules, errors


def _read_yaml(path: Path) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when present: 7x faster
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise RuleError(str(path), f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(str(path), f"cannot read: {exc}") from None


# The parsed YAML of a rule folder, kept as JSON in the per-user cache folder and used
# while no file changed (same names, sizes and mtimes): start-up then neither imports
# PyYAML nor parses 54 files (~16 ms of a 130 ms chat-ops answer).  Rules are still
# validated on every load, so errors read the same with or without it.
def _manifest(paths: list[Path]) -> list[list[Any]]:
    out = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            return []
        out.append([str(p), st.st_size, st.st_mtime_ns])
    return out


def _docs_path(folder: Path) -> str | None:
    base = cache_dir()
    if base is None:
        return None
    return os.path.join(base, "rules-" + digest(str(folder.resolve()).encode()) + ".json")


def _cached_docs(folder: Path, paths: list[Path]) -> dict[str, Any] | None:
    where = _docs_path(folder)
    data = read_json(where) if where is not None else None
    if not isinstance(data, dict) or data.get("manifest") != _manifest(paths) or not isinstance(data.get("docs"), dict):
        return None
    docs: dict[str, Any] = data["docs"]
    return docs if all(str(p) in docs for p in paths) else None


def _save_docs(folder: Path, paths: list[Path], docs: dict[str, Any]) -> None:
    where = _docs_path(folder)
    manifest = _manifest(paths)
    if where is None or not manifest:
        return
    try:
        text = json.dumps({"manifest": manifest, "docs": docs})
    except (TypeError, ValueError):  # a YAML value JSON cannot hold (a date): no cache
        return
    if json.loads(text)["docs"] != docs:  # int keys, tuples: JSON would change the rule
        return
    write_atomic(where, text)
