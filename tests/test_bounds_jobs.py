"""At the bounds of what the model tracks, ``--jobs N`` writes the report ``--jobs 1`` writes.

Past ``MAX_PROCESSES``, ``MAX_RANKS``, ``MAX_HOPS`` or ``MAX_COMMS`` which items are kept
depends on the order they arrive in.  A worker's run of files, merged into one model,
arrives communicator by communicator, not file by file: before ``model.merge.fits`` a
48-rank job with room for 20 rank states kept ranks 0-7 and 0-5 of two communicators with
``--jobs 2`` against 0-6 and 0-6 with ``--jobs 1`` (another first finding), and counted
other numbers of untracked hops and communicators.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ncclsleuth import api
from ncclsleuth.model import job, merge
from ncclsleuth.parallel import local as P
from ncclsleuth.renderers import render

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jobs import layout_job  # noqa: E402


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """48 ranks in 3 communicators: one file a rank, one file a node (8 ranks a file), and
    another job's one file (cut in pieces with ``--jobs N``) beside the per-rank files."""
    root = tmp_path_factory.mktemp("bounds")
    per_rank = layout_job(root, "per-rank-files", ranks=48)
    one = layout_job(root / "other", "one-file", ranks=48)
    mixed = root / "mixed"
    mixed.mkdir()
    (mixed / "a-one.log").write_bytes(next(one.iterdir()).read_bytes())
    for f in per_rank.iterdir():
        (mixed / f"b-{f.name}").write_bytes(f.read_bytes())
    per_node = root / "per-node"
    per_node.mkdir()
    files = sorted(per_rank.iterdir())
    for node in sorted({f.name.split(".")[1] for f in files}):
        with open(per_node / f"{node}.log", "w", encoding="utf-8") as out:
            for f in files:
                if f.name.split(".")[1] == node:
                    out.write(f.read_text(encoding="utf-8"))
    return {"per-rank": per_rank, "per-node": per_node, "mixed": mixed}


def _report(path: Path, jobs: int) -> str:
    # pieces of 4 KB: the one file of "mixed" is parsed in pieces, its per-rank files in runs
    return render("json", api.analyze([str(path)], api.Options(jobs=jobs, piece_bytes=4096)))


@pytest.mark.parametrize("bound,value", [("MAX_PROCESSES", 30), ("MAX_RANKS", 20), ("MAX_RANKS", 100),
                                         ("MAX_HOPS", 10), ("MAX_HOPS", 60), ("MAX_COMMS", 2)])
@pytest.mark.parametrize("layout", ["per-rank", "per-node", "mixed"])
def test_jobs_n_keeps_what_jobs_1_keeps_at_a_bound(jobs, monkeypatch, bound, value, layout):
    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 0)  # workers for a small job (forks inherit the patches)
    for mod in (job, merge):
        monkeypatch.setattr(mod, bound, value)
    one = _report(jobs[layout], 1)
    notices = [n["message"] for n in json.loads(one)["notices"]]
    what = {"MAX_PROCESSES": "processes", "MAX_RANKS": "ranks", "MAX_HOPS": "hops", "MAX_COMMS": "communicators"}
    assert any(m.startswith(f"more than {value:,} {what[bound]}") for m in notices), notices  # the bound met
    assert _report(jobs[layout], 2) == one
    assert _report(jobs[layout], 3) == one


def test_a_run_is_merged_whole_where_no_bound_is_near(jobs, monkeypatch):
    """Away from the bounds every run's model is taken as it came."""
    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 0)
    asked: list[bool] = []

    def fits(into, part):  # type: ignore[no-untyped-def]
        asked.append(merge.fits(into, part))
        return asked[-1]

    monkeypatch.setattr(api, "fits", fits)
    api.build([str(jobs["per-rank"])], api.Options(jobs=2))
    runs = P._runs(sorted(jobs["per-rank"].iterdir()), 2)
    assert len(asked) == sum(len(r) > 1 for r in runs) > 1  # asked of every run of several files ...
    assert all(asked)  # ... and each taken whole, none parsed again here


def _model(procs: int = 0, comms: dict[str, tuple[range, list[tuple[int, int]]]] | None = None,
           steps: int = 0) -> job.JobModel:
    m = job.JobModel()
    for i in range(procs):
        m.processes[(f"h{i}", i)] = job.Process(f"h{i}", i, "f.log")
    for key, (ranks, hops) in (comms or {}).items():
        c = m.comms[key] = job.Comm(key)
        for r in ranks:
            c.ranks[r] = job.RankState(key, r)
        for h in hops:
            key = job.hop_key(*h)
            assert key is not None
            c.hops[key] = job.HOP_LINE | c.hop_kind("P2P", None, False)  # type: ignore[operator]
        m.n_ranks += len(c.ranks)
        m.n_hops += len(c.hops)
    for i in range(steps):
        m.step_times[i] = job.array("d", [1.0])
    return m


def test_fits_counts_only_what_is_new_near_a_bound(monkeypatch):
    for mod in (job, merge):
        monkeypatch.setattr(mod, "MAX_PROCESSES", 3)
        monkeypatch.setattr(mod, "MAX_RANKS", 4)
        monkeypatch.setattr(mod, "MAX_HOPS", 3)
        monkeypatch.setattr(mod, "MAX_COMMS", 2)
    into = _model(procs=2, comms={"a": (range(3), [(0, 1), (1, 2)])}, steps=3)
    assert merge.fits(into, _model(procs=3))  # h0, h1 known: one new process
    assert not merge.fits(into, _model(procs=4))
    assert merge.fits(into, _model(comms={"a": (range(4), [(0, 1), (1, 2), (2, 3)])}))  # rank 3, hop (2, 3) new
    assert not merge.fits(into, _model(comms={"a": (range(5), [])}))  # ranks 3 and 4: 5 > 4
    assert not merge.fits(into, _model(comms={"a": (range(1), [(5, 6), (6, 7)])}))  # 4 hops > 3
    assert merge.fits(into, _model(comms={"b": (range(1), [])}))
    assert not merge.fits(into, _model(comms={"b": (range(1), []), "c": (range(0), [])}))  # 3 communicators
    assert not merge.fits(into, _model(comms={"b": (range(2), [])}))  # a new communicator's 2 ranks: 5 > 4
    assert merge.fits(into, _model(steps=4)) and not merge.fits(into, _model(steps=5))  # step-time keys: ranks
    full = _model()
    full.untracked["ranks"] += 1  # the run met a bound itself: it may lack what the job still has room for
    assert not merge.fits(into, full)
    assert merge.fits(_model(), _model(procs=3, comms={"a": (range(4), [(0, 1)])}))
