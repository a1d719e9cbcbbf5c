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
    from ncclsleuth.model import merge as M

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
    monkeypatch.setattr(M, "MAX_ORDERS", 0)
    objects_unshared, _, same = rings()
    assert same == orders and objects_unshared > distinct
