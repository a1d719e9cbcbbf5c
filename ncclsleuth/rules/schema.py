"""Rule schema: one YAML file per rule, validated against a closed schema.

Unknown keys are errors naming the file and the key (a typo must fail loudly, not
silently disable a condition).  Rules are data: no Python is evaluated, regexes are
compiled here and a regex that does not compile is a rule error.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..events import REGISTRY
from ..knowledge.schema import CATEGORIES
from ..model.facts import SPECS


class Severity(enum.IntEnum):
    """Ordered: ``info < warning < error``; ``--fail-on`` compares with ``>=``."""

    info = 1
    warning = 2
    error = 3

    @classmethod
    def parse(cls, s: str) -> Severity:
        try:
            return cls[s.lower()]
        except KeyError:
            raise ValueError(f"severity must be one of info, warning, error (got {s!r})") from None


class RuleError(ValueError):
    """A rule file that cannot be used; ``path`` and ``key`` say where."""

    def __init__(self, path: str, message: str, key: str | None = None) -> None:
        self.path, self.key = path, key
        where = f"{path}: key '{key}'" if key else path
        super().__init__(f"{where}: {message}")


TOP_KEYS = {"id": str, "name": str, "title": str, "category": str, "severity": str, "confidence": (int, float),
            "description": str, "match": dict, "message": str, "fix": str, "references": list, "tests": list,
            "role": str, "symptom_of": list, "priority": int, "tags": list, "status": str, "aliases": list,
            "limit": int, "explains": list, "per_record": bool, "specificity": int, "fallback": bool,
            "group_by": str, "category_from": str, "severity_from": str}
REQUIRED = ("id", "name", "title", "category", "severity", "confidence", "description", "match", "message",
            "fix", "references", "tests")
COND_KEYS = {"all", "any", "none", "not", "event", "fact", "where", "count", "as"}
PRED_OPS = {"eq", "ne", "in", "not_in", "regex", "not_regex", "gt", "ge", "lt", "le", "exists", "contains"}
COUNT_OPS = {"eq", "ne", "gt", "ge", "lt", "le"}
TEST_KEYS = {"name", "fail", "pass", "expect_line", "expect_text", "files", "quiet_for"}
_ID = re.compile(r"^[A-Z]{2,8}\d{3}$")


@dataclass(frozen=True)
class RuleTest:
    name: str
    log: str | dict[str, str]
    should_fire: bool
    expect_line: int | None = None
    expect_text: str | None = None
    #: a rule of a job watched live: evaluated this many seconds after the snippet's last line
    quiet_for: float | None = None


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    title: str
    category: str
    severity: Severity
    confidence: float
    description: str
    match: dict[str, Any]
    message: str
    fix: str
    references: tuple[str, ...]
    tests: tuple[RuleTest, ...]
    path: str = ""
    role: str = "cause"
    symptom_of: tuple[str, ...] = ()
    priority: int = 0
    tags: tuple[str, ...] = ()
    limit: int = 20
    #: conditions whose lines this rule's finding also accounts for when it fires (the
    #: consequences it causes), though they are not evidence for it on their own
    explains: tuple[dict[str, Any], ...] = ()
    #: one finding per matched record (a fact's per-host records) instead of one for the rule
    per_record: bool = False
    #: how precise the diagnosis is, for ranking (before severity): 3 reasoning across lines
    #: or ranks, 2 a specific message (the default), 1 a message's meaning from the knowledge
    #: base, 0 a line reported with no more than its subsystem
    specificity: int = 2
    #: evaluated after the other rules, on the lines their findings do not explain: the
    #: knowledge-base rules, which must not say again what a specific rule said
    fallback: bool = False
    #: one finding per distinct value of this field among the matched records
    group_by: str | None = None
    #: the finding's category / severity from this field of the first matched record (the
    #: knowledge base's verdict on the line), when it holds a valid one
    category_from: str | None = None
    severity_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def validate(doc: Any, path: str) -> Rule:
    """Check a parsed YAML document against the schema and build a :class:`Rule`."""
    if not isinstance(doc, dict):
        raise RuleError(path, "a rule file must hold one mapping")
    for k, v in doc.items():
        if k not in TOP_KEYS:
            raise RuleError(path, "unknown key", k)
        if not isinstance(v, TOP_KEYS[k]):  # type: ignore[arg-type]
            raise RuleError(path, f"must be of type {_tname(TOP_KEYS[k])}", k)
    for k in REQUIRED:
        if k not in doc:
            raise RuleError(path, "missing required key", k)
    if not _ID.match(doc["id"]):
        raise RuleError(path, "must look like ABC123 (2-8 capitals, 3 digits)", "id")
    if doc["category"] not in CATEGORIES:
        raise RuleError(path, f"unknown category {doc['category']!r}", "category")
    try:
        sev = Severity.parse(doc["severity"])
    except ValueError as exc:
        raise RuleError(path, str(exc), "severity") from None
    conf = float(doc["confidence"])
    if not 0 <= conf <= 1:
        raise RuleError(path, "must be between 0 and 1", "confidence")
    role = doc.get("role", "cause")
    if role not in ("cause", "symptom", "context"):
        raise RuleError(path, "must be cause, symptom or context", "role")
    check_condition(doc["match"], path, "match")
    check_fields(doc, path)
    if doc.get("per_record") and "fact" not in doc["match"]:
        raise RuleError(path, "one finding per record needs a match that is one fact: leaf", "per_record")
    for key in ("group_by", "category_from", "severity_from"):
        if key in doc and "fact" not in doc["match"]:
            raise RuleError(path, "needs a match that is one fact: leaf", key)
    if not 0 <= int(doc.get("specificity", 2)) <= 3:
        raise RuleError(path, "must be 0 (a line and its subsystem) to 3 (reasoning across ranks)", "specificity")
    if not doc["references"] or not all(isinstance(r, str) for r in doc["references"]):
        raise RuleError(path, "needs at least one reference (string)", "references")
    for i, cond in enumerate(doc.get("explains", ())):
        check_condition(cond, path, f"explains[{i}]")
        for _, leaf, where in _leaves(cond, f"explains[{i}]"):
            _leaf_fields(leaf, path, where)
    tests = tuple(_test(t, path, i) for i, t in enumerate(doc["tests"]))
    return Rule(id=doc["id"], name=doc["name"], title=doc["title"], category=doc["category"], severity=sev,
                confidence=conf, description=doc["description"], match=doc["match"], message=doc["message"],
                fix=doc["fix"], references=tuple(doc["references"]), tests=tests, path=path, role=role,
                symptom_of=tuple(doc.get("symptom_of", ())), priority=int(doc.get("priority", 0)),
                tags=tuple(doc.get("tags", ())), limit=int(doc.get("limit", 20)),
                explains=tuple(doc.get("explains", ())), per_record=bool(doc.get("per_record", False)),
                specificity=int(doc.get("specificity", 2)), fallback=bool(doc.get("fallback", False)),
                group_by=doc.get("group_by"), category_from=doc.get("category_from"),
                severity_from=doc.get("severity_from"))


def _tname(t: Any) -> str:
    return " or ".join(x.__name__ for x in t) if isinstance(t, tuple) else t.__name__


def check_condition(c: Any, path: str, where: str) -> None:
    """Validate a condition tree (keys, operators, regexes)."""
    if not isinstance(c, dict) or not c:
        raise RuleError(path, "a condition must be a non-empty mapping", where)
    for k in c:
        if k not in COND_KEYS:
            raise RuleError(path, "unknown condition key", f"{where}.{k}")
    groups = [k for k in ("all", "any", "none", "not", "event", "fact") if k in c]
    if len(groups) != 1:
        raise RuleError(path, "a condition needs exactly one of all/any/none/not/event/fact", where)
    g = groups[0]
    if g in ("all", "any", "none"):
        if not isinstance(c[g], list) or not c[g]:
            raise RuleError(path, "must be a non-empty list of conditions", f"{where}.{g}")
        for i, sub in enumerate(c[g]):
            check_condition(sub, path, f"{where}.{g}[{i}]")
    elif g == "not":
        check_condition(c["not"], path, f"{where}.not")
    else:
        if not isinstance(c[g], (str, list)):
            raise RuleError(path, "must name an event kind / fact (or a list)", f"{where}.{g}")
        _check_where(c.get("where", {}), path, f"{where}.where")
        cnt = c.get("count", {})
        if not isinstance(cnt, dict) or any(k not in COUNT_OPS for k in cnt):
            raise RuleError(path, f"count takes {sorted(COUNT_OPS)}", f"{where}.count")


def _check_where(w: Any, path: str, where: str) -> None:
    if not isinstance(w, dict):
        raise RuleError(path, "must be a mapping of field -> predicate", where)
    for fld, pred in w.items():
        if isinstance(pred, dict):
            for op, val in pred.items():
                if op not in PRED_OPS:
                    raise RuleError(path, f"unknown operator (use {sorted(PRED_OPS)})", f"{where}.{fld}.{op}")
                if op in ("regex", "not_regex"):
                    try:
                        re.compile(val)
                    except (re.error, TypeError) as exc:
                        raise RuleError(path, f"regex does not compile: {exc}", f"{where}.{fld}.{op}") from None


def _test(t: Any, path: str, i: int) -> RuleTest:
    if not isinstance(t, dict):
        raise RuleError(path, "each test must be a mapping", f"tests[{i}]")
    for k in t:
        if k not in TEST_KEYS:
            raise RuleError(path, "unknown key", f"tests[{i}].{k}")
    has_fail, has_pass = "fail" in t, "pass" in t
    if has_fail == has_pass:
        raise RuleError(path, "a test has exactly one of fail/pass", f"tests[{i}]")
    log = t["fail"] if has_fail else t["pass"]
    if not isinstance(log, (str, dict)):
        raise RuleError(path, "the log snippet must be text (or a mapping file -> text)", f"tests[{i}]")
    if has_fail and "expect_line" not in t and "expect_text" not in t:
        raise RuleError(path, "a fail test must say which line is the evidence (expect_line or expect_text)",
                        f"tests[{i}]")
    quiet = t.get("quiet_for")
    if quiet is not None and (isinstance(quiet, bool) or not isinstance(quiet, (int, float)) or quiet < 0):
        raise RuleError(path, "must be a number of seconds", f"tests[{i}].quiet_for")
    return RuleTest(name=str(t.get("name", f"case{i}")), log=log, should_fire=has_fail,
                    expect_line=t.get("expect_line"), expect_text=t.get("expect_text"),
                    quiet_for=float(quiet) if quiet is not None else None)


def facts_of(cond: dict[str, Any]) -> set[str]:
    """The fact names a condition tree refers to (in any branch)."""
    out: set[str] = set()
    for k in ("all", "any", "none"):
        for sub in cond.get(k, ()):
            out |= facts_of(sub)
    if "not" in cond:
        out |= facts_of(cond["not"])
    if "fact" in cond:
        names = cond["fact"]
        out.update(names if isinstance(names, list) else [names])
    return out


# ---------------------------------------------------------------------- names and fields
#: placeholders every finding can fill besides the matched items' fields (rules/findings.py)
EXTRA_PLACEHOLDERS = frozenset({"count", "hosts", "nhosts", "ranks"})
#: what an event item has besides the event's fields (rules/match.py)
_EVENT_EXTRAS = frozenset({"kind", "message_text"})
#: event kind -> the fields of its items (made once: every rule load checks the pack's leaves)
_KIND_FIELDS: dict[str, frozenset[str]] = {}
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?\}")


def _leaves(c: dict[str, Any], where: str, positive: bool = True) -> Iterator[tuple[bool, dict[str, Any], str]]:
    """(positive, leaf, key path) of every event/fact leaf; under none/not a leaf is negative."""
    for k in ("all", "any", "none"):
        for i, sub in enumerate(c.get(k, ())):
            yield from _leaves(sub, f"{where}.{k}[{i}]", positive and k != "none")
    if "not" in c:
        yield from _leaves(c["not"], f"{where}.not", False)
    if "event" in c or "fact" in c:
        yield positive, c, where


def _leaf_fields(leaf: dict[str, Any], path: str, where: str) -> set[str]:
    """The fields a leaf's items carry (checked: every name exists, every ``where`` key is a
    field of every kind or fact the leaf names)."""
    group = "event" if "event" in leaf else "fact"
    names = leaf[group] if isinstance(leaf[group], list) else [leaf[group]]
    per_name: list[frozenset[str]] = []
    for n in names:
        if group == "event":
            cls = REGISTRY.get(n)
            if cls is None:
                raise RuleError(path, f"unknown event kind {n!r}", f"{where}.event")
            got = _KIND_FIELDS.get(n)
            if got is None:
                got = _KIND_FIELDS[n] = frozenset(cls.FIELDS) | _EVENT_EXTRAS
            per_name.append(got)
        else:
            spec = SPECS.get(n)
            if spec is None:
                raise RuleError(path, f"unknown fact {n!r} (known: {', '.join(sorted(SPECS))})", f"{where}.fact")
            per_name.append(spec.fields)
    for key in leaf.get("where", {}):
        head = key.split(".", 1)[0]
        lacking = [n for n, f in zip(names, per_name) if head not in f]
        if lacking:
            raise RuleError(path, f"{' and '.join(map(repr, lacking))} {'has' if len(lacking) == 1 else 'have'} no "
                            f"field {head!r}", f"{where}.where.{key}")
    return set().union(*per_name)


def check_fields(doc: dict[str, Any], path: str) -> None:
    """Event kinds and facts exist, ``where`` keys are their fields, and every placeholder of
    the title, message and fix is a field of a matched item, a named item's, or a count."""
    fields: set[str] = set(EXTRA_PLACEHOLDERS)
    named: dict[str, set[str]] = {}
    for positive, leaf, where in _leaves(doc["match"], "match"):
        got = _leaf_fields(leaf, path, where)
        if positive:
            fields |= got
            if "as" in leaf:
                named[str(leaf["as"])] = got
    for key in ("group_by", "category_from", "severity_from"):  # fields of the records of a fact leaf
        if key in doc and doc[key] not in fields:
            raise RuleError(path, f"no matched fact has a field {doc[key]!r}", key)
    for key in ("title", "message", "fix"):
        for m in _PLACEHOLDER.finditer(doc[key]):
            a, b = m.group(1), m.group(2)
            if b is None and a not in fields:
                raise RuleError(path, f"placeholder {{{a}}}: no matched event or fact has a field {a!r}", key)
            if b is not None and (a not in named or b not in named[a]):
                why = f"no condition is named {a!r} (as: {a})" if a not in named else f"{a!r} has no field {b!r}"
                raise RuleError(path, f"placeholder {{{a}.{b}}}: {why}", key)
