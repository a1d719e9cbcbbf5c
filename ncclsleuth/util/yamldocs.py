"""YAML data folders (the rule pack, the knowledge base), parsed once and kept as JSON.

The parsed documents of a folder are kept in the per-user cache folder and used while no
file changed (same names, sizes and mtimes): start-up then neither imports PyYAML nor
parses the files (54 rule files: ~16 ms of a 130 ms chat-ops answer; the 1.5 MB
knowledge base: 0.6 s against 20 ms).  Callers still validate what they load, so errors
read the same with or without the cache.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import yaml_files
from .cache import cache_dir, digest, read_json, write_atomic


class YamlFileError(ValueError):
    """A data file that cannot be read or is not valid YAML."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def read_yaml(path: Path) -> Any:
    """One file, parsed with the safe loader (libyaml's when present: 7x faster)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise YamlFileError(str(path), f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlFileError(str(path), f"cannot read: {exc}") from None


def yaml_docs(folder: Path, kind: str) -> dict[str, Any]:
    """Every ``*.yaml`` under ``folder`` (path -> parsed document), from the cache when no
    file changed; raises :class:`YamlFileError` for the first file that cannot be read."""
    paths = yaml_files(folder)
    cached = cached_docs(kind, folder, paths)
    if cached is not None:
        return cached
    docs = {p: read_yaml(Path(p)) for p in paths}
    save_docs(kind, folder, paths, docs)
    return docs


def _manifest(paths: Sequence[str | os.PathLike[str]]) -> list[list[Any]]:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            return []
        out.append([os.fspath(p), st.st_size, st.st_mtime_ns])
    return out


def _docs_path(kind: str, folder: Path) -> str | None:
    base = cache_dir()
    if base is None:
        return None
    return os.path.join(base, f"{kind}-" + digest(str(folder.resolve()).encode()) + ".json")


def cached_docs(kind: str, folder: Path, paths: Sequence[str | os.PathLike[str]]) -> dict[str, Any] | None:
    """The documents of ``paths`` as last parsed, or None when a file changed or none are kept."""
    where = _docs_path(kind, folder)
    data = read_json(where) if where is not None else None
    if not isinstance(data, dict) or data.get("manifest") != _manifest(paths) or not isinstance(data.get("docs"), dict):
        return None
    docs: dict[str, Any] = data["docs"]
    return docs if all(os.fspath(p) in docs for p in paths) else None


def save_docs(kind: str, folder: Path, paths: Sequence[str | os.PathLike[str]], docs: dict[str, Any]) -> None:
    """Keep the parsed documents of ``paths`` (nothing when JSON would change them)."""
    where = _docs_path(kind, folder)
    manifest = _manifest(paths)
    if where is None or not manifest:
        return
    try:
        text = json.dumps({"manifest": manifest, "docs": docs})
    except (TypeError, ValueError):  # a YAML value JSON cannot hold (a date): no cache
        return
    if json.loads(text)["docs"] != docs:  # int keys, tuples: JSON would change the document
        return
    write_atomic(where, text)


def key_lines(text: str) -> dict[str, int]:
    """Where each key of a YAML document is (1-based line), by key path as the rule schema
    names them (``match.any[1].where.message_text.regex``, ``tests[0].fail``): so that an
    error says the line, not only the key.  Empty for text that does not compose."""
    import yaml

    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return {}
    out: dict[str, int] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = f"{path}.{k.value}" if path else str(k.value)
                out.setdefault(key, k.start_mark.line + 1)
                walk(v, key)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                key = f"{path}[{i}]"
                out.setdefault(key, item.start_mark.line + 1)
                walk(item, key)

    walk(root, "")
    return out


def line_of(lines: dict[str, int], key: str | None) -> int | None:
    """The line of ``key``, else of the nearest enclosing key that has one."""
    while key:
        if key in lines:
            return lines[key]
        cut = max(key.rfind("."), key.rfind("["))
        key = key[:cut] if cut > 0 else ""
    return None
