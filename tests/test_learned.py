"""Learned plans (ncclsleuth.parse.learned) make the events the full parser makes.

Every line of the fixtures and the corpus the prefilter keeps, of each position-exact shape
once, is repeated up to the learning point, then followed by copies with random digits in
every run (more, and wilder, changes than the learning tried: months of 97, "4x" for "0x"),
and the events, the parser's counts and the ranks it saw are compared with and without plans.
(A shape learned *from* such a line may differ: the module doc says so.)"""
from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ncclsleuth.model.job import JobModel
from ncclsleuth.parse import learned, prefixed
from ncclsleuth.parse import lines as lines_mod
from ncclsleuth.parse.anchors import PREFILTER
from ncclsleuth.parse.grammar import ShapeCache, fixed_key, info_key
from ncclsleuth.parse.lines import FileParser

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
COPIES = learned.LEARN_AT + 16


def _shapes(keep: Callable[[str], bool], key: Callable[[str], bytes]) -> list[str]:
    """One line per shape (``key``) of the fixtures and the corpus, of the lines ``keep`` takes."""
    paths = sorted(p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".out"))
    if CORPUS.is_dir():
        paths += sorted(CORPUS.glob("cases/*/log.txt")) + sorted(CORPUS.glob("healthy/*/log.txt"))
    shapes: dict[bytes, str] = {}
    for p in paths:
        for line in p.read_text(errors="replace").splitlines():
            if keep(line):
                shapes.setdefault(key(line), line)
    return list(shapes.values())


def _lines() -> list[str]:
    return _shapes(lambda line: " NCCL INFO " not in line and learned.plannable(line) and PREFILTER.search(line)
                   is not None, fixed_key)


def _random_digits(line: str, rng: random.Random) -> str:
    return learned._RUN.sub(lambda m: "".join(rng.choice("0123456789") for _ in m.group()), line)


class _Sink(JobModel):
    def __init__(self) -> None:
        super().__init__()
        self.got: list[tuple[str, dict]] = []

    def add(self, ev):  # type: ignore[no-untyped-def]
        self.got.append((type(ev).__name__, ev.to_dict()))
        super().add(ev)


def _parse(text: str, enabled: bool, monkeypatch: pytest.MonkeyPatch,
           cache: ShapeCache | None = None) -> tuple[list, tuple, tuple]:
    """The events, parse counts and ranks of ``text``, learned plans on or off.  Prefixed NCCL INFO
    lines by their plain line's plan off (``tests/test_prefixed.py`` compares those): through a
    shared ``cache`` a prefixed line's plain part teaches the plan of a plain line of another text,
    which then skips the full path's counts there."""
    monkeypatch.setattr(learned, "ENABLED", enabled)
    monkeypatch.setattr(prefixed, "ENABLED", False)
    monkeypatch.setattr(lines_mod, "LIGHT_STEPS", False)  # every sampled step line as its event
    sink = _Sink()
    fp = FileParser("t.log", cache or ShapeCache(store=False), keep_text=False, use_catalog=False, sink=sink)
    fp.parse_block(1, text)
    for ev in fp.finish():
        sink.add(ev)
    s = fp.stats
    return sink.got, (s.records, s.nccl_records, s.nccl_unknown, s.failed, sorted(s.by_kind.items())), \
        tuple(sorted(fp.ranks_seen()))


def _planning(monkeypatch: pytest.MonkeyPatch, sink: JobModel | None = None) -> tuple[ShapeCache, FileParser]:
    """A fresh shape cache and an analyze-mode parser into ``sink`` (a ``JobModel`` by default), plans on."""
    monkeypatch.setattr(learned, "ENABLED", True)
    monkeypatch.setattr(lines_mod, "LIGHT_STEPS", False)  # every sampled step line as its event
    cache = ShapeCache(store=False)
    return cache, FileParser("t.log", cache, keep_text=False, use_catalog=False,
                             sink=JobModel() if sink is None else sink)


def _lines_through(monkeypatch: pytest.MonkeyPatch, fp: FileParser, method: str) -> list[str]:
    """The texts of the lines that go through ``fp``'s full path ``method`` (``_line``, ``_step_full``) from now."""
    seen: list[str] = []
    real = getattr(fp, method)
    monkeypatch.setattr(fp, method, lambda n, t: seen.append(t) or real(n, t))
    return seen


def test_plans_make_the_full_parsers_events(monkeypatch):
    lines = _lines()
    assert len(lines) > 400
    rng = random.Random(20261201)
    cache = ShapeCache(store=False)  # one cache for all, as for the files of one run
    differ = []
    for line in lines:  # a parser per shape: a state one opens (a traceback) does not hide the next
        text = "\n".join(line if i < learned.LEARN_AT else _random_digits(line, rng) for i in range(COPIES))
        if _parse(text, True, monkeypatch, cache) != _parse(text, False, monkeypatch):
            differ.append(line)
    assert differ == []
    planned = sum(1 for p in cache.learned.values() if p is not learned.SLOW)
    assert planned > 200  # the comparison covers many planned shapes, not only slow ones


WATCHDOG = ("[rank{r}]:[E1129 11:41:55.{t:09d} ProcessGroupNCCL.cpp:632] [PG ID 1 PG GUID 3 Rank {p}] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum={s}, OpType=ALLREDUCE, NumelIn=26214400, "
            "NumelOut=26214400, Timeout(ms)=600000) ran for {ran} milliseconds before timing out.")


def test_a_field_is_read_where_it_stands_not_where_its_value_first_occurs(monkeypatch):
    # while learning, the launcher rank and the group rank are equal; later lines have them apart
    same = [WATCHDOG.format(r=1000 + i, t=i, p=1000 + i, s=1245, ran=600047) for i in range(learned.LEARN_AT)]
    apart = [WATCHDOG.format(r=2000 + i, t=i, p=3000 + i, s=1300 + i, ran=600100 + i) for i in range(5)]
    on, off = _parse("\n".join(same + apart), True, monkeypatch), _parse("\n".join(same + apart), False, monkeypatch)
    assert on == off
    last = on[0][-1][1]
    assert (last["rank"], last["pg_rank"], last["seq"], last["ran_ms"]) == (2004, 3004, 1304, 600104)


def test_shape_is_learned_once_and_then_planned(monkeypatch):
    lines = [WATCHDOG.format(r=1000 + i, t=i, p=1000 + i, s=1245, ran=600047) for i in range(learned.LEARN_AT + 3)]
    cache, fp = _planning(monkeypatch)
    made = _lines_through(monkeypatch, fp, "_line")
    fp.parse_block(1, "\n".join(lines))
    assert made == lines[:learned.LEARN_AT]  # the learning line and those before it took the full path
    plan = cache.learned[fixed_key(lines[0])]
    assert plan.cls.__name__ == "WatchdogTimeout"
    assert {c[0] for c in plan.cuts} >= {"rank", "pg_rank", "ts", "ran_ms"}


def test_a_shape_whose_digits_change_its_kind_stays_on_the_full_path(monkeypatch):
    # "NCCL error 2" and "NCCL error 3" (and other codes) are different events: no plan may freeze one
    lines = [f"[rank{i}]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
             f"(run with NCCL_DEBUG=INFO for details), NCCL version 2.{i % 10}.3" for i in range(20, 40)]
    on, off = _parse("\n".join(lines), True, monkeypatch), _parse("\n".join(lines), False, monkeypatch)
    assert on == off


def test_long_lines_are_not_counted_or_planned(monkeypatch):
    # a shape is a key of the learning tables: lines past MAX_CHARS are left to the full path
    long = "[rank1]:[E1129 11:41:55.1] ProcessGroupNCCL.cpp:632] Watchdog caught " + "x" * learned.MAX_CHARS
    cache, fp = _planning(monkeypatch)
    fp.parse_block(1, "\n".join([long] * (learned.LEARN_AT + 2)))
    assert not cache.learned and not cache.learn_seen
    assert learned.plannable(long[:learned.MAX_CHARS])


def test_the_plan_must_hold_for_the_shapes_first_line(monkeypatch):
    # learning at a line whose digits the parser reads otherwise ("4x..." is no pointer) must not
    # make later lines like the first ("0x...": an opId) be read as that one was
    real = "ng30903:3063025:3066048 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x55a51966cc80"
    odd = real.replace("opId=0x", "opId=4x")
    lines = [real] + [odd] * (learned.LEARN_AT - 1) + [real.replace("1143", f"11{i:02d}") for i in range(6)]
    on, off = _parse("\n".join(lines), True, monkeypatch), _parse("\n".join(lines), False, monkeypatch)
    assert on == off
    assert [d["kind"] for _, d in on[0][-6:]] == ["proxy_error"] * 6  # the opId lines, read as NCCL's proxy error


# ---------------------------------------------------------------- makers of templated INFO lines

def _info_lines() -> list[str]:
    return _shapes(lambda line: " NCCL INFO " in line and learned.plannable(line), info_key)


_HEX = re.compile(r"(?<![0-9])0x[0-9a-fA-F]+")


def _random_values(line: str, rng: random.Random) -> str:
    """Random digits, and random hex digits (either case) in every hex run: the line's info_key stays."""
    line = _HEX.sub(lambda m: "0x" + "".join(rng.choice("0123456789abcdefABCDEF") for _ in m.group()[2:]), line)
    return _random_digits(line, rng)


def test_makers_make_the_templates_events(monkeypatch):
    """An EVENT shape's maker (fastpath.MADE) makes the events the template makes: every plain
    NCCL INFO line shape of the fixtures and the corpus, learned, then 16 copies with random
    digits and hex digits (pointers, commIds: grammar.info_key masks them), compared with the
    makers off (learned.ENABLED False: the template every time)."""
    from ncclsleuth.parse import fastpath

    lines = _info_lines()
    assert len(lines) > 300
    rng = random.Random(20261202)
    cache = ShapeCache(store=False)
    differ = []
    for line in lines:
        # the shape's template is compiled after a few lines, its plan made at the next, its maker
        # learned maker_at lines later; then 16 lines with random values
        same = learned.maker_at(line) + learned.LEARN_AT
        text = "\n".join(line if i < same else _random_values(line, rng) for i in range(same + 16))
        if _parse(text, True, monkeypatch, cache) != _parse(text, False, monkeypatch):
            differ.append(line)
    assert differ == []
    made = [p for table in cache.plan_tables.values() for p in table.values() if p[0] == fastpath.MADE]
    assert len(made) > 40  # the comparison covers many shapes with a maker
    kinds = {p[2].cls.__name__ for p in made}
    assert {"EnvSetting", "NcclVersion", "Connected", "CommInit"} <= kinds, kinds


def test_a_maker_is_learned_once_and_then_used(monkeypatch):
    from ncclsleuth.parse import fastpath

    lines = [f"node{i % 7}:{100 + i}:{200 + i} [{i % 8}] NCCL INFO NCCL_IB_TIMEOUT set by environment to {20 + i % 3}."
             for i in range(40)]
    sink = JobModel()
    cache, fp = _planning(monkeypatch, sink)
    probes: list[str] = []
    real = fp._event_of
    monkeypatch.setattr(fp, "_event_of", lambda n, t, r, raw: probes.append(t) or real(n, t, r, raw))
    fp.parse_block(1, "\n".join(lines))
    (plan,) = [p for table in cache.plan_tables.values() for p in table.values()]
    assert plan[0] == fastpath.MADE and plan[2].cls.__name__ == "EnvSetting"
    assert {c[0] for c in plan[2].cuts} >= {"host", "pid", "tid", "dev", "value"}
    n = len(probes)
    fp.parse_block(41, "\n".join(lines))
    assert len(probes) == n  # the maker made the second block's events: no template, no probe
    evs = sink.events["env_setting"]
    assert [e.value for e in evs[-3:]] == ["21", "22", "20"] and evs[-1].line == 80


def test_a_makers_inner_tuples_are_shared_as_the_builders(monkeypatch):
    """Init timings phases: each (phase, seconds) pair one object across events, with the maker as
    with the builder (an 8,000-rank file kept 11 MiB of pairs when the maker made new ones)."""
    from ncclsleuth.parse import fastpath

    line = ("node{h}:{p}:{t} [{d}] NCCL INFO Init timings - ncclCommInitRank: rank {r} nranks 64 total 2.16 "
            "(kernels 0.23, alloc 0.02, bootstrap 1.{b}, allgathers 0.11, topo 0.30, graphs 0.01, connections 0.09, rest 0.00)")
    lines = [line.format(h=10 + i % 9, p=1000 + i, t=2000 + i, d=i % 8, r=10 + i % 50, b=10 + i % 89) for i in range(200)]
    for on in (True, False):
        monkeypatch.setattr(learned, "ENABLED", on)
        cache = ShapeCache(store=False)
        sink = JobModel()
        fp = FileParser("t.log", cache, keep_text=False, use_catalog=False, sink=sink)
        fp.parse_block(1, "\n".join(lines))
        plans = [p for table in cache.plan_tables.values() for p in table.values()]
        assert any(p[0] == fastpath.MADE for p in plans) == on
        timed = [st.timings for c in sink.comms.values() for st in c.ranks.values() if st.timings]
        assert len(timed) > 40
        first, last = timed[0], timed[-1]
        assert first.phases != last.phases  # the events differ in one pair, and share the others
        assert [a is b for a, b in zip(first.phases, last.phases)] == [True, True, False] + [True] * 5


def test_makers_are_bounded(monkeypatch):
    """At most learned.MAX_LEARNINGS learnings per shape cache: past it a shape keeps its template
    (the same events), so a hostile log of ever new shapes costs no more than that many learnings
    (each ~36 probe parses) and compiled functions."""
    from ncclsleuth.parse import fastpath

    monkeypatch.setattr(learned, "MAX_LEARNINGS", 2)
    cache, fp = _planning(monkeypatch)
    names = ["NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_NTHREADS"]
    text = "\n".join(f"node{i % 7}:{100 + i}:{200 + i} [{i % 8}] NCCL INFO {name} set by environment to {20 + i % 3}."
                     for name in names for i in range(40))
    fp.parse_block(1, text)
    plans = [p for table in cache.plan_tables.values() for p in table.values()]
    assert [p[0] for p in plans].count(fastpath.MADE) == 2 == cache.learnings
    assert [p[0] for p in plans].count(fastpath.EVENT) == 2
    # a learned plan of another line is a compiled plan too: none past the bound
    lines = [WATCHDOG.format(r=1000 + i, t=i, p=1000 + i, s=1245, ran=600047) for i in range(learned.LEARN_AT + 3)]
    fp.parse_block(200, "\n".join(lines))
    assert list(cache.learned.values()) == [learned.SLOW] and cache.learnings == 2


#: step-timing lines as trainers print them (the prefilter skips them: the step scan reads them)
STEP_LINES = (
    "iter 83592: loss 1.5455, time: 4401.19ms, speed: - toks/s/device",
    "iter 83395: loss 1.5649, time: 4316.64ms",
    "[rank12]: iter 120: loss 2.0311, time: 812.50ms",
    "2025-11-29 11:32:08,799 - INFO - iter 7: loss 3.25, time: 1033.1ms",
    " [2025-11-29 11:32:08] iteration      100/  500000 | consumed samples:        51200 | elapsed time per "
    "iteration (ms): 1234.5 | learning rate: 1.500E-04 | global batch size:   512 |",
)


def _step_shapes() -> list[str]:
    from ncclsleuth.parse.lines import STEP_SCANS

    return [*STEP_LINES, *_shapes(lambda line: any(r.search(line) for r in STEP_SCANS) and learned.plannable(line)
                                  and PREFILTER.search(line) is None, fixed_key)]


def test_step_lines_by_plan_make_the_full_paths_events(monkeypatch):
    rng = random.Random(20261205)
    cache = ShapeCache(store=False)
    differ = []
    for line in _step_shapes():
        text = "\n".join(line if i < learned.LEARN_AT else _random_digits(line, rng) for i in range(COPIES))
        on, off = _parse(text, True, monkeypatch, cache), _parse(text, False, monkeypatch)
        assert any(kind == "StepTime" for kind, _ in off[0]), line
        if on != off:
            differ.append(line)
    assert differ == []
    assert sum(1 for p in cache.step_plans.values() if p is not learned.SLOW) >= len(STEP_LINES)


def _step_model(text: str, light: bool, monkeypatch: pytest.MonkeyPatch, cache: ShapeCache) -> tuple[tuple, int]:
    """What the model keeps of ``text``'s step lines (its times, the quoted line of each rank, its
    counts and the ranks the parser saw), a rank's sampled lines after its first given without
    their events or not; and how many were given so."""
    monkeypatch.setattr(learned, "ENABLED", True)
    monkeypatch.setattr(prefixed, "ENABLED", False)
    monkeypatch.setattr(lines_mod, "LIGHT_STEPS", light)
    model, samples = JobModel(), []
    real = model.step_sample
    model.step_sample = lambda key, ms: samples.append(key) or real(key, ms)  # type: ignore[method-assign]
    fp = FileParser("t.log", cache, keep_text=False, use_catalog=False, sink=model)
    fp.parse_block(1, text)
    for ev in fp.finish():
        model.add(ev)
    kept = ({k: list(v) for k, v in model.step_times.items()},
            {k: ev.to_dict() for k, ev in model.step_evidence.items()},  # type: ignore[union-attr]  # events here
            sorted(model.kind_counts.items()), sorted(model.untracked.items()), tuple(sorted(fp.ranks_seen())))
    return kept, len(samples)


def test_step_samples_given_without_their_events_leave_the_model_as_their_events(monkeypatch):
    """``LIGHT_STEPS``: a rank's sampled step lines after its first go to ``JobModel.step_sample`` as
    (rank, ms), read by their plan's ``learned.step_reader``; the model then holds what their events
    gave it: every shape of the fixtures and the corpus, its lines with random digits, as one rank's
    lines and as two ranks' interleaved (``[rankN]:`` prefixes), past the sample limit."""
    rng = random.Random(20261208)
    light_used = 0
    for line in _step_shapes():
        body = [line if i < learned.LEARN_AT else _random_digits(line, rng) for i in range(2 * COPIES)]
        for text in ("\n".join(body), "\n".join(f"[rank{i % 2}]: {x}" for i, x in enumerate(body))):
            on, used = _step_model(text, True, monkeypatch, ShapeCache(store=False))
            off, none = _step_model(text, False, monkeypatch, ShapeCache(store=False))
            assert on == off and none == 0, line
            light_used += used
    assert light_used >= len(STEP_LINES) * 10


def test_a_step_shape_is_learned_once_and_then_planned(monkeypatch):
    lines = [f"[rank3]: iter {100 + i}: loss 1.{1000 + i}, time: {4000 + i}.50ms" for i in range(learned.LEARN_AT + 5)]
    sink = _Sink()
    cache, fp = _planning(monkeypatch, sink)
    full = _lines_through(monkeypatch, fp, "_step_full")
    fp.parse_block(1, "\n".join(lines))
    assert full == lines[:learned.LEARN_AT]  # the learning line and those before it took the full path
    plan = cache.step_plans[fixed_key(lines[0])]
    assert plan.cls.__name__ == "StepTime" and {c[0] for c in plan.cuts} >= {"rank", "ms"}
    assert [(d["line"], d["rank"], d["ms"]) for _, d in sink.got][-1] == (len(lines), 3, 4012.5)


def test_a_makers_integers_are_shared_as_the_builders(monkeypatch):
    """A learned plan's cut integer fields are shared as ``__init__`` shares them (events.base.share_int):
    the sequence number every rank's watchdog line repeats is one object, on the full path and the plan's."""
    lines = [WATCHDOG.format(r=1000 + i, t=i, p=1000 + i, s=123456, ran=600047 + i) for i in range(learned.LEARN_AT + 4)]
    got: list = []
    sink = JobModel()
    sink.add = got.append  # type: ignore[method-assign]
    cache, fp = _planning(monkeypatch, sink)
    fp.parse_block(1, "\n".join(lines))
    assert cache.learned[fixed_key(lines[0])] is not learned.SLOW
    assert len(got) == len(lines) and len({id(ev.seq) for ev in got}) == 1 and got[-1].seq == 123456
