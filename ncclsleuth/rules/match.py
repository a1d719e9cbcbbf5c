"""Evaluate a rule's declarative ``match`` tree against the job model.

Leaves select items: ``event: KIND`` selects events of that kind, ``fact: NAME``
selects records of a derived fact; ``where`` filters them field by field and
``count`` bounds how many must remain.  ``all``/``any``/``none``/``not`` combine.
A satisfied positive leaf contributes its items as evidence and as the values the
message template is filled from.
"""
from __future__ import annotations

import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import field
from functools import lru_cache
from typing import Any

from ..events import Event, is_record, plain
from ..model.facts import FACTS, PER_LINE, LazyRecord
from ..model.job import JobModel
from ..util.classes import dataclass


@dataclass
class Match:
    """The outcome of a condition: whether it holds, and the items that made it hold."""

    ok: bool
    items: list[Mapping[str, Any]] = field(default_factory=list)
    named: dict[str, Mapping[str, Any]] = field(default_factory=dict)


class Context:
    """Per-evaluation cache of fact results, shared by all rules."""

    def __init__(self, model: JobModel) -> None:
        self.model = model
        self._facts: dict[str, Sequence[Mapping[str, Any]]] = {}
        self._columns: dict[tuple[Any, ...], Column] = {}
        #: fact name -> the keys of the columns read from its records (:meth:`forget`)
        self._fact_columns: dict[str, list[tuple[Any, ...]]] = {}
        #: the (file, line)s the findings so far explain, once the fallback rules run
        #: (:func:`~.ranking.run_rules`): a per-line fact computed then makes no record of them
        self.explained: Container[tuple[str, int]] | None = None

    def fact(self, name: str) -> Sequence[Mapping[str, Any]]:
        if name not in self._facts:
            fn = FACTS.get(name)
            if fn is None:
                raise KeyError(f"unknown fact {name!r} (known: {', '.join(sorted(FACTS))})")
            lines = PER_LINE.get(name)
            self._facts[name] = lines(self.model, self.explained) if lines is not None and self.explained \
                else fn(self.model)
        return self._facts[name]

    def forget(self, name: str) -> None:
        """Drop fact ``name``'s records and the columns read from them (no rule reads it again:
        :func:`~.ranking.run_rules`); asked again, it is computed again."""
        self._facts.pop(name, None)
        for source in self._fact_columns.pop(name, ()):
            self._columns.pop(source, None)

    def events(self, kind: str) -> list[Event]:
        return self.model.events.get(kind, [])

    def column(self, source: tuple[Any, ...], pool: Sequence[Any], get: Any) -> Column:
        """The values ``get`` reads from each item of ``pool`` (the items of ``source``: kinds
        or fact names, and the ``where`` path), grouped by value: read once per evaluation,
        not once per rule (the 29 knowledge-base rules each filter every problem line)."""
        col = self._columns.get(source)
        if col is None or len(col.values) != len(pool):
            col = self._columns[source] = Column([get(it) for it in pool])
            if source[0] == "fact":  # (kind, *names, events, path)
                for name in source[1:-2]:
                    self._fact_columns.setdefault(name, []).append(source)
        return col


class Column:
    """One ``where`` path's value per pool item, and the items of each distinct value."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values
        self.groups: dict[Any, list[int]] = {}  # memo key -> item indices, in pool order
        self.loose: list[int] = []  # items whose value has no memo key (lists, floats, dicts)
        for i, v in enumerate(values):
            k = _memo_key(v)
            if k is _NO_KEY:
                self.loose.append(i)
            else:
                self.groups.setdefault(k, []).append(i)


#: the memo key of a value a predicate cannot be cached for
_NO_KEY = object()


def _memo_key(v: Any) -> Any:
    """A key under which ``_pred(v, p)`` can be remembered: equal keys give equal results.
    Only strings, ints and None (the type is part of the key: ``True == 1``, but a regex
    reads ``str(v)``); floats (``0.0 == -0.0``) and containers are checked item by item."""
    t = type(v)
    if t is str:
        return v
    if t is int or t is bool or v is None:
        return (t, v)
    return _NO_KEY


def _event_item(ev: Event) -> dict[str, Any]:
    d = ev.to_dict()
    d["evidence"] = [ev]
    d["message_text"] = ev.text
    return d


class LineItem(LazyRecord):
    """What a finding needs of a match that is not its first, read from its event when asked:
    the mapping ``{"evidence": [ev], "host": ev.host, "rank": ev.rank}`` in 56 bytes, not the
    ~270 of that dict and its list.  A rule on the watchdog's lines matches three of them a rank:
    on 4,096 per-rank files those dicts were 1 KB a rank of the rule step's peak."""

    __slots__ = ("ev",)
    _KEYS = ("evidence", "host", "rank")

    def __init__(self, ev: Event) -> None:
        self.ev = ev

    def __getitem__(self, key: str) -> Any:
        if key == "evidence":
            return [self.ev]
        if key == "host":
            return self.ev.host
        if key == "rank":
            return self.ev.rank
        raise KeyError(key)


def _light_item(ev: Event) -> LineItem:
    """What a finding needs of a match that is not its first: the line, its host and rank."""
    return LineItem(ev)


def evaluate(cond: dict[str, Any], ctx: Context) -> Match:
    """Evaluate one condition tree."""
    if "all" in cond:
        res = []
        for c in cond["all"]:  # stops at the first condition that fails
            r = evaluate(c, ctx)
            if not r.ok:
                return Match(False)
            res.append(r)
        return _merge(res)
    if "any" in cond:
        res = [r for r in (evaluate(c, ctx) for c in cond["any"]) if r.ok]
        return _merge(res) if res else Match(False)
    if "none" in cond:
        return Match(not any(evaluate(c, ctx).ok for c in cond["none"]))
    if "not" in cond:
        return Match(not evaluate(cond["not"], ctx).ok)
    return _leaf(cond, ctx)


def _merge(res: list[Match]) -> Match:
    m = Match(True)
    for r in res:
        m.items.extend(r.items)
        m.named.update(r.named)
    return m


def _leaf(cond: dict[str, Any], ctx: Context) -> Match:
    pool: list[Any]  # events, or fact records
    if "event" in cond:
        kinds = cond["event"] if isinstance(cond["event"], list) else [cond["event"]]
        pool = [it for k in kinds for it in ctx.events(k)]
        source: tuple[Any, ...] = ("event", *kinds)
    else:
        names = cond["fact"] if isinstance(cond["fact"], list) else [cond["fact"]]
        pool = [it for n in names for it in ctx.fact(n)]
        source = ("fact", *names)
    where = cond.get("where")
    if where and pool:
        events = isinstance(pool[0], Event)
        tests = _tests(where, events)
        (get, pred), path = tests[0], next(iter(where))
        items = _select(pool, ctx.column((*source, events, path), pool, get), pred, tests[1:])
    else:
        items = pool
    if items and isinstance(items[0], Event):
        # predicates read event attributes directly; dicts only for what a finding shows:
        # the full fields of the first match (message template), the line of the others
        items = [_event_item(items[0])] + [_light_item(ev) for ev in items[1:]]
    cnt = cond.get("count") or {"ge": 1}
    ok = all(_cmp(len(items), op, v) for op, v in cnt.items())
    if not ok:
        return Match(False)
    m = Match(True, items)
    if "as" in cond and items:
        m.named[cond["as"]] = items[0]
    return m


def _select(pool: list[Any], first: Column, pred: Any, rest: list[tuple[Any, Any]]) -> list[Any]:
    """The items of ``pool`` for which every predicate holds, in pool order.

    Predicates are pure functions of the value: the first runs once per distinct value of
    its column (and per item only for values without a memo key); the others check the
    survivors, remembering each value's verdict, as ``all()`` per item would."""
    idx = [i for ids in first.groups.values() if _pred(first.values[ids[0]], pred) for i in ids]
    idx += [i for i in first.loose if _pred(first.values[i], pred)]
    idx.sort()
    items = [pool[i] for i in idx]
    for get, pred in rest:
        if not items:
            break
        seen: dict[Any, bool] = {}
        keep = []
        for it in items:
            v = get(it)
            k = _memo_key(v)
            if k is _NO_KEY:
                ok = _pred(v, pred)
            else:
                hit = seen.get(k)
                ok = seen[k] = _pred(v, pred) if hit is None else hit
            if ok:
                keep.append(it)
        items = keep
    return items


_TESTS: dict[tuple[int, bool], tuple[Any, list[tuple[Any, Any]]]] = {}


def _tests(where: dict[str, Any], events: bool) -> list[tuple[Any, Any]]:
    """(getter, predicate) per ``where`` entry, made once per condition: a 16,384-rank
    job puts ~100,000 items through the predicates, so paths are not re-split per item."""
    key = (id(where), events)
    hit = _TESTS.get(key)
    if hit is None or hit[0] is not where:  # the id of a freed condition may be reused
        hit = _TESTS[key] = (where, [(_getter(path, events), pred) for path, pred in where.items()])
    return hit[1]

#: what a fact record is: a dict, or one that reads its fields when asked (``LazyRecord``:
#: ``facts.knowledge.KnownRecord``); ``dict`` first, the common case without the ABC's check
_RECORDS = (dict, LazyRecord)



def _getter(path: str, events: bool) -> Any:
    """A function item -> value of ``path`` (dotted), as ``to_dict`` would show it.

    On events the first part is an attribute (``message_text`` is the line); nested
    values (interfaces, IB devices) are read as attributes where ``to_dict`` has dicts.
    """
    parts = path.split(".")
    if events:
        head, rest = parts[0], parts[1:]
        attr = "text" if head == "message_text" else head
        if not rest:
            return lambda it: plain(getattr(it, attr, None))
        return lambda it: _walk(getattr(it, attr, None), rest)
    if len(parts) == 1:
        name = parts[0]
        return lambda it: plain(it.get(name)) if isinstance(it, _RECORDS) else None
    return lambda it: _walk(it, parts)


def _walk(cur: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(cur, (list, tuple)):
            cur = [_field(x, part) for x in cur]
        else:
            cur = _field(cur, part)
            if cur is None:
                return None
    return [plain(x) for x in cur] if isinstance(cur, list) else plain(cur)


def _field(x: Any, name: str) -> Any:
    if isinstance(x, _RECORDS):
        return x.get(name)
    if is_record(x):
        return getattr(x, name, None)
    return None


@lru_cache(maxsize=4096)
def _rx(p: str) -> re.Pattern[str]:
    return re.compile(p)


def _pred(val: Any, pred: Any) -> bool:
    if isinstance(val, list):  # a list field matches when any element does
        return any(_pred(v, pred) for v in val) if val else _pred(None, pred)
    if not isinstance(pred, dict):
        return _eq(val, pred)
    return all(_op(val, op, arg) for op, arg in pred.items())


def _eq(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(b, bool) or isinstance(a, bool):
        return a is b or a == b
    if isinstance(b, (int, float)) and not isinstance(a, (int, float)):
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return False
    return a == b or str(a) == str(b)


def _op(val: Any, op: str, arg: Any) -> bool:
    if op == "exists":
        return (val is not None and val != "") is bool(arg)
    if op == "eq":
        return _eq(val, arg)
    if op == "ne":
        return not _eq(val, arg)
    if op == "in":
        return any(_eq(val, a) for a in arg)
    if op == "not_in":
        return not any(_eq(val, a) for a in arg)
    if val is None:
        return op == "not_regex"
    if op == "regex":
        return _rx(arg).search(str(val)) is not None
    if op == "not_regex":
        return _rx(arg).search(str(val)) is None
    if op == "contains":
        return str(arg) in str(val)
    try:
        return _cmp(float(val), op, float(arg))
    except (TypeError, ValueError):
        return False


def _cmp(a: float, op: str, b: float) -> bool:
    return {"eq": a == b, "ne": a != b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b}[op]
