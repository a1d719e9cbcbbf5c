"""Which communicator a connection line (``Channel NN/M : a[x] -> b[y] via ...``) is counted in.

Up to NCCL 2.21 a communicator connects during its init; from 2.22 at its first collective
(``NCCL_RUNTIME_CONNECT=1``), after the process may have initialised others. The ranks on the
line are ranks of its communicator, the printing rank first but second on a NET ``[receive]``
line (``transport/p2p.cc``, ``net.cc``, ``shm.cc``). Every path that counts the line (the fast
path's runs and first lines, the parser's ``add_conn``, the event's handler) counts it alike.
"""
from __future__ import annotations

import pytest

from ncclsleuth import api
from ncclsleuth.model.job import UNREAD_KINDS, JobModel
from ncclsleuth.parse import fastpath
from ncclsleuth.parse import lines as L
from ncclsleuth.parse.grammar import ShapeCache

WORLD, SPLIT = "0xaaaa000000000001", "0xbbbb000000000002"


def _init(hp: str, tid: int, dev: int, what: str, rank: int, nranks: int, comm: str, phase: str) -> str:
    return (f"{hp}:{tid} [{dev}] NCCL INFO {what} comm 0x55{dev:02d}{nranks:02d}00 rank {rank} nranks {nranks} "
            f"cudaDev {dev} nvmlDev {dev} busId {dev + 1}a000 commId {comm} - Init {phase}")


def _conn(hp: str, tid: int, dev: int, ch: int, a: int, da: int, b: int, db: int, how: str) -> str:
    return f"{hp}:{tid} [{dev}] NCCL INFO Channel {ch:02d}/0 : {a}[{da}] -> {b}[{db}] {how}"


def _job(lazy: bool) -> str:
    """Host nodeb's 8 processes: world ranks 8-15 of 16, ranks 0-7 of the host's split of 8.
    ``lazy`` (2.22..): both inits first, then the connections; else each communicator's
    connections inside its init."""
    out: list[str] = []
    for i in range(8):
        hp, t = f"nodeb:{700 + i}", 900 + i
        split = [_conn(hp, t, i, ch, i, i, (i + 1) % 8, (i + 1) % 8, "via P2P/IPC/read") for ch in range(4)]
        world = [_conn(hp, t, i, ch, 8 + i, i, 9 + i, i + 1, "via P2P/IPC/read") for ch in range(4) if i < 7]
        if i == 7:  # the ring leaves the host to rank 0 on nodea, and comes in from rank 7 there
            world += [_conn(hp, t, i, ch, 15, 7, 0, 0, "[send] via NET/IB/0/GDRDMA") for ch in range(4)]
        if i == 0:
            world += [_conn(hp, t, i, ch, 7, 7, 8, 0, "[receive] via NET/IB/0/GDRDMA") for ch in range(4)]
        w0, w1 = (_init(hp, t, i, "ncclCommInitRank", 8 + i, 16, WORLD, p) for p in ("START", "COMPLETE"))
        s0, s1 = (_init(hp, t, i, "ncclCommSplit", i, 8, SPLIT, p) for p in ("START", "COMPLETE"))
        out += [w0, w1, s0, s1, *world, *split] if lazy else [w0, *world, w1, s0, *split, s1]
    return "\n".join(out)


WORLD_HOPS = {(8 + i, 9 + i) for i in range(7)} | {(15, 0), (7, 8)}
SPLIT_HOPS = {(i, (i + 1) % 8) for i in range(8)}


def _fast_model(text: str, monkeypatch: pytest.MonkeyPatch, plans: bool, runs: bool) -> JobModel:
    monkeypatch.setattr(fastpath, "ENABLED", plans)
    monkeypatch.setattr(fastpath, "RUNS", runs)
    model = JobModel(UNREAD_KINDS)
    fp = L.FileParser("t.log", ShapeCache(store=False), keep_text=False, use_catalog=False, sink=model,
                      drop=UNREAD_KINDS)
    fp.parse_block(1, text)
    model.settle()
    return model


def _event_model(text: str) -> JobModel:
    """Every line an event, folded by ``JobModel.add`` (the connection's handler)."""
    model = JobModel()
    fp = L.FileParser("t.log", ShapeCache(store=False), keep_text=True, use_catalog=False)
    for ev in fp.parse_lines(enumerate(text.split("\n"), 1)):
        model.add(ev)
    return model


def _hops(model: JobModel) -> dict[str, set[tuple[int, int]]]:
    return {k: {h for h, _ in c.hop_items()} for k, c in model.comms.items() if c.hops}


@pytest.mark.parametrize("lazy", [True, False], ids=["2.22-runtime-connect", "connect-in-init"])
def test_each_connection_is_counted_in_its_own_communicator(lazy, monkeypatch):
    text = _job(lazy)
    want = {WORLD: WORLD_HOPS, SPLIT: SPLIT_HOPS}
    assert _hops(_event_model(text)) == want
    for plans in (True, False):
        for runs in (True, False):
            model = _fast_model(text, monkeypatch, plans, runs)
            assert _hops(model) == want, (plans, runs)
            world = model.comms[WORLD]
            assert world.transports == {"P2P": 28, "NET/IB": 8}  # 4 channels a hop, counted where they belong
            assert model.comms[SPLIT].transports == {"P2P": 32}


def test_a_line_that_fits_two_communicators_stays_with_the_last_initialised(monkeypatch):
    """Rank 0 of the world and of its split: ``0[0] -> 1[1]`` could be either; the last one's, as before."""
    hp = "nodea:500"
    text = "\n".join([_init(hp, 600, 0, "ncclCommInitRank", 0, 16, WORLD, "COMPLETE"),
                      _init(hp, 600, 0, "ncclCommSplit", 0, 8, SPLIT, "COMPLETE"),
                      _conn(hp, 600, 0, 0, 0, 0, 1, 1, "via P2P/IPC/read"),
                      _conn(hp, 600, 0, 0, 0, 0, 9, 1, "[send] via NET/IB/0/GDRDMA")])  # 9: the world's only
    model = _fast_model(text, monkeypatch, True, True)
    assert _hops(model) == {SPLIT: {(0, 1)}, WORLD: {(0, 9)}}
    assert _hops(_event_model(text)) == {SPLIT: {(0, 1)}, WORLD: {(0, 9)}}


def test_the_world_of_a_generated_2_23_job_has_its_hops(tmp_path):
    """The benchmark's 2.23 job (a world, a split per host, connections at the first collective):
    no communicator holds a hop past its size, and the world has its NET hops (before: none; the
    per-host splits of 8 ranks held ``7 -> 8`` over NET/IB)."""
    from _jobs import generator

    gen = generator()
    out = tmp_path / "g16"
    gen.generate(gen.build_parser().parse_args(["--ranks", "16", "--per-host", "8", "--comms", "2", "--channels",
                                                "2", "--layout", "one-file", "--nccl-version", "2.23", "--inject",
                                                "none", "--seed", "1", "--out", str(out)]))
    model = api.build([str(out / "job.log")], api.Options(jobs=1)).model
    for c in model.comms.values():
        assert all(max(h) < c.nranks for h, _ in c.hop_items()), c.key
    world = max(model.comms.values(), key=lambda c: c.nranks or 0)
    assert world.nranks == 16 and world.transports.get("NET/IB", 0) > 0 and (7, 8) in dict(world.hop_items())
    assert all("NET/IB" not in c.transports for c in model.comms.values() if c is not world)

