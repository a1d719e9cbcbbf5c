"""Evaluate the rules on a job model and rank what fired: most likely root cause first.

Problems before information, causes before symptoms (a symptom names its cause in
``caused_by``), then how specific the diagnosis is (a rule's ``specificity``: reasoning
across ranks, a specific message, a message's meaning from the knowledge base, a line and
its subsystem), then severity, rule priority, confidence and the earliest evidence line.
Severity comes after specificity: a precise warning says more than a generic error.

Fallback rules (the knowledge base's) run last and only see the lines no other finding
explains, so a line is diagnosed once, by the most specific rule that knows it.
"""
from __future__ import annotations

import os
from array import array
from collections.abc import Container, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from ..events import Event
from ..model.facts import FACTS
from ..model.job import JobModel
from ..util import Spread, bounded_put
from .findings import Finding, file_ids, finding
from .lineset import FileIds, LineSet, holds
from .match import Context, evaluate
from .schema import Rule, Severity, facts_of

#: a fired rule: the rule, its finding, the line it ranks by
Fired = tuple[Rule, Finding, tuple[Any, ...]]
#: the same with the rule's position in the order instead of the rule (what a helper sends back)
Numbered = tuple[int, Finding, tuple[Any, ...]]


def run_rules(model: JobModel, rules: list[Rule], ctx: Context | None = None,
              spread: Spread | None = None) -> list[Finding]:
    """Findings of all rules that fire, most likely root cause first.

    ``spread``: the rules that are not fallbacks are evaluated in families (:func:`families`),
    shared between this process and the processes ``spread`` runs them in (a result computed
    elsewhere is the bytes :func:`_pack` made of it); the findings are the same, in the same
    order (the fallbacks run here after them, as always)."""
    own = ctx is None
    ctx = ctx or Context(model)
    # stable: the given order, fallbacks last, the most specific fallback first (a message the
    # knowledge base knows before "the program raised X")
    order = sorted(rules, key=lambda r: (r.fallback, -r.specificity if r.fallback else 0))
    done = _last_readers(order) if own else {}
    plain = sum(1 for r in order if not r.fallback)
    fams = families(order[:plain]) if spread is not None else []
    if len(fams) > 1:
        fired = _spread(order, fams, ctx, done, spread)  # type: ignore[arg-type]  # not None with fams
    else:
        fired = [t for i in range(plain) for t in _fire_forgetting(order, i, ctx, done)]
    explained = Explained()
    for _, f, _ in fired:
        explained.add(f.explained)
    if plain < len(order):
        ctx.explained = explained  # from here on a per-line fact skips what is explained
    for i in range(plain, len(order)):
        fired += _fire_forgetting(order, i, ctx, done, explained)
    fired.sort(key=lambda t: _rank_key(t[0], t[1], t[2]))
    _link_causes(fired)
    # causes first: a symptom whose cause fired moves below it
    fired.sort(key=lambda t: (_tier(t[1]), t[1].caused_by is not None, *_rank_key(t[0], t[1], t[2])[1:]))
    return [f for _, f, _ in fired]


def _fire_forgetting(order: Sequence[Rule], i: int, ctx: Context, done: Mapping[int, list[str]],
                     explained: Explained | None = None) -> list[Fired]:
    """``order[i]`` fired (as :func:`_fire`), then the facts no later rule reads forgotten."""
    out = _fire(order[i], ctx, explained)
    for name in done.get(i, ()):
        ctx.forget(name)
    return out


def families(plain: Sequence[Rule]) -> list[list[int]]:
    """The rules (not fallbacks) in families that can be evaluated apart: the positions in
    ``plain`` of the rules that read a fact of one module (:mod:`ncclsleuth.model.facts`), or a
    fact another rule of the family reads, in order; a rule that reads no fact is a family of
    its own.  The facts of one module share what they build from the model (``members``, the
    whole-job ``picture``: memoised in the model), which evaluated in two processes would be
    built twice; a fact's records are made in one process and forgotten there
    (:func:`_last_readers`)."""
    key = tuple(r.id for r in plain)
    got = _FAMILIES.get(key)
    if got is not None:
        return got
    root: dict[str, str] = {}

    def find(x: str) -> str:
        while root.setdefault(x, x) != x:
            x = root[x]
        return x

    for r in plain:
        names = set().union(*(facts_of(c) for c in (r.match, *r.explains)))
        for name in names:
            fn = FACTS.get(name)
            root[find(f"fact:{name}")] = find(f"rule:{r.id}")
            if fn is not None:
                root[find(f"module:{fn.__module__}")] = find(f"rule:{r.id}")
    out: dict[str, list[int]] = {}
    for i, r in enumerate(plain):
        out.setdefault(find(f"rule:{r.id}"), []).append(i)
    return bounded_put(_FAMILIES, 8, key, list(out.values()))


#: the rules' ids in order -> :func:`families`
_FAMILIES: dict[tuple[str, ...], list[list[int]]] = {}


def _spread(order: Sequence[Rule], fams: list[list[int]], ctx: Context, done: Mapping[int, list[str]],
            spread: Spread) -> list[Fired]:
    """The findings of the families, evaluated here and where ``spread`` sends them, in rule order."""
    ids = file_ids(ctx.model)  # made before the helpers start: theirs is the same table (:func:`_pack`)
    me = os.getpid()

    def work(k: int) -> Any:
        out = [(i, f, first) for i in fams[k] for _, f, first in _fire_forgetting(order, i, ctx, done)]
        return out if os.getpid() == me else _pack(out, ids)

    fired: list[Numbered] = []
    for k, got in enumerate(spread(len(fams), work)):
        if type(got) is bytes:
            got = _unpack(got, ids)
            if got is None:  # the helper named files this process has not: its family again, here
                got = work(k)
        fired += got
    fired.sort(key=lambda t: t[0])  # stable: a rule's findings in their order
    return [(order[i], f, first) for i, f, first in fired]


def _pack(fired: list[Numbered], ids: FileIds) -> bytes:
    """A helper's findings pickled for this process: the run's file ids (the line sets' table,
    :class:`~.lineset.FileIds`) as a reference to this process's own, and the names the helper
    added to it, which must be the ones this process has at those ids (else :func:`_unpack`
    refuses them)."""
    import io
    import pickle  # only here: a warm start of a small log never loads it

    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    p.persistent_id = lambda obj: "ids" if obj is ids else None  # type: ignore[method-assign]
    p.dump((ids.added(), fired))
    return buf.getvalue()


def _unpack(data: bytes, ids: FileIds) -> list[Numbered] | None:
    """:func:`_pack`'s findings, their line sets on ``ids``; None where the helper gave a file an id
    this process gives another (a file no finding here named yet is given the helper's id)."""
    import io
    import pickle

    def load(pid: Any) -> FileIds:
        if pid != "ids":
            raise pickle.UnpicklingError(f"unknown reference {pid!r}")
        return ids

    up = pickle.Unpickler(io.BytesIO(data))
    up.persistent_load = load  # type: ignore[method-assign]
    added, fired = up.load()
    return fired if ids.take(added) else None


def _last_readers(order: Sequence[Rule]) -> dict[int, list[str]]:
    """Index of a rule in ``order`` -> the facts no later rule reads (in its ``match`` or its
    ``explains``): their records can go once it has fired.  A fact's records stayed to the end
    of the rule step: on 4,096 per-rank files the whole-job reports, the init records and the
    members were ~300 bytes a rank of its peak (the watchdog rule's, later)."""
    # the same rule pack run after run (serve, watch: loaded again each time) is walked once; a
    # pack changed under the same ids at worst forgets a fact early (made again when asked) or late
    key = tuple(r.id for r in order)
    got = _READERS.get(key)
    if got is not None:
        return got
    last: dict[str, int] = {}
    for i, rule in enumerate(order):
        for cond in (rule.match, *rule.explains):
            for name in facts_of(cond):
                last[name] = i
    out: dict[int, list[str]] = {}
    for name, i in last.items():
        out.setdefault(i, []).append(name)
    return bounded_put(_READERS, 8, key, out)


#: the rules' ids in order -> :func:`_last_readers`
_READERS: dict[tuple[str, ...], dict[int, list[str]]] = {}


class Explained(Container[tuple[str, int]]):
    """The (file, line)s the findings so far explain: a large finding's own set, asked in turn
    (largest first), the lines of the small ones copied into one.  A union of all was one more
    table of every explained line, alive through the rest of the rule step (on 4,096 per-rank
    files 250 bytes a rank of its peak); the report asks the same (:func:`explained_by`)."""

    __slots__ = ("large", "small", "_ids", "_arrays")

    #: a finding's lines are asked through its own set from this many on (fewer are copied):
    #: the sets asked in turn stay as few as the rules with large findings
    LARGE = 256

    def __init__(self) -> None:
        self.large: list[AbstractSet[tuple[str, int]]] = []
        self.small = LineSet()
        #: where every set is a LineSet of one run's file ids: those ids, and the sets' sorted
        #: numbers (asked for every problem line, 117,000 times on the 8,000-rank file: a pair's
        #: number made once, then a bisect an array, no call a set)
        self._ids: FileIds | None = None
        self._arrays: list[array[int]] = []

    def add(self, lines: AbstractSet[tuple[str, int]]) -> None:
        if len(lines) < self.LARGE:
            self.small.update(lines)
        else:
            self.large.append(lines)
            self.large.sort(key=len, reverse=True)
        sets = (*self.large, self.small)
        # the ids of a set that holds lines: an empty one's (made for nothing, or another run's)
        # would send every question the slow way
        ids = next((s.ids for s in sets if type(s) is LineSet and s), None)
        shared = ids is not None and all(type(s) is LineSet and (not s or s.ids is ids) for s in sets)
        self._ids = ids if shared else None
        self._arrays = [s.numbers() for s in sets if s] if shared else []  # type: ignore[attr-defined]

    def __contains__(self, at: object) -> bool:
        ids = self._ids
        if ids is None:
            return any(at in lines for lines in (*self.large, self.small))
        return self._holds(ids.key_of(at))

    def _holds(self, key: int | None) -> bool:
        """Whether a set holds the pair numbered ``key`` in the sets' file ids."""
        if key is not None:
            for keys in self._arrays:
                if holds(keys, key):
                    return True
        return False

    def __bool__(self) -> bool:
        return bool(self.large or self.small)

    def unexplained(self, evs: Iterable[Event]) -> list[Event]:
        """Those of ``evs`` whose line no set holds, asked all at once (the report and the per-line
        facts ask every problem line: ``in`` for each made a tuple first, ~0.1 s of the 8,000-rank
        file's rule step)."""
        ids = self._ids
        if ids is None:
            return [ev for ev in evs if (ev.source, ev.line) not in self]
        return [ev for ev in evs if not self._holds(ids.key(ev.source, ev.line))]


def explained_by(findings: Iterable[Finding]) -> Explained:
    """The (file, line)s ``findings`` explain, asked through their own sets."""
    out = Explained()
    for f in findings:
        out.add(f.explained)
    return out


def _fire(rule: Rule, ctx: Context, explained: Explained | None) -> list[Fired]:
    """The findings of ``rule`` (none where it does not match), with the line each ranks by;
    what they explain is added to ``explained`` (a fallback's: the lines explained so far; None
    for the others, whose lines the caller adds).

    A function of its own so that the matched items die with it: as locals of the loop over
    the rules they lived on until the next rule that fired, and on the 8,000-rank file the
    watchdog rule's 28,000 items (7 MB) were still there at the rule step's peak."""
    m = evaluate(rule.match, ctx)
    if not m.ok:
        return []
    items = m.items
    if rule.fallback and explained is not None:  # only what no finding explains yet
        items = [it for it in items if any((ev.source, ev.line) not in explained for ev in it.get("evidence", ()))]
        if not items:
            return []
    out: list[Fired] = []
    lead: tuple[Any, ...] | None = None
    for group in _groups(rule, items):
        f, first = finding(rule, group, m.named, ctx.model)
        for cond in rule.explains:  # the consequences it accounts for (never evidence)
            f.explained.update((ev.source, ev.line) for it in evaluate(cond, ctx).items
                               for ev in it.get("evidence", ()))
        if explained is not None:
            explained.add(f.explained)
        lead = lead or first  # one finding per record: they keep the fact's order among themselves
        out.append((rule, f, lead if rule.per_record else first))
    return out


def _groups(rule: Rule, items: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The matched items, one finding's worth each: all of them, one each (``per_record``),
    or one list per distinct ``group_by`` value in the order of first appearance."""
    if rule.per_record:
        return [[it] for it in items]
    if rule.group_by is None:
        return [list(items)]
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for it in items:
        groups.setdefault(str(it.get(rule.group_by)), []).append(it)
    return list(groups.values())


def _severity(f: Finding) -> Severity:
    return Severity.parse(f.severity)


def _tier(f: Finding) -> int:
    return 0 if _severity(f) >= Severity.warning else 1


def _rank_key(rule: Rule, f: Finding, first: tuple[Any, ...]) -> tuple[Any, ...]:
    return (_tier(f), rule.role == "symptom", -rule.specificity, -int(_severity(f)), -rule.priority,
            -rule.confidence, first, rule.id)


#: a symptom that can follow from these followed from whatever rank broke the job
_AFTER_A_PEER = frozenset({"peer_failure", "collective_timeout"})


def _link_causes(fired: list[Fired]) -> None:
    """Each symptom names its cause: the cause finding that accounts for its lines (a
    whole-job finding quotes the messengers' lines), else the first cause of a category the
    symptom can follow from, else, through another symptom, that symptom's cause (a process
    taken down after a collective timeout follows from what caused the timeout)."""
    causes = [(r, f) for r, f, _ in fired if r.role == "cause" and _severity(f) >= Severity.warning]
    symptoms = [(r, f) for r, f, _ in fired if r.role == "symptom"]
    for rule, f in symptoms:
        lines = {(e.file, e.line) for e in f.evidence}
        of = f.symptom_of or rule.symptom_of
        hit = next((cr.id for cr, cf in causes if lines and lines <= cf.explained), None)
        if hit is None:
            hit = next((cr.id for cr, cf in causes if not of or cf.category in of or cr.id in of), None)
        if hit is None and _AFTER_A_PEER & set(of):  # lost a peer, or waited for one: the rank that broke
            hit = next((cr.id for cr, _ in causes if cr.specificity >= 3), None)  # the job (whole-job reasoning)
        f.caused_by = hit
    for _ in range(2):  # consequences of consequences
        for rule, f in symptoms:
            if f.caused_by is not None:
                continue
            of = f.symptom_of or rule.symptom_of
            f.caused_by = next((sf.caused_by for sr, sf in symptoms if sf is not f and sf.caused_by is not None
                                and (sf.category in of or sr.id in of)), None)
