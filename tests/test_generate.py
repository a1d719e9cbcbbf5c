"""bench/generate.py: where it places each rank in each communicator is what the groups say."""
from __future__ import annotations

import re

from _jobs import generator


def _job(ranks: int, per_host: int, comms: int):  # type: ignore[no-untyped-def]
    gen = generator()
    args = gen.build_parser().parse_args(["--ranks", str(ranks), "--per-host", str(per_host), "--comms",
                                          str(comms), "--channels", "2", "--out", "unused"])
    return gen, gen.Job(args)


def test_each_ranks_place_in_each_communicator_is_its_groups():
    """The index (built once; a scan of the group per rank made 100,000 ranks quadratic) against
    the groups themselves: the first group holding the rank, its position there, and the group's
    ranks on its host (a last host of 4 ranks, three kinds of communicator)."""
    _, job = _job(20, 8, 3)
    for c in job.comms:
        for rk in job.ranks:
            gi = next(i for i, g in enumerate(c.members) if rk.rank in g)
            assert job.where[(c.index, rk.rank)] == (gi, c.members[gi].index(rk.rank))
        for gi, group in enumerate(c.members):
            nodes = {job.ranks[r].node for r in group}
            assert set(job.on_node[(c.index, gi)]) == nodes
            for node in nodes:
                assert job.on_node[(c.index, gi)][node] == [r for r in group if job.ranks[r].node == node]


def test_init_lines_say_the_groups_hosts_and_local_ranks():
    """``comm .. rank R nRanks N nNodes K localRanks L localRank l``, as NCCL prints it, for every rank
    of the world communicator of 20 ranks on hosts of 8, 8 and 4."""
    gen, job = _job(20, 8, 1)
    line = re.compile(r"rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank (\d+)")
    for rk in job.ranks:
        text = "\n".join(gen.RankLog(job, rk).comm_init(job.comms[0], 0))
        m = line.search(text)
        assert m is not None
        host_ranks = [r.rank for r in job.ranks if r.node == rk.node]
        assert tuple(map(int, m.groups())) == (rk.rank, 20, 3, len(host_ranks), host_ranks.index(rk.rank))
