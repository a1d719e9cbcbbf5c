"""The analyze fast path (ncclsleuth.parse.fastpath, and the model not keeping the kinds
nothing reads, UNREAD_KINDS) changes nothing but speed and memory: the same report, byte for
byte, with both on and both off, on the fixtures, the shared corpus and generated jobs in both
layouts (one file with every rank, a folder of per-rank files), one process and two."""
from __future__ import annotations

from pathlib import Path

import pytest
from _jobs import layout_job as _job
from _jobs import log_inputs as _inputs

from ncclsleuth import api
from ncclsleuth import events as E
from ncclsleuth.ingest.sources import discover
from ncclsleuth.model.build import parse_one
from ncclsleuth.model.job import KEPT_IF, UNREAD_KINDS
from ncclsleuth.parse import fastpath
from ncclsleuth.parse import lines as L
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.renderers import render

ROOT = Path(__file__).resolve().parent.parent


def _report(paths: list[str], monkeypatch: pytest.MonkeyPatch, enabled: bool, jobs: int = 1) -> str:
    monkeypatch.setattr(fastpath, "ENABLED", enabled)
    monkeypatch.setattr(L.fastpath, "ENABLED", enabled)
    monkeypatch.setattr(api, "UNREAD_KINDS", UNREAD_KINDS if enabled else frozenset())
    report = api.analyze(paths, api.Options(jobs=jobs, cache=True, shared_cache=False))  # plans need the shape cache on
    return render("json", report)


def test_fixtures_and_corpus_same_with_and_without_plans(monkeypatch):
    paths = _inputs()
    assert len(paths) > 20
    differ = [p for p in paths
              if _report([str(p)], monkeypatch, True) != _report([str(p)], monkeypatch, False)]
    assert differ == []


@pytest.mark.parametrize("layout,jobs", [("one-file", 1), ("per-rank-files", 1), ("per-rank-files", 2)])
def test_generated_job_same_with_and_without_plans(tmp_path, monkeypatch, layout, jobs):
    from ncclsleuth.parallel import local

    monkeypatch.setattr(local, "PARALLEL_MIN_BYTES", 0)  # two processes for a small job too
    job = _job(tmp_path, layout)
    fast = _report([str(job)], monkeypatch, True, jobs)
    assert "desync" in fast.lower()  # the injected failure is found at all
    assert fast == _report([str(job)], monkeypatch, False, 1)


#: a ``where`` on ``level`` that only problem lines pass (``Event.is_problem``): such a leaf reads
#: nothing a dropped kind loses, its problem lines being kept
_PROBLEM_LEVELS = {"WARN", "E", "F", "ERROR", "CRITICAL", "FATAL"}


def _reads_problems_only(where: object) -> bool:
    if not isinstance(where, dict):
        return False
    level = where.get("level")
    levels = {level} if isinstance(level, str) else set(level.get("in", ())) if isinstance(level, dict) else set()
    return bool(levels) and levels <= _PROBLEM_LEVELS


def _kept_by_text(kind: str, where: object) -> bool:
    """A leaf that reads ``kind`` only in lines whose text KEPT_IF keeps: its ``where`` tests
    ``message_text`` with a regex whose every alternative is one of KEPT_IF's."""
    if kind not in KEPT_IF or not isinstance(where, dict):
        return False
    test = where.get("message_text")
    if not isinstance(test, dict) or not isinstance(test.get("regex"), str):
        return False
    kept = set(KEPT_IF[kind].pattern.split("|"))
    return set(test["regex"].split("|")) <= kept


def _kinds_read_by(cond: object, out: set[str]) -> set[str]:
    """Event kinds named by ``event:`` leaves of a rule's condition tree, but for those a leaf
    reads only in lines the model keeps though the kind is unread (its problem lines, and the
    lines KEPT_IF keeps)."""
    if isinstance(cond, dict):
        kinds = cond.get("event")
        named = [kinds] if isinstance(kinds, str) else list(kinds) if isinstance(kinds, list) else []
        where = cond.get("where")
        out.update(k for k in named if not (_reads_problems_only(where) or _kept_by_text(k, where)))
        for v in cond.values():
            _kinds_read_by(v, out)
    elif isinstance(cond, list):
        for v in cond:
            _kinds_read_by(v, out)
    return out


def test_unread_kinds_are_read_by_no_rule_and_no_reader_of_the_events():
    from ncclsleuth.rules.loader import default_rule_dir, load_rules

    rules, errors = load_rules([default_rule_dir()])
    assert rules and not errors
    read: set[str] = set()
    for r in rules:
        _kinds_read_by(r.match, read)
    assert {"bootstrap_error", "socket_error"} <= read  # the walk finds kinds at all
    assert not read & UNREAD_KINDS
    # and it does not let a leaf through for being there: NVLS001 and ULIM001 read nvls and
    # nccl_other, in problem lines and in the lines KEPT_IF keeps
    leaves: set[str] = set()
    for r in rules:
        if r.id in ("NVLS001", "ULIM001", "DESYNC004"):
            _kinds_read_by({"any": [{"event": "nvls"}, {"event": "nccl_other"}]}, leaves)
            _kinds_read_by(r.match, read)
    assert leaves == {"nvls", "nccl_other"} and not read & {"nvls", "nccl_other"}
    # every other reader of JobModel.events names its kind in a literal: none is unread
    import re

    pkg = ROOT / "ncclsleuth"
    named = {m for p in pkg.rglob("*.py") for m in re.findall(r"events\.get\(\"(\w+)\"", p.read_text())}
    named |= {m for p in pkg.rglob("*.py") for m in re.findall(r"\.of\(([^)]*)\)", p.read_text())}
    assert {"watchdog_timeout", "env_setting"} <= named  # the search finds readers at all
    assert not {k for k in UNREAD_KINDS if any(k in n for n in named)}


def test_plans_are_made_and_used_on_a_dense_log(tmp_path, monkeypatch):
    """The comparison above means something only if the plans ran: connection lines of a
    generated job get the CONN plan, and the model counts every one of them."""
    job = _job(tmp_path, "one-file", ranks=16, comms=1, channels=4, noise=0)
    monkeypatch.setattr(L.fastpath, "ENABLED", True)
    shapes = ShapeCache(store=False)
    (inp,) = discover([str(job)]).files
    model, _, _ = parse_one(inp, True, shapes)
    plans = [p for table in shapes.plan_tables.values() for p in table.values()]
    assert any(p[0] == fastpath.CONN for p in plans)
    text = Path(inp.path).read_text()
    conn_lines = sum(1 for ln in text.splitlines() if " NCCL INFO Channel " in ln and " via " in ln)
    assert model.kind_counts["channel_conn"] == conn_lines > 0


def test_unknown_messages_get_the_other_plan_and_the_same_events(tmp_path, monkeypatch):
    """Messages the grammar does not know (``threadThresholds``, ``cudaDriverVersion``) are cut
    from the line by the OTHER plan: each line still makes its ``nccl_other`` event, the same
    one the envelope path makes, and the tree edges the model keeps are the same though the
    parser makes only those."""
    job = _job(tmp_path, "one-file", ranks=16, comms=1, channels=4, noise=0)
    (inp,) = discover([str(job)]).files
    models = {}
    for on in (True, False):
        monkeypatch.setattr(L.fastpath, "ENABLED", on)
        shapes = ShapeCache(store=False)
        models[on] = parse_one(inp, True, shapes)[0]  # a model that keeps nccl_other (user rules)
        plans = [p for table in shapes.plan_tables.values() for p in table.values()]
        assert any(p[0] == fastpath.OTHER for p in plans) == on
    text = Path(inp.path).read_text()
    unknown = sum(1 for ln in text.splitlines() if " NCCL INFO threadThresholds " in ln)
    assert unknown > 0
    fast, slow = ([ev.to_dict() for ev in m.events["nccl_other"]] for m in (models[True], models[False]))
    assert fast == slow
    assert sum(1 for d in fast if d["message"].startswith("threadThresholds ")) == unknown
    trees = {on: {k: {ch: list(pairs) for ch, pairs in c.trees.items()} for k, c in m.comms.items()}
             for on, m in models.items()}
    assert trees[True] == trees[False] and any(trees[True].values())


def test_unread_unknown_messages_are_counted_not_made_but_kept_lines_are(tmp_path, monkeypatch):
    """With the shipped rules (``UNREAD_KINDS``) the OTHER shapes whose lines no rule reads get the
    TOUCH plan: no event made, the same counts and last lines as the full parser's dropped events;
    a line KEPT_IF keeps (``Too many open files``, read by ULIM001) is kept either way."""
    job = _job(tmp_path, "one-file", ranks=16, comms=1, channels=4, noise=0)
    (log,) = job.iterdir()
    kept = "nodeX:7:7 [0] NCCL INFO Could not open more sockets: Too many open files"
    log.write_text(log.read_text() + kept + "\n" + kept + "\n")
    (inp,) = discover([str(job)]).files
    models = {}
    for on in (True, False):
        monkeypatch.setattr(L.fastpath, "ENABLED", on)
        shapes = ShapeCache(store=False)
        models[on] = parse_one(inp, True, shapes, UNREAD_KINDS)[0]
        touched = [p for table in shapes.plan_tables.values() for p in table.values()
                   if p[0] == fastpath.TOUCH and p[2] == "nccl_other"]
        assert bool(touched) == on
    fast, slow = models[True], models[False]
    unknown = sum(1 for ln in log.read_text().splitlines() if " NCCL INFO " in ln and (
        "threadThresholds " in ln or "cudaDriverVersion " in ln or "Too many open files" in ln))
    assert fast.kind_counts["nccl_other"] == slow.kind_counts["nccl_other"] >= unknown > 2
    assert [ev.text for ev in fast.events["nccl_other"]] == [ev.text for ev in slow.events["nccl_other"]] \
        == [kept, kept]
    last = {on: {k: (p.last_line, p.last_kind) for k, p in m.processes.items()} for on, m in models.items()}
    assert last[True] == last[False]


def test_digit_anchor_words_cover_every_anchor_that_reads_a_digit():
    """An OTHER plan is made for a shape only when no anchor can start in its lines; an anchor
    with a literal digit could start in a line of the same shape with other digits, so each
    such anchor holds one of the words that keep a shape off the plan."""
    import re

    from ncclsleuth.parse import anchors as A

    patterns = A.ANCHOR_PATTERNS + A.STEP_PATTERNS + tuple(rx.pattern for _, rx in A.GUARDED_ANCHORS)
    digit_anchors = [p for p in patterns if re.search(r"[0-9]", re.sub(r"\\[dx]|\{[\d,]+\}", "", p))]
    assert digit_anchors  # the walk finds some
    assert [p for p in digit_anchors if not any(w.strip() in p for w in A.DIGIT_ANCHOR_WORDS)] == []


def test_anchor_starts_remembered_by_shape_are_the_ones_found():
    """anchor_starts remembers positions by the text's position-exact shape: the same as a
    fresh scan for texts of one shape with other digits, and a digit-reading anchor (``got 0``)
    is not taken from a remembered shape."""
    from ncclsleuth.parse import anchors as A

    texts = ["[Rank 12] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)",
             "[Rank 98] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)",
             "peer 3 closed: Failed to recv, got 5 bytes", "peer 3 closed: Failed to recv, got 0 bytes"]
    assert [A.anchor_starts(t) for t in texts] == [A._anchor_starts(t) for t in texts]
    assert A.anchor_starts(texts[0]) and A.anchor_starts(texts[3]) != A.anchor_starts(texts[2])


def test_other_plan_refuses_a_body_an_anchor_could_start_in():
    ev = E.NcclOther(source="f", line=1, text="h:1:2 [0] NCCL INFO retries 3, got 5",
                     host="h", pid=1, tid=2, dev=0, level="INFO", message="retries 3, got 5")
    assert fastpath._other_plan(ev.text, [ev]) is None
    ok = E.NcclOther(source="f", line=1, text="h:1:2 [0] NCCL INFO threadThresholds 8/8/64",
                     host="h", pid=1, tid=2, dev=0, level="INFO", message="threadThresholds 8/8/64")
    plan = fastpath._other_plan(ok.text, [ok])
    assert plan is not None and plan[0] == fastpath.OTHER
    assert fastpath._other_event(plan, "f", 1, ok.text).to_dict() == ok.to_dict()


def test_event_plans_make_the_events_the_full_parser_makes(tmp_path, monkeypatch):
    """Lines of a templated shape whose event the model reads (versions, settings, comm init,
    timings) get the EVENT plan: their events straight from the template, the same events as
    the full parser's, in the same order."""
    job = _job(tmp_path, "one-file", ranks=16, comms=2, channels=4, noise=5)
    (inp,) = discover([str(job)]).files
    made: dict[bool, list[list[dict[str, object]]]] = {}
    for on in (True, False):
        monkeypatch.setattr(L.fastpath, "ENABLED", on)
        shapes = ShapeCache(store=False)
        model = parse_one(inp, True, shapes, UNREAD_KINDS)[0]
        plans = [p for table in shapes.plan_tables.values() for p in table.values()]
        assert any(p[0] == fastpath.EVENT for p in plans) == on
        made[on] = [[ev.to_dict() for ev in evs] for _, evs in sorted(model.events.items())]
        if on:
            timed = [st.timings for c in model.comms.values() for st in c.ranks.values() if st.timings]
    assert made[True] == made[False] and any(made[True])
    assert timed  # the Init timings lines reached their rank states


@pytest.mark.parametrize("layout", ["one-file", "per-rank-files"])
@pytest.mark.parametrize("hops", [None, 1])
def test_connection_runs_fold_as_line_by_line(tmp_path, monkeypatch, layout, hops):
    """fastpath.conn_run hands a process's run of connection lines to the model at once
    (JobModel.conn_lines); the model is the one its lines give one by one, also past a bound
    (1 hop: most hops untracked, their lines counted one by one)."""
    from ncclsleuth.model import job as J

    if hops is not None:
        monkeypatch.setattr(J, "MAX_HOPS", hops)
    job = _job(tmp_path, layout, ranks=32, comms=2, channels=6, noise=5)
    calls: list[int] = []
    real = J.JobModel.conn_lines
    monkeypatch.setattr(J.JobModel, "conn_lines", lambda self, *a: calls.append(len(a[3])) or real(self, *a))
    full: list[str] = []
    room = J.JobModel._room
    monkeypatch.setattr(J.JobModel, "_room", lambda self, what, *a: room(self, what, *a) or full.append(what))
    monkeypatch.setattr(fastpath, "RUNS", True)
    runs = _report([str(job)], monkeypatch, True)
    assert calls and max(calls) >= 6  # runs were handed over, of several lines each
    monkeypatch.setattr(fastpath, "RUNS", False)
    assert runs == _report([str(job)], monkeypatch, True)
    assert ("hops" in full) == (hops is not None)  # the bound was met, where it was lowered


def _model_state(text: str, monkeypatch: pytest.MonkeyPatch, runs: bool) -> tuple:
    from ncclsleuth.model.job import JobModel

    monkeypatch.setattr(fastpath, "RUNS", runs)
    model = JobModel(UNREAD_KINDS)
    fp = L.FileParser("t.log", ShapeCache(store=False), keep_text=False, use_catalog=False, sink=model,
                      drop=UNREAD_KINDS)
    for i in range(0, len(text), 5000):  # blocks that cut runs, as a file's blocks may
        start = text.rfind("\n", 0, i) + 1 if i else 0
        end = text.rfind("\n", 0, i + 5000) if i + 5000 < len(text) else len(text)
        if end > start:
            fp.parse_block(text.count("\n", 0, start) + 1, text[start:end])
    model.settle()
    procs = sorted((k, p.first_line, p.last_line, p.last_kind, p.net_conns, p.gdr_conns)
                   for k, p in model.processes.items())
    comms = sorted((k, sorted(c.hop_items()), sorted(c.transports.items())) for k, c in model.comms.items())
    return procs, comms, sorted(model.kind_counts.items())


def test_a_run_of_connection_lines_leaves_the_model_as_its_lines_do(tmp_path, monkeypatch):
    # each process's last lines are a run of connection lines: its last line is the run's last
    job = _job(tmp_path, "per-rank-files", ranks=16, comms=2, channels=8, noise=0)
    texts = []
    for f in sorted(job.iterdir()):
        lines = f.read_text().splitlines()
        last = max(i for i, x in enumerate(lines) if " via " in x)
        texts.append("\n".join(lines[:last + 1]))
    text = "\n".join(texts)
    on, off = _model_state(text, monkeypatch, True), _model_state(text, monkeypatch, False)
    assert on == off
    assert sum(1 for p in on[0] if p[3] == "channel_conn") >= 8  # processes whose last line is a run's


@pytest.mark.parametrize("texts", [1, 2, 5])
def test_connection_texts_forgotten_by_generation_leave_the_model_as_kept_ones(tmp_path, monkeypatch, texts):
    """The connection texts the fast path remembers to count later lines are held a generation of
    ``MAX_CONN_TEXTS`` at a time, the one before folded when a new one would pass it
    (``JobModel._rotate``); a text met again after its fold counts as a first line.  The model is the
    one every text kept to the file's end gives, and the one the lines give one by one; in one
    file whose ranks print their connections interleaved, generations did rotate."""
    from ncclsleuth.model import job as J

    job = _job(tmp_path, "one-file", ranks=24, comms=2, channels=6, noise=0)
    text = (job / "job.log").read_text()
    kept = _model_state(text, monkeypatch, True)
    rotated: list[int] = []
    real = J.JobModel._rotate
    monkeypatch.setattr(J.JobModel, "_rotate", lambda self: rotated.append(len(self._conn_n)) or real(self))
    monkeypatch.setattr(J, "MAX_CONN_TEXTS", texts)
    assert _model_state(text, monkeypatch, True) == kept == _model_state(text, monkeypatch, False)
    assert len(rotated) > 2 + 10 // texts  # while the file was read (settle folds both generations itself)
    assert kept[1] and any(hops for _, hops, _ in kept[1])  # hops were counted to compare


def _trees_model(lines: list[str], monkeypatch: pytest.MonkeyPatch, on: bool) -> tuple[dict, list, list]:
    """The model's tree edges (rank, parent) per channel, the plans learnt, and the edges of the
    ``Trees`` events the model got (channel, children, rank, parent): what it keeps of them and
    what the parser made."""
    from ncclsleuth.model.job import JobModel, tree_pairs

    monkeypatch.setattr(L.fastpath, "ENABLED", on)
    shapes = ShapeCache(store=False)
    model = JobModel(UNREAD_KINDS)
    made: list[tuple[int, tuple[int, ...], int, int]] = []
    add = model.add

    def seen(ev: E.Event) -> None:
        if isinstance(ev, E.Trees):
            made.extend((e.channel, e.down, e.me, e.up) for e in ev.edges)
        add(ev)

    monkeypatch.setattr(model, "add", seen)
    fp = L.FileParser("t.log", shapes, keep_text=False, use_catalog=False, sink=model, drop=UNREAD_KINDS)
    fp.parse_block(1, "\n".join(lines))
    plans = [p[0] for table in shapes.plan_tables.values() for p in table.values()]
    trees = {k: list(tree_pairs(pairs)) for c in model.comms.values() for k, pairs in c.trees.items()}
    return trees, plans, made


def _nccl_trees(rank: int, channels: int, order: list[int] | None = None) -> str:
    """A ``Trees`` line as NCCL prints it (``src/init.cc``, 2.4-2.30): each pair appended with
    ``snprintf(line+strlen(line), 1023-strlen(line), ...)``, so the line stops at 1,022 characters."""
    line = ""
    for c in order if order is not None else range(channels):
        down = f"{rank + 1 + c % 2}/{rank + 3}/-1"
        line = (line + f" [{c}] {down}->{rank}->{rank - 1}")[:1022]
    return f"node{rank}:{100 + rank}:{200 + rank} [0] NCCL INFO Trees{line}"


def test_trees_lines_make_the_edges_their_template_makes(monkeypatch):
    """A ``Trees`` shape gets the TREES plan (its kept channels cut by position): the model's tree
    edges are the full parser's; a line whose channels are not in order goes the template's way,
    and a line NCCL's 1,024-byte buffer cut inside a pair (32 channels, 5-digit ranks) is read
    without the cut pair, the same either way."""
    lines = [_nccl_trees(r, 4) for r in range(10, 40)]
    lines.append(_nccl_trees(50, 3, [1, 0, 2]))
    cut = [_nccl_trees(r, 32) for r in range(12340, 12350)]
    assert all(len(x.split(" NCCL INFO ")[1]) == 5 + 1022 for x in cut)  # cut, inside a pair
    fast, plans, fast_made = _trees_model(lines + cut, monkeypatch, True)
    assert fastpath.TREES in plans
    slow, _, slow_made = _trees_model(lines + cut, monkeypatch, False)
    assert fast == slow and fast_made == [e for e in slow_made if e[0] < 2]  # the full parser makes every channel's
    assert sorted(fast) == [0, 1] and len(fast[0]) == len(lines) + len(cut)  # channels past the kept two: not made
    assert {c for c, _, _, _ in fast_made} == {0, 1}
    assert (1, (52, 53, -1), 50, 49) in fast_made and (0, (51, 53, -1), 50, 49) in fast_made  # by their printed index
    assert (1, (12342, 12343, -1), 12340, 12339) in fast_made
    assert (50, 49) in fast[1] and (50, 49) in fast[0] and (12340, 12339) in fast[1]


def test_a_trees_line_cut_by_nccls_buffer_keeps_its_whole_pairs():
    from ncclsleuth.parse.lines import FileParser

    full = _nccl_trees(12345, 32)
    body = full.split(" NCCL INFO ")[1]
    for end in range(len(body) - 40, len(body) + 1):  # every place the buffer can end in the last pairs
        (ev,) = FileParser("t.log", keep_text=False)._line(1, full[:len(full) - len(body) + end])
        assert isinstance(ev, E.Trees), body[:end][-40:]
        assert [e.channel for e in ev.edges][:28] == list(range(28))
        assert all(e.me == 12345 for e in ev.edges)
