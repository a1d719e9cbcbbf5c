"""Rule schema: one YAML file per rule, validated against a closed schema.

Unknown keys are errors naming the file and the key (a typo must fail loudly, not
silently disable a condition).  Rules are data: no Python is evaluated, regexes are
compiled here and a regex that does not compile is a rule error.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import field
from typing import Any

from ..events import REGISTRY
from ..knowledge.schema import CATEGORIES
from ..model.facts import SPECS
from ..util.classes import dataclass
from ..util.rxstore import rx
from .template import placeholders


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
    """A rule file that cannot be used; ``path``, ``line`` (when known) and ``key`` say where."""

    def __init__(self, path: str, message: str, key: str | None = None, line: int | None = None) -> None:
        self.path, self.key, self.message, self.line = path, key, message, line
        super().__init__(self._text())

    def _text(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: key '{self.key}': {self.message}" if self.key else f"{where}: {self.message}"

    def at(self, line: int | None) -> RuleError:
        """The same error, placed at ``line`` of its file."""
        return RuleError(self.path, self.message, self.key, line)


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
_ID = rx(r"^[A-Z]{2,8}\d{3}$")
#: ``category_from: knowledge``: the category the knowledge base gives the finding's first
#: evidence line in its context (a one-element ALLREDUCE timing out is a barrier)
KNOWLEDGE = "knowledge"


@dataclass(frozen=True)
class RuleTest:
    """A test a rule file carries: a log snippet it must (or must not) fire on, and the line it must quote."""

    name: str
    log: str | dict[str, str]
    should_fire: bool
    expect_line: int | None = None
    expect_text: str | None = None
    #: a rule of a job watched live: evaluated this many seconds after the snippet's last line
    quiet_for: float | None = None


@dataclass(frozen=True)
class Rule:
    """A rule file, validated: when it fires (``match``), what it says and the fix, its own tests."""

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
    #: knowledge base's verdict on the line), when it holds a valid one; ``knowledge``: the
    #: knowledge base's reading of the first evidence line
    category_from: str | None = None
    severity_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Errors:
    """The errors of one rule file, collected so that all of them are reported at once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[RuleError] = []

    def add(self, message: str, key: str | None = None) -> None:
        self.found.append(RuleError(self.path, message, key))

    def run(self, check: Any, *args: Any) -> Any:
        """``check(*args)``; a RuleError it raises is collected (None returned)."""
        try:
            return check(*args)
        except RuleError as exc:
            self.found.append(exc)
            return None


def validate(doc: Any, path: str) -> Rule:
    """Check a parsed YAML document against the schema and build a :class:`Rule` (the
    first error is raised; :func:`check` lists them all)."""
    errors = check(doc, path)
    if errors:
        raise errors[0]
    return build_rule(doc, path)


def check(doc: Any, path: str) -> list[RuleError]:
    """Every error of a rule document: keys, types, values (event kinds, their fields,
    operators and their arguments, facts and their fields, placeholders against what the
    match provides, categories), tests."""
    errs = Errors(path)
    if not isinstance(doc, dict):
        errs.add("a rule file must hold one mapping")
        return errs.found
    for k, v in doc.items():
        if k not in TOP_KEYS:
            errs.add(f"unknown key{_did_you_mean(k, TOP_KEYS)}", k)
        elif not isinstance(v, TOP_KEYS[k]) or isinstance(v, bool) and TOP_KEYS[k] is not bool:  # type: ignore[arg-type]
            errs.add(f"must be of type {_tname(TOP_KEYS[k])} (got {type(v).__name__})", k)
    for k in REQUIRED:
        if k not in doc:
            errs.add("missing required key", k)

    def ok(k: str) -> bool:
        return k in doc and isinstance(doc[k], TOP_KEYS[k])  # type: ignore[arg-type]

    if ok("id") and not _ID.match(doc["id"]):
        errs.add("must look like ABC123 (2-8 capitals, 3 digits)", "id")
    if ok("category") and doc["category"] not in CATEGORIES:
        errs.add(f"unknown category {doc['category']!r} (valid: {', '.join(sorted(CATEGORIES))})", "category")
    if ok("severity"):
        errs.run(_severity, doc["severity"], path)
    if ok("confidence") and not 0 <= float(doc["confidence"]) <= 1:
        errs.add("must be between 0 and 1", "confidence")
    if ok("role") and doc["role"] not in ("cause", "symptom", "context"):
        errs.add("must be cause, symptom or context", "role")
    if ok("match"):
        check_condition(doc["match"], path, "match", errs)
        check_fields(doc, path, errs)
        for key in ("per_record", "group_by", "category_from", "severity_from"):
            if key == "category_from" and doc.get(key) == KNOWLEDGE:
                continue  # the knowledge base's reading of the evidence line: any match
            if doc.get(key) and "fact" not in doc["match"]:
                errs.add("needs a match that is one fact: leaf", key)
    if ok("specificity") and not 0 <= doc["specificity"] <= 3:
        errs.add("must be 0 (a line and its subsystem) to 3 (reasoning across ranks)", "specificity")
    if ok("references"):
        refs = doc["references"]
        if not refs or not all(isinstance(r, str) for r in refs):
            errs.add("needs at least one reference (string)", "references")
        for i, r in enumerate(refs):
            if isinstance(r, str) and not r.startswith(("https://", "http://")):
                errs.add(f"must be a public URL (https://...), not {r!r}: readers have no copy of local files",
                         f"references[{i}]")
    if ok("explains"):
        for i, cond in enumerate(doc["explains"]):
            check_condition(cond, path, f"explains[{i}]", errs)
            for _, leaf, where in _leaves(cond, f"explains[{i}]"):
                _leaf_fields(leaf, path, where, errs)
    if ok("tests"):
        for i, t in enumerate(doc["tests"]):
            errs.run(_test, t, path, i)
    return errs.found


def _severity(s: str, path: str) -> Severity:
    try:
        return Severity.parse(s)
    except ValueError as exc:
        raise RuleError(path, str(exc), "severity") from None


def _did_you_mean(word: str, known: Any) -> str:
    import difflib

    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(map(str, known)))})"


def build_rule(doc: dict[str, Any], path: str) -> Rule:
    """The :class:`Rule` of a document that passed :func:`check` (the loader's kept pack did)."""
    return Rule(id=doc["id"], name=doc["name"], title=doc["title"], category=doc["category"],
                severity=Severity.parse(doc["severity"]), confidence=float(doc["confidence"]),
                description=doc["description"], match=doc["match"], message=doc["message"],
                fix=doc["fix"], references=tuple(doc["references"]),
                tests=tuple(_test(t, path, i) for i, t in enumerate(doc["tests"])), path=path,
                role=doc.get("role", "cause"),
                symptom_of=tuple(doc.get("symptom_of", ())), priority=int(doc.get("priority", 0)),
                tags=tuple(doc.get("tags", ())), limit=int(doc.get("limit", 20)),
                explains=tuple(doc.get("explains", ())), per_record=bool(doc.get("per_record", False)),
                specificity=int(doc.get("specificity", 2)), fallback=bool(doc.get("fallback", False)),
                group_by=doc.get("group_by"), category_from=doc.get("category_from"),
                severity_from=doc.get("severity_from"))


def _tname(t: Any) -> str:
    return " or ".join(x.__name__ for x in t) if isinstance(t, tuple) else t.__name__


def check_condition(c: Any, path: str, where: str, errs: Errors | None = None) -> None:
    """Validate a condition tree (keys, operators and their arguments, regexes); every
    error goes to ``errs`` (without it the first is raised)."""
    e = errs or _Raise(path)
    if not isinstance(c, dict) or not c:
        e.add("a condition must be a non-empty mapping", where)
        return
    for k in c:
        if k not in COND_KEYS:
            e.add(f"unknown condition key{_did_you_mean(k, COND_KEYS)}", f"{where}.{k}")
    groups = [k for k in ("all", "any", "none", "not", "event", "fact") if k in c]
    if len(groups) != 1:
        e.add("a condition needs exactly one of all/any/none/not/event/fact", where)
        return
    g = groups[0]
    if g in ("all", "any", "none"):
        if not isinstance(c[g], list) or not c[g]:
            e.add("must be a non-empty list of conditions", f"{where}.{g}")
            return
        for i, sub in enumerate(c[g]):
            check_condition(sub, path, f"{where}.{g}[{i}]", e)
    elif g == "not":
        check_condition(c["not"], path, f"{where}.not", e)
    else:
        if not isinstance(c[g], (str, list)) or isinstance(c[g], list) and not all(isinstance(n, str) for n in c[g]):
            e.add("must name an event kind / fact (or a list of them)", f"{where}.{g}")
        _check_where(c.get("where", {}), f"{where}.where", e)
        cnt = c.get("count", {})
        if not isinstance(cnt, dict):
            e.add(f"count takes a mapping of {sorted(COUNT_OPS)} -> number", f"{where}.count")
        else:
            for op, val in cnt.items():
                if op not in COUNT_OPS:
                    e.add(f"unknown count operator{_did_you_mean(op, COUNT_OPS)}", f"{where}.count.{op}")
                elif not _is_number(val):
                    e.add(f"must be a number (got {val!r})", f"{where}.count.{op}")


class _Raise(Errors):
    """An error sink that raises at once (the checks called on their own)."""

    def add(self, message: str, key: str | None = None) -> None:
        raise RuleError(self.path, message, key)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: operator -> (check of its argument, what it takes in words)
_OP_ARGS: dict[str, tuple[Any, str]] = {
    "in": (lambda v: isinstance(v, list), "a list of values"),
    "not_in": (lambda v: isinstance(v, list), "a list of values"),
    "gt": (_is_number, "a number"), "ge": (_is_number, "a number"), "lt": (_is_number, "a number"),
    "le": (_is_number, "a number"),
    "exists": (lambda v: isinstance(v, bool), "true or false"),
    "regex": (lambda v: isinstance(v, str), "a regular expression (text)"),
    "not_regex": (lambda v: isinstance(v, str), "a regular expression (text)"),
    "contains": (lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool), "text or a number"),
    "eq": (lambda v: not isinstance(v, (dict, list)), "one value"),
    "ne": (lambda v: not isinstance(v, (dict, list)), "one value"),
}


def _check_where(w: Any, where: str, e: Errors) -> None:
    if not isinstance(w, dict):
        e.add("must be a mapping of field -> predicate", where)
        return
    for fld, pred in w.items():
        if not isinstance(pred, dict):
            continue
        for op, val in pred.items():
            if op not in PRED_OPS:
                e.add(f"unknown operator{_did_you_mean(op, PRED_OPS)}", f"{where}.{fld}.{op}")
                continue
            test, words = _OP_ARGS[op]
            if not test(val):
                e.add(f"{op} takes {words} (got {val!r})", f"{where}.{fld}.{op}")
            elif op in ("regex", "not_regex"):
                try:
                    re.compile(val)
                except re.error as exc:
                    e.add(f"regex does not compile: {exc}", f"{where}.{fld}.{op}")


def _test(t: Any, path: str, i: int) -> RuleTest:
    if not isinstance(t, dict):
        raise RuleError(path, "each test must be a mapping", f"tests[{i}]")
    for k in t:
        if k not in TEST_KEYS:
            raise RuleError(path, f"unknown key{_did_you_mean(k, TEST_KEYS)}", f"tests[{i}].{k}")
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
EXTRA_PLACEHOLDERS = frozenset({"count", "hosts", "nhosts", "ranks", "host", "rank", "who"})
#: what an event item has besides the event's fields (rules/match.py)
_EVENT_EXTRAS = frozenset({"kind", "message_text"})
#: event kind -> the fields of its items (made once: every rule load checks the pack's leaves)
_KIND_FIELDS: dict[str, frozenset[str]] = {}


def _leaves(c: dict[str, Any], where: str, positive: bool = True) -> Iterator[tuple[bool, dict[str, Any], str]]:
    """(positive, leaf, key path) of every event/fact leaf; under none/not a leaf is negative."""
    for k in ("all", "any", "none"):
        for i, sub in enumerate(c.get(k, ())):
            yield from _leaves(sub, f"{where}.{k}[{i}]", positive and k != "none")
    if "not" in c:
        yield from _leaves(c["not"], f"{where}.not", False)
    if "event" in c or "fact" in c:
        yield positive, c, where


def _leaf_fields(leaf: dict[str, Any], path: str, where: str, errs: Errors | None = None) -> set[str]:
    """The fields a leaf's items carry (checked: every name exists, every ``where`` key is a
    field of every kind or fact the leaf names)."""
    e = errs or _Raise(path)
    group = "event" if "event" in leaf else "fact"
    names = leaf[group] if isinstance(leaf[group], list) else [leaf[group]]
    per_name: list[frozenset[str]] = []
    known: list[str] = []
    for n in names:
        if not isinstance(n, str):
            continue
        if group == "event":
            cls = REGISTRY.get(n)
            if cls is None:
                e.add(f"unknown event kind {n!r}{_did_you_mean(n, REGISTRY)} ('ncclsleuth events' lists them)",
                      f"{where}.event")
                continue
            got = _KIND_FIELDS.get(n)
            if got is None:
                got = _KIND_FIELDS[n] = frozenset(cls.FIELDS) | _EVENT_EXTRAS
            per_name.append(got)
        else:
            spec = SPECS.get(n)
            if spec is None:
                e.add(f"unknown fact {n!r} (known: {', '.join(sorted(SPECS))})", f"{where}.fact")
                continue
            per_name.append(spec.fields)
        known.append(n)
    where_keys = leaf.get("where", {})
    for key in where_keys if isinstance(where_keys, dict) else ():
        head = str(key).split(".", 1)[0]
        lacking = [n for n, f in zip(known, per_name) if head not in f]
        if lacking:
            fields = sorted(set().union(*per_name) - {"evidence"})
            e.add(f"{' and '.join(map(repr, lacking))} {'has' if len(lacking) == 1 else 'have'} no field {head!r}"
                  f"{_did_you_mean(head, fields)}", f"{where}.where.{key}")
    return set().union(*per_name) if per_name else set()


def check_fields(doc: dict[str, Any], path: str, errs: Errors | None = None) -> None:
    """Event kinds and facts exist, ``where`` keys are their fields, and every placeholder of
    the title, message and fix is a field of a matched item, a named item's, or a count."""
    e = errs or _Raise(path)
    fields: set[str] = set(EXTRA_PLACEHOLDERS)
    named: dict[str, set[str]] = {}
    unknown_leaf = False
    for positive, leaf, where in _leaves(doc["match"], "match"):
        before = len(e.found)
        got = _leaf_fields(leaf, path, where, e)
        unknown_leaf = unknown_leaf or (len(e.found) > before and not got)
        if positive:
            fields |= got
            if "as" in leaf:
                named[str(leaf["as"])] = got
    if unknown_leaf:  # the fields of a misspelt kind are unknown: no field can be judged
        return
    for key in ("group_by", "category_from", "severity_from"):  # fields of the records of a fact leaf
        if key == "category_from" and doc.get(key) == KNOWLEDGE:
            continue  # the knowledge base's reading of the evidence line, not a field
        if key in doc and doc[key] not in fields:
            e.add(f"no matched fact has a field {doc[key]!r}", key)
    for key in ("title", "message", "fix"):
        if not isinstance(doc.get(key), str):
            continue
        for a, b, _optional in placeholders(doc[key]):
            if b is None and a not in fields:
                e.add(f"placeholder {{{a}}}: no matched event or fact has a field {a!r}"
                      f"{_did_you_mean(a, sorted(fields - {'evidence'}))}", key)
            if b is not None and (a not in named or b not in named[a]):
                why = f"no condition is named {a!r} (as: {a})" if a not in named else f"{a!r} has no field {b!r}"
                e.add(f"placeholder {{{a}.{b}}}: {why}", key)


def json_schema(enums: bool = True) -> dict[str, Any]:
    """The rule schema as JSON Schema (draft 2020-12), for editors.

    It says what an editor can check as you type (keys, types, operators, severities and,
    with ``enums``, the event kinds, facts and categories of this version: ``ncclsleuth
    rules schema``); :func:`check` also checks what JSON Schema cannot say (a ``where``
    field of that kind, placeholders against the match).  ``docs/rule.schema.json`` is
    the one without the enumerations (they grow with every new event kind; a test keeps
    the file equal to this), written by ``python -m ncclsleuth.rules.schema``.
    """
    kinds = sorted(REGISTRY)
    facts = sorted(SPECS)
    scalar = {"type": ["string", "number", "boolean", "null"]}
    pred = {"type": "object", "additionalProperties": False, "properties": {
        op: ({"type": "array"} if op in ("in", "not_in") else
             {"type": "number"} if op in ("gt", "ge", "lt", "le") else
             {"type": "boolean"} if op == "exists" else
             {"type": "string", "format": "regex"} if op in ("regex", "not_regex") else scalar)
        for op in sorted(PRED_OPS)}}
    def names(enum: list[str]) -> dict[str, Any]:
        one = {"enum": enum} if enums else {"type": "string"}
        return {"oneOf": [one, {"type": "array", "items": one}]}

    cond: dict[str, Any] = {
        "type": "object", "minProperties": 1, "additionalProperties": False,
        "properties": {
            "all": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/condition"}},
            "any": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/condition"}},
            "none": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/condition"}},
            "not": {"$ref": "#/$defs/condition"},
            "event": names(kinds), "fact": names(facts),
            "where": {"type": "object", "additionalProperties": {"anyOf": [scalar, pred]}},
            "count": {"type": "object", "additionalProperties": False,
                      "properties": {op: {"type": "number"} for op in sorted(COUNT_OPS)}},
            "as": {"type": "string"},
        },
    }
    test = {"type": "object", "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "fail": {"type": ["string", "object"]},
                           "pass": {"type": ["string", "object"]}, "expect_line": {"type": "integer"},
                           "expect_text": {"type": "string"}, "files": {"type": "object"},
                           "quiet_for": {"type": "number", "minimum": 0}},
            "oneOf": [{"required": ["fail"]}, {"required": ["pass"]}]}
    json_type: dict[Any, str] = {str: "string", int: "integer", bool: "boolean", list: "array", dict: "object"}
    props: dict[str, Any] = {}
    for k, t in TOP_KEYS.items():
        props[k] = {"type": "number"} if isinstance(t, tuple) else {"type": json_type[t]}
    props.update({
        "id": {"type": "string", "pattern": _ID.pattern},
        "category": {"enum": sorted(CATEGORIES)} if enums else {"type": "string"},
        "severity": {"enum": [s.name for s in Severity]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "role": {"enum": ["cause", "symptom", "context"]},
        "specificity": {"type": "integer", "minimum": 0, "maximum": 3},
        "match": {"$ref": "#/$defs/condition"},
        "explains": {"type": "array", "items": {"$ref": "#/$defs/condition"}},
        "references": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^https?://"}},
        "tests": {"type": "array", "items": test},
    })
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "ncclsleuth rule", "description": "One diagnosis rule (rules/<area>/<ID>.yaml).",
            "type": "object", "additionalProperties": False, "required": list(REQUIRED), "properties": props,
            "$defs": {"condition": cond}}


if __name__ == "__main__":  # python -m ncclsleuth.rules.schema > docs/rule.schema.json
    import json
    import sys

    json.dump(json_schema(enums=False), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
