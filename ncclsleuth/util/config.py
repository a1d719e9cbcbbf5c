"""Project configuration: ``.ncclsleuth.yaml`` or ``[tool.ncclsleuth]`` in ``pyproject.toml``.

The nearest file upwards from the current folder is used (in one folder ``.ncclsleuth.yaml``
before ``pyproject.toml``; a ``pyproject.toml`` without the table is passed over), or the
one ``--config`` names.  Keys (a closed set: a typo is an error naming the file and key)::

    fail_on: error                 # info | warning | error | never
    rules: [team-rules/]           # extra rule folders, relative to the config file
    disable: [MSG2*, net.socket_fallback]   # rule ids or names, globs
    enable: [MSG201]               # back on, although a disable pattern matches it
    severity: {NET007: error, "IB*": warning}
    redact: true                   # analyze/report output without site names
    format: json                   # analyze's output format

A flag on the command line wins over the file; :class:`Settings` remembers where each
value came from (``ncclsleuth config show``).
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from .classes import dataclass
from .rxstore import rx

FILE_NAMES = (".ncclsleuth.yaml", ".ncclsleuth.yml", "pyproject.toml")
SEVERITIES = ("info", "warning", "error")
FORMATS = ("terminal", "json", "markdown", "slack", "html")
#: key -> (what it holds, in words; a check of the value)
KEYS: dict[str, str] = {
    "fail_on": "one of info, warning, error, never",
    "rules": "a list of rule folders",
    "disable": "a list of rule ids, names or globs",
    "enable": "a list of rule ids, names or globs",
    "severity": "a mapping rule id/name/glob -> info, warning or error",
    "redact": "true or false",
    "format": "one of " + ", ".join(FORMATS),
}
DEFAULTS: dict[str, Any] = {"fail_on": "warning", "rules": [], "disable": [], "enable": [], "severity": {},
                            "redact": False, "format": "terminal"}


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the file and the key."""


@dataclass
class Settings:
    """The effective settings: values and, per key, where the value came from."""

    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    path: str | None = None

    def get(self, key: str) -> Any:
        """The configured value (None when the file does not set it)."""
        return self.values.get(key)

    def effective(self, key: str, flag: Any = None, flag_name: str = "") -> tuple[Any, str]:
        """(value, where from): the flag when given, else the file's value, else the default."""
        if flag is not None:
            return flag, flag_name or "command line"
        if key in self.values:
            return self.values[key], self.origin[key]
        return DEFAULTS[key], "default"

    def fail_on(self, flag: str | None, default: str = "warning") -> str:
        if flag is not None:
            return flag
        return str(self.values.get("fail_on", default))

    def redact(self, flag: bool | None) -> bool:
        return bool(self.values.get("redact", False)) if flag is None else flag

    def rule_config(self) -> dict[str, Any]:
        """What the orchestrator applies to the rules (``api.Options.config``)."""
        return {k: self.values[k] for k in ("rules", "disable", "enable", "severity") if k in self.values}


def find(start: str | Path | None = None) -> Path | None:
    """The nearest configuration file from ``start`` (default: the current folder) upwards."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        for name in FILE_NAMES:
            cand = folder / name
            if cand.is_file() and (name != "pyproject.toml" or _has_table(cand)):
                return cand
    return None


_TABLE = rx(r"^\s*\[\s*tool\.ncclsleuth\s*\]", re.M)


def _has_table(path: Path) -> bool:
    """Whether a pyproject.toml has the table (a header line, not a mention in a comment)."""
    try:
        return _TABLE.search(path.read_text(encoding="utf-8", errors="replace")) is not None
    except OSError:
        return False


def load(path: str | Path | None = None, start: str | Path | None = None) -> Settings:
    """The settings of ``path`` (``--config``), else of the nearest file, else the defaults."""
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"{path}: configuration file not found")
    else:
        found = find(start)
        if found is None:
            return Settings()
        p = found
    raw = _read(p)
    return Settings(_check(raw, p), {k: str(p) for k in raw}, str(p))


def _read(p: Path) -> Mapping[str, Any]:
    text = _text(p)
    if p.name == "pyproject.toml" or p.suffix == ".toml":
        try:
            import tomllib  # type: ignore[import-not-found,unused-ignore]
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: not valid TOML: {exc}") from None
        table = doc.get("tool", {}).get("ncclsleuth")
        if table is None and p.name != "pyproject.toml":
            table = doc
        if not isinstance(table, dict):
            raise ConfigError(f"{p}: [tool.ncclsleuth] must be a table")
        return table
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"{p}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{p}: must hold a mapping of settings ({', '.join(KEYS)})")
    return doc


def _text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read: {exc}") from None


def _check(raw: Mapping[str, Any], p: Path) -> dict[str, Any]:
    """Every key known and every value of its kind; rule folders made absolute."""
    out: dict[str, Any] = {}
    for key, val in raw.items():
        if key not in KEYS:
            raise ConfigError(f"{p}: key '{key}': unknown setting (known: {', '.join(KEYS)})")
        if not _valid(key, val):
            raise ConfigError(f"{p}: key '{key}': must be {KEYS[key]} (got {val!r})")
        if key == "rules":
            val = [str((p.parent / d).resolve()) for d in val]
        if key in ("disable", "enable"):
            val = [str(x) for x in val]
        out[key] = val
    return out


def _valid(key: str, val: Any) -> bool:
    if key == "fail_on":
        return val in (*SEVERITIES, "never")
    if key == "format":
        return val in FORMATS
    if key == "redact":
        return isinstance(val, bool)
    if key == "severity":
        return isinstance(val, dict) and all(v in SEVERITIES for v in val.values())
    return isinstance(val, list) and all(isinstance(x, (str, int)) for x in val)
