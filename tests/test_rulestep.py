"""The rule step shared with a forked helper (``--jobs N`` on a big job): the same findings, in the
same order, as in one process, whichever process evaluated which family of rules."""
from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from _jobs import CORPUS, layout_job, log_inputs

from ncclsleuth import api
from ncclsleuth.model.facts import FACTS
from ncclsleuth.parallel import forked, rulestep
from ncclsleuth.parallel.forked import available
from ncclsleuth.renderers import render
from ncclsleuth.rules import ranking
from ncclsleuth.rules.findings import file_ids
from ncclsleuth.rules.lineset import FileIds
from ncclsleuth.rules.schema import build_rule

pytestmark = pytest.mark.skipif(not available(), reason="the helper is a forked process")

RULES = api.load_rules(api.Options())


def _forked(compute: Callable[[], Any]) -> Any:
    """``compute()`` in a forked process, its result pickled back as forked.py's workers send theirs."""

    def send(w: int) -> None:
        with os.fdopen(w, "wb") as f:
            f.write(pickle.dumps(compute()))

    child = forked._fork(send)
    assert child is not None
    pid, r = child
    with os.fdopen(r, "rb") as f:
        data = f.read()
    assert os.waitpid(pid, 0)[1] == 0
    return pickle.loads(data)


def _elsewhere(n: int, work: Callable[[int], Any]) -> Iterator[Any]:
    """Every family evaluated in a forked process of its own: each result crosses as the helper's do."""
    for k in range(n):
        yield _forked(partial(work, k))


def _in_one_helper(n: int, work: Callable[[int], Any]) -> Iterator[Any]:
    """Every family evaluated in turn in one forked process, as ``--jobs 2``'s helper evaluates the
    families it claims: one fork a model (a fork a family, :func:`_elsewhere`, cost ~0.1 s each late
    in the suite, where the test process is big: ~70 s of the corpus cases), the results crossing
    pickled as the helper's do."""
    yield from _forked(lambda: [work(k) for k in range(n)])


def _dicts(findings: list[Any]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]


@pytest.fixture(scope="module")
def desync(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated 48-rank desync job in one file: the whole-job, init and timeout families fire."""
    return layout_job(tmp_path_factory.mktemp("rulestep"), "one-file") / "job.log"


def test_findings_made_elsewhere_are_the_ones_made_here(desync: Path) -> None:
    model = api.build([str(desync)]).model
    here = ranking.run_rules(model, list(RULES))
    model.memo.clear()
    there = ranking.run_rules(model, list(RULES), spread=_elsewhere)
    assert _dicts(there) == _dicts(here)
    fired = {f.rule_id for f in here}
    assert {"ABORT001", "DESYNC002", "INITT001", "TIMEOUT001"} <= fired, fired
    plain = [r for r in sorted(RULES, key=lambda r: r.fallback) if not r.fallback]
    fams = ranking.families(plain)
    family_of = {plain[i].id: k for k, fam in enumerate(fams) for i in fam}
    assert len({family_of[rid] for rid in fired if rid in family_of}) >= 4  # found in four processes
    # the sets of the findings made elsewhere ask this process's file ids: the report's question of
    # every problem line goes the fast way (one table of numbers, ``Explained``)
    assert all(f.explained.ids is file_ids(model) for f in there if f.explained)


@pytest.mark.parametrize("path", [p for p in log_inputs() if CORPUS in p.parents][:24],
                         ids=lambda p: p.parent.name)
def test_corpus_findings_are_the_same_made_elsewhere(path: Path) -> None:
    model = api.build([str(path)]).model
    here = _dicts(ranking.run_rules(model, list(RULES)))
    model.memo.clear()
    assert _dicts(ranking.run_rules(model, list(RULES), spread=_in_one_helper)) == here


def test_a_helper_that_numbered_a_file_otherwise_is_redone_here(desync: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper gave a name its table did not hold an id this process gives another name: its
    findings would name the wrong file, so its family is evaluated again here."""
    model = api.build([str(desync)]).model
    here = _dicts(ranking.run_rules(model, list(RULES)))
    model.memo.clear()
    monkeypatch.setattr(FileIds, "added", lambda self: ["helper-only.log"])
    ids = file_ids(model)
    ids.id("here-only.log")  # this process's first added name: the helper's is another
    redone: list[int] = []
    unpack = ranking._unpack

    def watched(data: bytes, ids: FileIds) -> Any:
        got = unpack(data, ids)
        redone.append(got is None)
        return got

    monkeypatch.setattr(ranking, "_unpack", watched)
    assert _dicts(ranking.run_rules(model, list(RULES), spread=_elsewhere)) == here
    assert redone and all(redone)


def test_file_ids_take_the_names_another_table_added() -> None:
    base = {"a.log": 0, "b.log": 1}
    mine, theirs = FileIds(base, ["a.log", "b.log"]), FileIds(base, ["a.log", "b.log"])
    for name in ("x.log", "y.log"):
        theirs.id(name)
    assert mine.take(theirs.added()) and mine.added() == ["x.log", "y.log"]
    assert mine.take(["x.log"])  # a prefix of what it has: the same ids
    other = FileIds(base, ["a.log", "b.log"])
    other.id("z.log")
    assert not other.take(["x.log"])  # z.log holds x.log's id
    assert not mine.take(["y.log"])  # y.log's id here is not the first added


def test_families_join_rules_by_fact_and_by_the_module_of_the_fact() -> None:
    def rule(rid: str, cond: dict[str, Any]) -> Any:
        return build_rule({"id": rid, "name": rid.lower(), "title": rid, "category": "app_crash",
                           "severity": "error", "confidence": 0.5, "description": "d", "match": cond,
                           "message": "m", "fix": "f", "references": [], "tests": []}, "test")

    ff, qr = FACTS["first_failure"].__module__, FACTS["quiet_rank"].__module__
    assert ff == qr  # both read the whole-job picture (model/facts/wholejob.py)
    rules = [rule("T1", {"fact": "first_failure"}), rule("T2", {"event": "nccl_other"}),
             rule("T3", {"fact": "quiet_rank"}), rule("T4", {"fact": "init_timing"}),
             rule("T5", {"all": [{"fact": "init_timing"}, {"event": "nccl_other"}]})]
    assert ranking.families(rules) == [[0, 2], [1], [3, 4]]


def test_the_helper_starts_for_a_big_model_where_there_is_memory(desync: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = api.build([str(desync)]).model
    n = rulestep.records(model)
    assert n == len(model.processes) + sum(map(len, model.events.values())) > 0
    assert rulestep.spread_for(model, 2) is None  # 48 ranks: below MIN_RECORDS
    monkeypatch.setattr(rulestep, "MIN_RECORDS", n)
    assert rulestep.spread_for(model, 1) is None
    assert rulestep.spread_for(model, 2) is not None
    monkeypatch.setattr(rulestep, "_kib", lambda path, key: 100 if key == "MemAvailable:" else 1000)
    assert rulestep.spread_for(model, 2) is None  # no room for the helper's copy
    monkeypatch.setattr(rulestep, "_kib", lambda path, key: None)
    assert rulestep.spread_for(model, 2) is not None  # cannot tell: as where there is


def test_analyze_with_jobs_gives_the_report_of_one_process(desync: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end through ``api.analyze``, the helper a worker of :func:`~ncclsleuth.parallel.forked.run_in_order`."""
    one = render("json", api.analyze([str(desync)], api.Options(jobs=1)))
    monkeypatch.setattr(rulestep, "MIN_RECORDS", 0)
    spreads: list[Any] = []
    real = rulestep.spread_for
    monkeypatch.setattr(rulestep, "spread_for", lambda model, jobs: spreads.append(real(model, jobs)) or spreads[-1])
    two = render("json", api.analyze([str(desync)], api.Options(jobs=2)))
    assert spreads and spreads[-1] is not None
    assert json.loads(two) == json.loads(one) and two == one


def test_a_helper_that_dies_leaves_its_families_to_this_process(desync: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper killed while it packs its first result (as the OOM killer would): every family
    it had not sent is evaluated here (``forked.run_in_order``), and the findings are the same."""
    model = api.build([str(desync)]).model
    here = _dicts(ranking.run_rules(model, list(RULES)))
    model.memo.clear()
    lead = os.getpid()
    died = tmp_path / "died"
    real = ranking._pack

    def dying(fired: Any, ids: FileIds) -> bytes:
        if os.getpid() != lead:
            died.write_text(str(os.getpid()))
            os._exit(9)
        return real(fired, ids)  # not reached: this process does not pack its own results

    monkeypatch.setattr(ranking, "_pack", dying)
    assert _dicts(ranking.run_rules(model, list(RULES), spread=rulestep._with_one_helper)) == here
    assert died.read_text() != str(lead)  # the helper claimed a family, and died with it
