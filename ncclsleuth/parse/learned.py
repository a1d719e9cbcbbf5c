"""Lines other than plain NCCL INFO, by shape: a plan learned from the full parser, checked by perturbation.

A big job's logs repeat the same PyTorch and NCCL WARN messages once per rank (a 8,000-rank
timeout prints five watchdog lines per rank: ``[rank5238]:[E1129 11:41:55.056547440
ProcessGroupNCCL.cpp:632] [Rank 5238] Watchdog caught collective operation timeout:
WorkNCCL(SeqNum=1245, ...)``).  Each takes the full path (envelope, anchors, grammar,
builder: ~25 us a line), and lines of one position-exact shape
(:func:`~ncclsleuth.parse.grammar.fixed_key`: every character in place, digits masked) differ
only in their digits.  So the full path's event for a line of such a shape is a function of
its digit runs, and for most messages a simple one: each field is a constant of the shape or
one slice of the line (as ``str``, ``int`` or ``float``).

This module finds that function by asking the full parser, not by reading its code: at the
``LEARN_AT``-th line of a shape, the line's event is compared with the events of the same line
with one digit run changed at a time (``1`` -> ``2``, ..., ``9`` -> ``0``), with every run
changed at once, and with the event of the shape's first line.  A field that no single change
moves is a constant; a field that changes with runs ``i..j`` is the slice over them, if that
slice converts to its value in every variant.  The plan is kept only if it rebuilds the exact
event of the line, of every variant and of the first line, and if the
parser's state (tracebacks, held messages, failure blocks, tool blocks, counts) moved as it does
for a line of no state.  A change that alters the event's kind, its number of events or the
state makes the shape slow (the full path, every time): the digits decide more than values
there.  Lines with a carriage return or an escape code, non-ASCII lines and kinds whose event
reads the parser's state (tracebacks and their frames, failure-block fields, text) are never
planned.  The shifts and the first line are what the learning tries of the values: a shape whose
first and learning lines both hold digits the parser reads as out of range (a month of 97,
``4x`` where ``0x`` stood) may read a later in-range line as those were read; real lines of one
shape do not differ so.  The plan table belongs to the shape cache (the files parsed with it share it) and is
bounded, as is the learning: a shape met fewer than ``LEARN_AT`` times costs a count.

A field whose value is a tuple or a value record (an ``Init timings`` line's phases, a ring's
order, a host's interfaces) is taken apart into leaves, each a constant or a cut, as long as
every variant's value has the same structure.  A checked plan is compiled into one generated
call (:func:`compiled`): a slice per cut, the constants as globals.

The same learning gives the fast path's templated NCCL INFO shapes a *maker*
(``fastpath.MADE``): there the probe is the shape's template, and the plan stands for the
template and the builder (``FileParser._learn_maker``).

``tests/test_learned.py`` checks the plans against the full path on every line of the fixtures
and the corpus, each with random digit changes beyond the learning ones, and the makers against
the templates on every NCCL INFO line shape of them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .. import events as E
from ..events.base import SHARE_LEN, field_names, share, share_int, shared_as, shared_get, shared_int_get
from ..events.values import ValueRecord
from ..util.cache import CODE
from ..util.classes import NamedTuple
from ..util.rxstore import rx
from .grammar import fixed_key

#: learned plans on (tests switch them off to compare)
ENABLED = True
#: lines of a shape met before its plan is learned (learning costs ~2 + runs full parses)
LEARN_AT = 8
#: plans per shape cache (their keys are the shapes: at most ~10 MB of them), and shapes counted
#: before their plan is learned, by the shape's hash, each with its first line (the plan must
#: hold for it too: at most ~20 MB of them)
MAX_PLANS = 10_000
MAX_SEEN = 20_000
#: learnings tried per shape cache, makers of templated INFO shapes and learned plans of other
#: lines together: each costs up to ~36 full or template parses (probes), and a kept one is a
#: compiled function with its own globals (~4 KB with its code).  A hostile log can make a new
#: shape every few lines; a real 8,000-rank file tries 97, 2,048 per-rank files 123.  Past it a
#: shape keeps its template, or goes the full way
MAX_LEARNINGS = 5_000
#: a maker (``fastpath.MADE``) is learned once its shape has had about as many lines as learning
#: costs probes (a template parse per digit run and per shift, and one of the first line), times
#: this: a rent-or-buy rule.  At the 8th line, the makers of a 256-rank job's ~100 shapes of a few
#: dozen lines each cost ~5,400 probes, more than they saved
PROBE_LINES = 2
#: the longest line planned (a PyTorch watchdog line is ~300 characters)
MAX_CHARS = 1024
#: digit runs a planned line may have (each is a full parse while learning)
MAX_RUNS = 32
#: kinds whose event depends on more than the line: tracebacks, their frames, failure blocks
STATEFUL_KINDS = frozenset({"traceback", "sync_call", "text", "failure_field", "failure_block_head"})
#: the changes made to every run at once (digit + n, mod 10): a value the parser checks
#: (a clock time, an address) leaves its range under one of them
ALL_SHIFTS = (7, 3, 5)
_RUN = rx(r"\d+")
_BASE = frozenset({"source", "line", "text"})
#: a shape whose lines go the full way (its digits decide more than values)
SLOW: Any = False


class Plan(NamedTuple):
    """What the full parser makes of every line of one shape: one event of ``cls`` (or none),
    ``const`` fields, ``cuts`` (field, start, end, converter or None), and the parser's counts
    it moves (``stats``: records, NCCL records, unknown NCCL records; ``kind`` counted);
    ``shaped``: fields whose value is a tuple or a value record with some parts cut from the
    line (field, the value's :data:`Shape`, each leaf's constant or cut)."""

    cls: type[E.Event] | None
    const: dict[str, Any]
    cuts: tuple[tuple[str, int, int, Any], ...]
    stats: tuple[int, int, int]
    shaped: tuple[tuple[str, Any, tuple[Any, ...]], ...] = ()
    #: ``make(source, line, text)``: the plan's event of a line, one generated function
    #: (:func:`compiled`); None until the plan is checked
    make: Any = None
    #: ``read(text) -> (rank, ms)``: a step plan's fields the model keeps of a line it does not
    #: quote (:func:`step_reader`, set where the step plan is learned); None: the event's way
    read: Any = None


#: how a tuple or value record is put together again from its leaves, in order: ``None`` for a
#: leaf, ``(tuple, shapes)`` for a tuple, ``(class, shapes)`` for a value record (its fields in order)
Shape = Any


#: the full parser of one line, on a scratch parser: its events, or None when the line moved
#: the parser's state otherwise than the learned line did (it opened something, was held,
#: failed, counted other records)
Probe = Callable[[str], "list[E.Event] | None"]


def fields(ev: E.Event) -> dict[str, Any]:
    """An event's fields but where it came from (file, line number, text)."""
    return {n: getattr(ev, n) for n in ev.FIELDS if n not in _BASE}


def plannable(line: str) -> bool:
    """A line a plan may stand for: ASCII (positions are characters and bytes), no redraw or colour,
    not longer than ``MAX_CHARS`` (its shape is a key of the tables: a hostile log of distinct
    1 MB lines would otherwise keep 100,000 such keys)."""
    return len(line) <= MAX_CHARS and line.isascii() and "\r" not in line and "\x1b" not in line


def due(seen: dict[int, list[Any]], plans: int, key: bytes, line: str,
        shape: Callable[[str], bytes] = fixed_key) -> tuple[str, ...] | None:
    """Count ``line``, of shape ``key`` that has no plan yet (``seen``: the shapes counted, by their
    hash, each with its first line; ``plans``: how many the plan table holds).  None while its plan
    is not due; at the shape's ``LEARN_AT``-th line, where the table has room, the earlier lines its
    plan must also hold for: the shape's first, unless that one was a hash twin's (``shape``: the
    function ``key`` is of the line by)."""
    h = hash(key)
    got = seen.get(h)
    if got is None:
        if len(seen) < MAX_SEEN:
            seen[h] = [1, line]
        return None
    got[0] += 1
    if got[0] < LEARN_AT or plans >= MAX_PLANS:
        return None
    del seen[h]
    first = got[1]
    return (first,) if shape(first) == key else ()


def maker_at(line: str) -> int:
    """The line of a templated shape (counted from its plan) at which its maker is learned."""
    return max(LEARN_AT, PROBE_LINES * (len(_RUN.findall(line)) + len(ALL_SHIFTS) + 1))


def _shift(digits: str, by: int) -> str:
    return "".join(chr(48 + (ord(c) - 48 + by) % 10) for c in digits)


def _variants(line: str, runs: list[tuple[int, int]]) -> list[str]:
    """The line with each digit run changed alone (index i), then with all of them changed."""
    out = [line[:a] + _shift(line[a:b], 1) + line[b:] for a, b in runs]
    for by in ALL_SHIFTS:
        every = list(line)
        for a, b in runs:
            every[a:b] = _shift(line[a:b], by)
        out.append("".join(every))
    return out


def _cut(line: str, value: Any, a: int, b: int) -> tuple[int, int, Any] | None:
    """Where in ``line`` a value that depends on the digits between ``a`` and ``b`` is read from."""
    t = type(value)
    if t is int or t is float:
        for x in (a, a - 1):
            if x < 0 or (x < a and line[x] != "-"):
                continue
            try:
                if t(line[x:b]) == value:
                    return x, b, t
            except ValueError:
                pass
        return None
    if t is str and value:
        n = len(value)
        for x in range(max(0, b - n), a + 1):
            if line.startswith(value, x) and x + n >= b:
                return x, x + n, None
    return None


def compiled(plan: Plan) -> Plan:
    """The plan with its ``make``: the event of a line, as one generated function with a slice
    per cut that fills the event's slots, so that a line costs one Python call.  Walking the cuts
    and rebuilding shaped values leaf by leaf at run time cost as much as the builder it stands
    for (an ``Init timings`` line: 16 leaves), and the class's ``__init__`` takes keywords and
    shares every short string, the constants too.  Here the constants are stored as they are (the
    learned event's own objects, already shared), and cut values are shared as ``__init__`` shares
    them (``events.base.shared_as``).  The code is kept in the code store by its text (the
    slices), the constants and classes are its globals.  :func:`derive` checks its events."""
    cls = plan.cls
    assert cls is not None
    types = cls.FIELD_TYPES
    ns: dict[str, Any] = {"C": cls, "K": [], "N": object.__new__, "share": share, "S": shared_get,
                          "share_int": share_int, "I": shared_int_get}
    consts: list[Any] = ns["K"]

    def const(value: Any) -> str:
        consts.append(value)
        return f"K[{len(consts) - 1}]"

    def cut(a: int, b: int, conv: Any) -> str:
        return f"t[{a}:{b}]" if conv is None else f"{conv.__name__}(t[{a}:{b}])"

    def value(shape: Shape, leaves: Iterator[tuple[Any, ...]], top: bool = True) -> str:
        """A shaped value's expression; the tuples and records inside it shared, as the builder
        shares an ``Init timings`` line's (phase, seconds) pairs (most ranks print the same)."""
        if shape is None:
            leaf = next(leaves)
            return const(leaf[0]) if len(leaf) == 1 else cut(*leaf)
        t, parts = shape
        inner = [value(p, leaves, False) for p in parts]
        if t is tuple:
            expr = "(" + "".join(f"{x}, " for x in inner) + ")"
        else:
            name = f"R{len(ns)}"
            ns[name] = t
            expr = f"{name}({', '.join(inner)})"
        return expr if top else f"share({expr})"

    body = ["e = N(C)", "e.source = source", "e.line = line", "e._text = t"]
    body += [f"e.{n} = {const(v)}" for n, v in plan.const.items()]
    for n, a, b, conv in plan.cuts:
        shared = conv is None and b - a <= SHARE_LEN and shared_as(n, types[n]) == "str"
        if shared:  # share(), with its hit inline: a dict lookup, not a call (most values repeat)
            body += [f"v = {cut(a, b, conv)}", f"e.{n} = S(v) or share(v)"]
        elif conv is int and shared_as(n, types[n]) == "int":  # as __init__ shares an int field's value
            body += [f"v = {cut(a, b, conv)}", f"e.{n} = I(v) or share_int(v)"]
        else:
            body.append(f"e.{n} = {cut(a, b, conv)}")
    for n, shape, leaves in plan.shaped:  # a tuple of parts or a record: never empty
        expr = value(shape, iter(leaves))
        body.append(f"e.{n} = share({expr})" if shared_as(n, types[n]) == "tuple" else f"e.{n} = {expr}")
    src = "def make(source, line, t):\n" + "".join(f"    {x}\n" for x in body) + "    return e\n"
    exec(CODE.compile(src, "<learned-maker>"), ns)  # noqa: S102 - slices and names made here
    return plan._replace(make=ns["make"])


#: fields of a step line's event that send it past its process-less, problem-less way through
#: the model (``JobModel.add``: a process of its host, pid or level; a problem of its level)
_STEP_PLAIN = ("host", "pid", "level")


def step_reader(plan: Plan) -> Any:
    """``read(t) -> (rank, ms)``: of a checked ``StepTime`` plan, the two fields the model keeps of a
    step line it does not quote (``JobModel.step_sample``), cut from the line as ``make`` cuts them,
    without the event; None where the plan's event is not such a line (a host, pid or level of its
    own, or ``rank``/``ms`` in a shaped value), which then goes as its event.  A rank file samples
    32 step lines and quotes the first (:meth:`ncclsleuth.parse.lines.FileParser._step_lines`)."""
    if plan.make is None or plan.cls is not E.StepTime or any(n == "rank" or n == "ms" for n, _, _ in plan.shaped):
        return None
    cut = {n: (a, b, conv) for n, a, b, conv in plan.cuts}
    if any(n in cut or plan.const.get(n) is not None for n in _STEP_PLAIN):
        return None
    ns: dict[str, Any] = {"K": []}

    def expr(name: str) -> str:
        if name in cut:
            a, b, conv = cut[name]
            if conv is not None:
                ns[conv.__name__] = conv
            return f"t[{a}:{b}]" if conv is None else f"{conv.__name__}(t[{a}:{b}])"
        ns["K"].append(plan.const.get(name))
        return f"K[{len(ns['K']) - 1}]"

    src = f"def read(t):\n    return {expr('rank')}, {expr('ms')}\n"
    exec(CODE.compile(src, "<learned-step>"), ns)  # noqa: S102 - slices and names made here
    return ns["read"]


def _shape(value: Any, leaves: list[Any]) -> Shape | bool:
    """The :data:`Shape` of a field's value, its leaves appended to ``leaves``; False for a value
    with a list, dict or set in it (one object a constant would share among events)."""
    t = type(value)
    if t is tuple:
        parts = [_shape(v, leaves) for v in value]
        return False if any(p is False for p in parts) else (tuple, tuple(parts))
    if isinstance(value, ValueRecord):
        parts = [_shape(getattr(value, n), leaves) for n in field_names(t)]
        return False if any(p is False for p in parts) else (t, tuple(parts))
    if t is list or t is dict or t is set:
        return False
    leaves.append(value)
    return None


def _leaf_deps(base: dict[str, Any], seen: list[tuple[str, dict[str, Any]]], n_runs: int,
               names: list[str]) -> dict[str, tuple[Shape, list[Any], dict[int, list[int]]]] | None:
    """For each field of ``names`` (a tuple or value record that changed with the digits): its
    shape, its leaves and the single-run variants (indexes) each leaf changed in; None where a
    variant's value has another shape (the digits decide more than values there)."""
    out: dict[str, tuple[Shape, list[Any], dict[int, list[int]]]] = {}
    for name in names:
        leaves: list[Any] = []
        shape = _shape(base[name], leaves)
        if shape is False:
            return None
        deps: dict[int, list[int]] = {}
        for i, (_, f) in enumerate(seen[1:]):
            other: list[Any] = []
            if _shape(f[name], other) != shape:
                return None
            if i < n_runs:
                for k, (a, b) in enumerate(zip(leaves, other)):
                    if a != b:
                        deps.setdefault(k, []).append(i)
        out[name] = (shape, leaves, deps)
    return out


def derive(line: str, events: list[E.Event], stats: tuple[int, int, int], probe: Probe,
           others: tuple[str, ...] = ()) -> Plan | None:
    """The plan of ``line``'s shape from the full parser's ``events`` of it (at most one) and the
    counts it moved, checked against the full parser's events of the line's variants and of
    ``others`` (earlier lines of the shape, as they came); None where the shape must go the
    full way."""
    if len(events) > 1:
        return None
    ev = events[0] if events else None
    if ev is not None and (ev.kind in STATEFUL_KINDS or ev.text != line):
        return None
    runs = [m.span() for m in _RUN.finditer(line)]
    if len(runs) > MAX_RUNS:
        return None
    base = fields(ev) if ev is not None else {}
    if any(_shape(v, []) is False for v in base.values()):
        return None  # a constant would be shared by every event of the shape: values only
    seen: list[tuple[str, dict[str, Any]]] = [(line, base)]
    deps: dict[str, list[int]] = {}
    variants = _variants(line, runs)
    for i, variant in enumerate(variants + list(others)):
        got = probe(variant)
        if got is None or len(got) != len(events):
            return None
        if ev is None:
            continue
        other = got[0]
        if type(other) is not type(ev) or other.text != variant:
            return None
        f = fields(other)
        seen.append((variant, f))
        if i < len(runs):
            for name, v in base.items():
                if f[name] != v:
                    deps.setdefault(name, []).append(i)
    if ev is None:
        return Plan(None, {}, (), stats)
    cuts = []
    structured = [n for n in deps if type(base[n]) is tuple or isinstance(base[n], ValueRecord)]
    for name, on in deps.items():
        if name in structured:
            continue
        cut = _cut(line, base[name], runs[on[0]][0], runs[on[-1]][1])
        if cut is None:
            return None
        cuts.append((name, *cut))
    shaped = []
    parts = _leaf_deps(base, seen, len(runs), structured) if structured else {}
    if parts is None:
        return None
    for name, (shape, leaves, leaf_deps) in parts.items():
        defs: list[tuple[Any, ...]] = []
        for k, leaf in enumerate(leaves):
            moved = leaf_deps.get(k)
            leaf_cut: tuple[Any, ...] | None = (leaf,) if moved is None \
                else _cut(line, leaf, runs[moved[0]][0], runs[moved[-1]][1])
            if leaf_cut is None:
                return None
            defs.append(leaf_cut)
        shaped.append((name, shape, tuple(defs)))
    plan = Plan(type(ev), {n: v for n, v in base.items() if n not in deps}, tuple(cuts), stats, tuple(shaped))
    plan = compiled(plan)
    try:
        if any(fields(plan.make("", 0, text)) != f for text, f in seen):
            return None  # a field the single changes left alone moved when all changed, or a cut is wrong
    except ValueError:  # a cut that does not convert on a variant
        return None
    return plan
