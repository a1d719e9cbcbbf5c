"""Repeated value records shared: what a job prints the same way on every rank is one object in
the model (issue 16: memory per rank a small constant)."""
from __future__ import annotations

import pytest

from ncclsleuth import api


@pytest.mark.parametrize("layout", ["per-rank-files", "one-file"])
def test_ring_orders_are_one_tuple_per_distinct_order(tmp_path, layout, monkeypatch):
    """A job's communicators of one shape print the same rings on every channel: one tuple each
    order, within a file and across the files merged (per-rank files: each communicator's rank 0
    prints its rings in its own file); past MAX_ORDERS each ring keeps its own, the same values."""
    from _jobs import generator

    from ncclsleuth.model import job as J

    gen = generator()
    out = tmp_path / "job"
    gen.generate(gen.build_parser().parse_args(["--ranks", "32", "--per-host", "8", "--comms", "3", "--channels", "4",
                                                "--layout", layout, "--nccl-version", "2.23", "--inject", "none",
                                                "--seed", "2", "--out", str(out)]))

    def rings() -> tuple[int, int, list[tuple[int, ...]]]:
        model = api.build([str(out)], api.Options(jobs=1)).model
        orders = [o for c in sorted(model.comms.values(), key=lambda c: c.key) for _, o in sorted(c.rings.items())]
        return len({id(o) for o in orders}), len(set(orders)), orders

    objects, distinct, orders = rings()
    assert len(orders) >= 4 * 5 and distinct < len(orders) and objects == distinct
    monkeypatch.setattr(J, "MAX_ORDERS", 0)
    objects_unshared, _, same = rings()
    assert same == orders and objects_unshared > distinct


def test_a_process_keeps_its_communicator_ranks_in_order_once_and_no_set(tmp_path):
    """Init START and COMPLETE of two communicators: two pairs, in the order of the first Init
    lines; a process of PyTorch's lines alone (no NCCL init) holds the empty tuple, not an
    empty set of its own (216 bytes: one such process a rank in a folder of per-rank files)."""
    lines = []
    for comm, what, rank, n in (("0xaaaa000000000001", "ncclCommInitRank", 9, 16), ("0xbbbb000000000002", "ncclCommSplit", 1, 8)):
        for phase in ("START", "COMPLETE"):
            lines.append(f"nodeb:701:901 [1] NCCL INFO {what} comm 0x5501 rank {rank} nranks {n} cudaDev 1 nvmlDev 1 "
                         f"busId 2a000 commId {comm} - Init {phase}")
    lines.append("[rank9]:[I1129 11:31:50.630429017 ProcessGroupNCCL.cpp:968] [PG ID 0 PG GUID 0(default_pg) Rank 9] "
                 "ProcessGroupNCCL initialization options: size: 16, global rank: 9, TIMEOUT(ms): 600000")
    log = tmp_path / "rank9.log"
    log.write_text("\n".join(lines) + "\n")
    model = api.build([str(log)], api.Options(jobs=1)).model
    nccl = model.processes[("nodeb", 701)]
    assert nccl.comm_ranks == (("0xaaaa000000000001", 9), ("0xbbbb000000000002", 1))
    others = [p for k, p in model.processes.items() if k != ("nodeb", 701)]
    assert others and all(type(p.comm_ranks) is tuple and not p.comm_ranks for p in others)
