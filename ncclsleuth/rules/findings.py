"""Findings: what a rule that fired says, with its evidence lines, built from the matched items.

A :class:`Finding` is one rule's diagnosis (id, category, severity, title, message, fix,
evidence lines, hosts and ranks); the message templates (:mod:`.template`: placeholders,
defaults, optional clauses) are filled from the first matched item (``{field}``), a named
one (``{name.field}``) or what every finding knows (``{count}``, ``{hosts}``, ``{nhosts}``,
``{ranks}``, ``{host}``/``{rank}`` when there is one, ``{who}``).  A peer's IP address
that a process of the job bound is written with that host's name.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from ..events import Event
from ..model.facts.said import said
from ..model.job import KEEP_PER_KIND, JobModel
from ..model.stats import TEXT_MOST, ranges, some
from ..util.classes import dataclass
from ..util.rxstore import rx
from .lineset import FileIds, LineSet
from .schema import CATEGORIES, KNOWLEDGE, Rule, Severity
from .template import fill, is_missing, is_peer


@dataclass(frozen=True)
class Evidence:
    """A line a finding quotes: its file, line number and text."""

    file: str
    line: int
    text: str
    #: the rank that wrote the line, where the line says (not in the JSON: the renderers
    #: name the ranks of repeated lines with it)
    rank: int | None = field(default=None, compare=False)
    #: in :attr:`Finding.shown`: how many evidence lines read like this one (numbers aside),
    #: the ranks and the number of files that printed them
    count: int = field(default=1, compare=False)
    ranks: tuple[int, ...] = field(default=(), compare=False)
    files: int = field(default=1, compare=False)
    at_least: bool = field(default=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass
class Finding:
    """A rule that fired: its verdict, the evidence lines and the fix, ranked among the others."""

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
    #: every (file, line) this finding explains, also beyond the evidence shown (a set of
    #: pairs, kept as line numbers per file: :class:`~.lineset.LineSet`)
    explained: LineSet = field(default_factory=LineSet, repr=False, compare=False)
    #: a symptom's possible causes (categories or rule ids): the rule's, or the knowledge
    #: base's for the matched line (``category_from`` rules)
    symptom_of: tuple[str, ...] = field(default=(), repr=False, compare=False)
    #: placeholders of the title/message/fix that had no value and said "unknown" (the
    #: rule pack's tests fail on any: a template drops the clause or gives a default)
    unfilled: list[str] = field(default_factory=list, repr=False, compare=False)
    #: the evidence as people read it: a line repeated by many ranks (numbers aside) once,
    #: with its count and ranks, over every evidence line, not only those kept (not in the JSON)
    shown: list[Evidence] = field(default_factory=list, repr=False, compare=False)
    #: what the finding is about among the rule's findings ('' for a rule that gives one):
    #: the record of a one-finding-per-record rule, the group of a group_by rule
    subject: str = ""
    #: hosts at the other end of the link the finding is about (a peer's address that a
    #: process of the job bound): the post-mortem draws that hop broken (not in the JSON)
    peer_hosts: list[str] = field(default_factory=list, repr=False, compare=False)

    @property
    def id(self) -> str:
        """Stable across runs and polls of a growing log: the rule and its subject
        (``DESYNC002``, ``WATCH001/ranks 16-23``, ``MSG004/nccl:net_ib.cc:1234``)."""
        return f"{self.rule_id}/{self.subject}" if self.subject else self.rule_id

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "rule_id": self.rule_id, "name": self.name, "category": self.category,
                "severity": self.severity, "confidence": round(self.confidence, 2), "title": self.title,
                "message": self.message,
                "evidence": [e.to_dict() for e in self.evidence], "evidence_total": self.evidence_total,
                "fix": self.fix, "references": self.references, "caused_by": self.caused_by, "role": self.role,
                "hosts": self.hosts, "ranks": self.ranks, "explained_lines": self.explained_lines()}

    def explained_lines(self) -> dict[str, list[int]]:
        """Every line this finding accounts for, per file (also beyond the evidence shown)."""
        return self.explained.per_file()


#: fields of a matched record that name a global rank besides ``rank``/``ranks`` (the two
#: ranks of a duplicate GPU or a mismatched collective, the slowest rank of init)
_RANK_FIELDS = ("rank_a", "rank_b", "slow_rank")


def finding(rule: Rule, items: Sequence[Mapping[str, Any]], named: Mapping[str, Mapping[str, Any]],
             model: JobModel) -> tuple[Finding, tuple[Any, ...]]:
    ordered = _each_line_once(items, model)
    explained = LineSet.of_lines(((ev.source, ev.line) for ev in ordered), file_ids(model))
    lead = [ev for ev in (items[0].get("evidence", ()) if items else ())]
    if lead:  # the primary item's own lines first (the culprit before the messengers)
        ordered = lead[:1] + [ev for ev in ordered if ev is not lead[0]]
    # who the finding is about: the matched records' own host/rank where they name one (a
    # laggard fact names the culprit; its evidence also quotes the messengers), else the lines'
    item_hosts = {str(it["host"]) for it in items if it.get("host") not in (None, "?")}
    item_ranks = {it["rank"] for it in items if isinstance(it.get("rank"), int)}
    item_ranks.update(r for it in items if isinstance(it.get("ranks"), list) for r in it["ranks"] if isinstance(r, int))
    item_ranks.update(it[k] for it in items[:1] for k in _RANK_FIELDS if isinstance(it.get(k), int))
    file_host = model.source_hosts()
    hosts = sorted(item_hosts or {h for ev in ordered if (h := ev.host or file_host.get(ev.source))})
    ranks = sorted(item_ranks or {ev.rank for ev in ordered if ev.rank is not None})
    primary = items[0] if items else {}
    # events beyond KEEP_PER_KIND of a kind are counted, not kept: say "at least" then
    capped = any(model.folded.get(k) for k in {ev.kind for ev in ordered})
    # the placeholders besides the items' fields (schema.EXTRA_PLACEHOLDERS: the rule schema checks them)
    extra = {"count": f"{len(items)}+" if capped else len(items), "hosts": ", ".join(hosts[:8]) or None,
             "nhosts": len(hosts), "ranks": ", ".join(map(str, ranks[:16])) or None}
    extra["who"] = _who(hosts, ranks, capped)
    # who it is about, where the first item does not say: the one host / rank of the finding
    if len(hosts) == 1:
        extra["host"] = hosts[0]
    if len(ranks) == 1:
        extra["rank"] = ranks[0]
    unfilled: list[str] = []
    ip_hosts = model.ip_hosts()
    fill = _filler(primary, named, extra, ip_hosts, unfilled)
    category, severity, symptom_of = rule.category, rule.severity.name, rule.symptom_of
    if rule.category_from == KNOWLEDGE:  # the knowledge base's reading of the first line, in context
        read = [c for c in (said(lead[0]).categories if lead else ()) if c in CATEGORIES]
        if read:
            category = read[0]
            # a symptom that declares no causes follows from any: the reading names it, not its causes
            symptom_of = tuple(dict.fromkeys([*symptom_of, *read])) if rule.role == "symptom" and symptom_of \
                else symptom_of
    elif rule.category_from:  # the knowledge base's verdict on the matched line
        cats = primary.get(rule.category_from)
        cats = [c for c in (cats if isinstance(cats, (list, tuple)) else [cats]) if c in CATEGORIES]
        if cats:
            category = cats[0]
            symptom_of = tuple(cats) if rule.role == "symptom" else symptom_of
    if rule.severity_from and primary.get(rule.severity_from) in Severity.__members__:
        severity = str(primary[rule.severity_from])
    f = Finding(rule_id=rule.id, name=rule.name, category=category, severity=severity,
                confidence=rule.confidence, title=fill(rule.title), message=" ".join(fill(rule.message).split()),
                fix=fill(rule.fix).strip(), references=list(rule.references),
                evidence=[Evidence(ev.source, ev.line, ev.text, ev.rank) for ev in ordered[: rule.limit]],
                evidence_total=len(ordered), role=rule.role, hosts=hosts, ranks=ranks,
                explained=explained, symptom_of=symptom_of, unfilled=unfilled,
                shown=collapsed(ordered, rule.limit), subject=_subject(rule, primary),
                peer_hosts=_peer_hosts(primary, ip_hosts))
    first = model.order_key(ordered[0]) if ordered else (1 << 30, 0)
    return f, first


def file_ids(model: JobModel) -> FileIds:
    """The file ids of the run's findings: one, over the model's file index (its sets ask and
    add each other's numbers as they are)."""
    hit = model.memo.get("file_ids")
    if hit is None or hit[0] != len(model.sources):
        hit = model.memo["file_ids"] = (len(model.sources), FileIds(model.source_index(), model.sources))
    return hit[1]  # type: ignore[return-value]  # the memo holds what this function put there


def _each_line_once(items: Sequence[Mapping[str, Any]], model: JobModel) -> list[Event]:
    """The items' evidence events in input order (``model.in_order``), each line once: its
    first event in item order (the merge is stable), equal lines side by side.  Not a set of the
    lines seen: on 4,096 per-rank files a set a file was ~240 bytes a rank of the rule step's
    peak."""
    out: list[Event] = []
    last, sources = -1, [""]  # the key of the last line kept, the files of its lines (one, but outside the model)
    for k, ev in model.in_order([ev for it in items for ev in it.get("evidence", ())]):
        if k == last:
            if ev.source in sources:
                continue
            sources.append(ev.source)
        else:
            last, sources = k, [ev.source]
        out.append(ev)
    return out


#: what names a record of a one-finding-per-record rule, in order of preference
_SUBJECT_FIELDS = ("who", "comm", "host", "peer", "rank", "setting")


def _subject(rule: Rule, primary: Mapping[str, Any]) -> str:
    """What this finding is about among the rule's findings (see :attr:`Finding.id`)."""
    if rule.group_by:
        return str(primary.get(rule.group_by, ""))
    if rule.per_record:
        return next((str(primary[k]) for k in _SUBJECT_FIELDS if not is_missing(primary.get(k))), "")
    return ""


#: evidence lines read for repeats: enough for every rank of a 4,096-GPU job saying one
#: line; beyond, the counts are a floor (``Evidence.at_least``) and the work stays bounded
COLLAPSE_MAX = 4096
#: what :func:`collapsed` deletes from a line's UTF-8 bytes to group it: ``bytes.translate``'s delete
#: is a C loop, ``str.translate`` with a deletion table a lookup a character (3.3 against 0.4 us a
#: watchdog line; up to 4,096 lines a finding).  No UTF-8 sequence holds an ASCII digit's byte, so
#: the groups are those of the text without its digits
_DIGIT_BYTES = b"0123456789"


def collapsed(events: Sequence[Event], limit: int) -> list[Evidence]:
    """One line per message shape (the text without its digits: the same WARN from 512
    ranks), the first of each in the given order, with how many there were and who
    printed them; at most ``limit`` lines."""
    groups: dict[bytes, list[Event]] = {}
    for ev in events[:COLLAPSE_MAX]:
        groups.setdefault(ev.text.strip().encode().translate(None, _DIGIT_BYTES), []).append(ev)
    floor = len(events) > COLLAPSE_MAX
    out: list[Evidence] = []
    for same in list(groups.values())[:limit]:
        first = same[0]
        ranks = tuple(sorted({ev.rank for ev in same if ev.rank is not None}))
        out.append(Evidence(first.source, first.line, first.text, first.rank, count=len(same), ranks=ranks,
                            files=len({ev.source for ev in same}), at_least=floor))
    return out


def _peer_hosts(primary: Mapping[str, Any], ip_hosts: Mapping[str, str]) -> list[str]:
    """The hosts the first item's peer fields name by an address one of them bound."""
    out: list[str] = []
    for k, v in primary.items():
        if isinstance(v, str) and is_peer(k) and ip_hosts:
            named = _named(v, ip_hosts)
            if named != v:
                out.append(named.split(" (", 1)[0])
    return sorted(set(out))


def _who(hosts: Sequence[str], ranks: Sequence[int], capped: bool = False) -> str | None:
    """``rank 5 (node1)``, ``ranks 0-7 (node1, node2)``, ``node1``, ``rank 3``: who a
    finding is about, in words (None when the logs name neither).  ``capped``: lines of its
    kinds past the first ``KEEP_PER_KIND`` were only counted, so the ranks named are those the
    kept lines name, and the words say so: at 100,000 ranks 20,000 of 300,000 watchdog lines
    (the files first in name order) named a tenth of the ranks; at 16,384 the kept lines of
    another kind (``work_status``, one a rank) name them all, so no more is claimed."""
    hs = some(hosts, 4)
    if not ranks:
        who = hs or None
    else:
        rs = ("rank " if len(ranks) == 1 else "ranks ") + ranges(ranks, ", ", TEXT_MOST)
        who = f"{rs} ({hs})" if hs else rs
    return f"{who}, as the lines kept name them ({KEEP_PER_KIND:,} a kind; the others were counted)" \
        if who and capped else who


def _filler(primary: Mapping[str, Any], named: Mapping[str, Mapping[str, Any]], extra: Mapping[str, Any],
            ip_hosts: Mapping[str, str], unfilled: list[str]) -> Any:
    """The function that fills this finding's templates (:mod:`.template`)."""

    def lookup(a: str, b: str | None) -> Any:
        if b is not None:
            src = named.get(a)
            return src.get(b) if src is not None else None
        val = primary.get(a)
        return extra.get(a) if is_missing(val) else val

    def show(val: Any, peer: bool) -> str:
        hosts = ip_hosts if peer else {}
        if isinstance(val, (list, tuple)):
            return ", ".join(_named(_short(v), hosts) for v in val)
        return _named(_short(val), hosts)

    def filled(tpl: str) -> str:
        out = fill(tpl, lookup, show)
        unfilled.extend(out.missing)
        return out.text

    return filled


_PORT = rx(r"(?:<\d+>|%\w+)+$")


def _named(text: str, ip_hosts: Mapping[str, str]) -> str:
    """A peer's IP address (with its port) that one process of the job bound: ``host (address)``."""
    if not ip_hosts or len(text) > 64:
        return text
    bare = _PORT.sub("", text).strip("[]")
    host = ip_hosts.get(bare)
    if host is None and bare.count(":") == 1:  # a.b.c.d:port
        host = ip_hosts.get(bare.partition(":")[0])
    return f"{host} ({text})" if host else text


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return str(v.get("name") or v.get("hca") or v)
    return str(v)
