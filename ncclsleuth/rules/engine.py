"""Load the rule pack, evaluate it on a job model, rank the findings, build the report."""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..cache import cache_dir, digest, read_json, write_atomic
from ..events import Event
from ..model.job import JobModel
from ..report import Evidence, Finding, Report
from .match import Context, evaluate
from .schema import Rule, RuleError, Severity, validate

_DIGITS = re.compile(r"\d+")
_TEMPLATE = re.compile(r"\{([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?\}")
MAX_UNEXPLAINED = 200


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


def load_rules(dirs: Iterable[str | Path] | None = None, keep_going: bool = False) -> tuple[list[Rule], list[RuleError]]:
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


# ---------------------------------------------------------------------- evaluation


def run_rules(model: JobModel, rules: list[Rule], ctx: Context | None = None) -> list[Finding]:
    """Findings of all rules that fire, most likely root cause first."""
    ctx = ctx or Context(model)
    fired: list[tuple[Rule, Finding, tuple[Any, ...]]] = []
    for rule in rules:
        m = evaluate(rule.match, ctx)
        if not m.ok:
            continue
        f, first = _finding(rule, m.items, m.named, model)
        for cond in rule.explains:  # the consequences it accounts for (never evidence)
            f.explained.update((ev.source, ev.line) for it in evaluate(cond, ctx).items for ev in it.get("evidence", ()))
        fired.append((rule, f, first))
    fired.sort(key=lambda t: _rank_key(t[0], t[2]))
    _link_causes(fired)
    # causes first: a symptom whose cause fired moves below it
    fired.sort(key=lambda t: (_tier(t[0]), t[1].caused_by is not None, *_rank_key(t[0], t[2])[1:]))
    return [f for _, f, _ in fired]


def _tier(rule: Rule) -> int:
    return 0 if rule.severity >= Severity.warning else 1


def _rank_key(rule: Rule, first: tuple[Any, ...]) -> tuple[Any, ...]:
    return (_tier(rule), rule.role == "symptom", -int(rule.severity), -rule.priority, -rule.confidence, first, rule.id)


def _link_causes(fired: list[tuple[Rule, Finding, tuple[Any, ...]]]) -> None:
    causes = [(r, f) for r, f, _ in fired if r.role == "cause" and r.severity >= Severity.warning]
    for rule, f, _ in fired:
        if rule.role != "symptom":
            continue
        for cr, cf in causes:
            if not rule.symptom_of or cr.category in rule.symptom_of or cr.id in rule.symptom_of:
                f.caused_by = cr.id
                break


def _finding(rule: Rule, items: list[dict[str, Any]], named: dict[str, dict[str, Any]],
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
    file_host = model.source_hosts()
    hosts = sorted(item_hosts or {h for ev in ordered if (h := ev.host or file_host.get(ev.source))})
    ranks = sorted(item_ranks or {ev.rank for ev in ordered if ev.rank is not None})
    primary = items[0] if items else {}
    # events beyond KEEP_PER_KIND of a kind are counted, not kept: say "at least" then
    capped = any(model.folded.get(k) for k in {ev.kind for ev in ordered})
    extra = {"count": f"{len(items)}+" if capped else len(items), "hosts": ", ".join(hosts[:8]) or "?",
             "nhosts": len(hosts),
             "ranks": ", ".join(map(str, ranks[:16])) or "?"}
    fill = lambda s: _fill(s, primary, named, extra)  # noqa: E731
    f = Finding(rule_id=rule.id, name=rule.name, category=rule.category, severity=rule.severity.name,
                confidence=rule.confidence, title=fill(rule.title), message=" ".join(fill(rule.message).split()),
                fix=fill(rule.fix).strip(), references=list(rule.references),
                evidence=[Evidence(ev.source, ev.line, ev.text) for ev in ordered[: rule.limit]],
                evidence_total=len(ordered), role=rule.role, hosts=hosts, ranks=ranks,
                explained=set(evs))
    first = model.order_key(ordered[0]) if ordered else (1 << 30, 0)
    return f, first


def _fill(tpl: str, primary: dict[str, Any], named: dict[str, dict[str, Any]], extra: dict[str, Any]) -> str:
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


# ---------------------------------------------------------------------- report


def build_report(model: JobModel, rules: list[Rule], notices: list[dict[str, str]] | None = None) -> Report:
    """Run the rules and put findings, unexplained problem lines and the summary together."""
    from ..gcpause import paused

    with paused():
        return _build_report(model, rules, notices)


def _build_report(model: JobModel, rules: list[Rule], notices: list[dict[str, str]] | None) -> Report:
    from ..model.summary import summarize

    findings = run_rules(model, rules)
    explained = set().union(*(f.explained for f in findings)) if findings else set()
    rest = [ev for ev in model.error_events() if (ev.source, ev.line) not in explained]
    return Report(findings=findings, unexplained=_unexplained(rest, model), summary=summarize(model),
                  notices=list(notices or []), unexplained_total=len(rest))


def _unexplained(rest: list[Event], model: JobModel) -> list[Evidence]:
    """Up to MAX_UNEXPLAINED lines: one per distinct message shape first, so a flood of
    one WARN cannot hide a different error that came later; then the rest in order."""
    seen: set[str] = set()
    first: list[Event] = []
    for ev in rest:
        shape = _DIGITS.sub("#", ev.text.split(" NCCL ", 1)[-1])[:300]
        if shape not in seen:
            seen.add(shape)
            first.append(ev)
    picked = first[:MAX_UNEXPLAINED]
    if len(picked) < MAX_UNEXPLAINED:
        chosen = {id(e) for e in picked}
        picked += [e for e in rest if id(e) not in chosen][: MAX_UNEXPLAINED - len(picked)]
    picked.sort(key=model.order_key)
    return [Evidence(ev.source, ev.line, ev.text) for ev in picked]
