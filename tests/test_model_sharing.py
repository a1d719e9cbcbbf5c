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
    lines, kept flat (comm, rank, comm, rank: a pair object each was ~56 bytes); a process of PyTorch's lines alone (no NCCL init) holds the empty tuple, not an
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
    torch_only = tmp_path / "rank10.log"  # PyTorch's lines alone: a process of their own
    torch_only.write_text(lines[-1].replace("rank9", "rank10") + "\n")
    model = api.build([str(log), str(torch_only)], api.Options(jobs=1)).model
    nccl = model.processes[("nodeb", 701)]
    assert list(nccl.comm_pairs()) == [("0xaaaa000000000001", 9), ("0xbbbb000000000002", 1)]
    assert nccl.comm_ranks == ("0xaaaa000000000001", 9, "0xbbbb000000000002", 1)  # flat: no pair objects
    others = [p for k, p in model.processes.items() if k != ("nodeb", 701)]
    assert [p.source for p in others] == [str(torch_only)]
    assert all(type(p.comm_ranks) is tuple and not p.comm_ranks for p in others)


_INIT = ("{h}:{p}:{t} [0] NCCL INFO ncclCommInitRank comm 0x55f6e5fc{r:04d} rank {r} nranks 2 cudaDev {r} nvmlDev {r} "
         "busId {r}a000 commId 0xb5ca0139f4c8d965 - Init {phase}\n")


def test_an_init_complete_after_its_start_is_kept_as_its_line_and_time():
    """Before: the COMPLETE line's whole event (~230 bytes with its reference) beside its start's,
    which says the same but for the phase: 300,000 of them at 100,000 ranks of three
    communicators.  A COMPLETE line with no start kept is kept as its event (the evidence of
    the rank's init then); both pickle (a worker's model crosses a pipe)."""
    import pickle

    from ncclsleuth.events import CommInit
    from ncclsleuth.model.job import Done

    text = ("[2025-01-01 10:00:01.5] " + _INIT.format(h="node1", p=10, t=11, r=0, phase="START")
            + "[2025-01-01 10:00:01.6] node1:10:11 [0] NCCL INFO Connected all rings\n"
            + "[2025-01-01 10:00:05.25] " + _INIT.format(h="node1", p=10, t=11, r=0, phase="COMPLETE")
            + _INIT.format(h="node2", p=20, t=21, r=1, phase="COMPLETE"))
    model = api.build(api.memory_sources({"job.log": text})).model
    (comm,) = model.comms.values()
    a, b = comm.ranks[0], comm.ranks[1]
    assert isinstance(a.start, CommInit) and a.start.phase == "START" and a.start.line == 1
    assert type(a.complete) is Done and a.complete.state is a and a.complete.line == 3
    assert (a.start.ts, a.complete.ts) == ("2025-01-01 10:00:01.5", "2025-01-01 10:00:05.25")
    assert (a.complete.source, a.complete.host, a.complete.pid) == ("job.log", "node1", 10)
    assert a.init_event() is a.start
    assert b.began is None and b.start is None and isinstance(b.complete, CommInit) and b.complete.phase == "COMPLETE"
    assert b.init_event() is b.complete
    again = pickle.loads(pickle.dumps(a))
    assert type(again.complete) is Done and again.complete.line == 3 and again.complete.state is again
    assert (again.complete.source, again.complete.host, again.complete.pid) == ("job.log", "node1", 10)


def test_an_init_complete_with_no_time_stamp_is_kept_as_its_line_number():
    """A COMPLETE line of its start's process with no time stamp (NCCL INFO lines print none by
    default) is its line number alone (a Done said nothing more: 56 bytes, three a rank); read, it
    is the same Done: its line, and its file and process through its start.  It pickles, and a
    merged state keeps another state's Done as it was (read through that state's start)."""
    import pickle

    from ncclsleuth.model.job import Done, RankState

    text = (_INIT.format(h="node1", p=10, t=11, r=0, phase="START")
            + "node1:10:11 [0] NCCL INFO Connected all rings\n"
            + _INIT.format(h="node1", p=10, t=11, r=0, phase="COMPLETE"))
    (comm,) = api.build(api.memory_sources({"job.log": text})).model.comms.values()
    a = comm.ranks[0]
    assert a.done == 3
    got = a.complete
    assert type(got) is Done and got.state is a and (got.line, got.ts) == (3, None)
    assert (got.source, got.host, got.pid) == ("job.log", "node1", 10)
    assert a.done_at() == ("job.log", "node1", 10, 3)  # the same, without making a Done
    assert pickle.loads(pickle.dumps(a)).done == 3
    other = RankState("c", 0)
    other.complete = got  # another state's Done: kept as the Done (its file is that state's start's)
    assert other.done is got and other.complete is got


def test_a_communicators_tree_edges_are_kept_as_rank_and_parent_pairs():
    """Before: one TreeEdge a rank and channel, with the children it names (~170 bytes; the
    topology reads the rank and its parent, and a child's own line names its parent): now two
    integers in an array of the channel.  A rank too large for one (a damaged line) is no edge."""
    from array import array

    from ncclsleuth.model.job import tree_pairs
    from ncclsleuth.model.topology import analyze_topology

    text = (_INIT.format(h="node1", p=10, t=11, r=0, phase="START")
            + "node1:10:11 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1 [2] 1/-1/-1->0->-1\n"
            + _INIT.format(h="node2", p=20, t=21, r=1, phase="START")
            + "node2:20:21 [0] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] -1/-1/-1->1->0 [2] -1/-1/-1->1->0\n"
            + _INIT.format(h="node3", p=30, t=31, r=1, phase="START")
            + "node3:30:31 [0] NCCL INFO Trees [0] -1/-1/-1->1->99999999999999999999999\n")
    model = api.build(api.memory_sources({"job.log": text})).model
    (comm,) = model.comms.values()
    assert sorted(comm.trees) == [0, 1]  # the channels kept (TREE_CHANNELS)
    assert all(type(pairs) is array and pairs.typecode == "q" for pairs in comm.trees.values())
    assert list(tree_pairs(comm.trees[0])) == [(0, -1), (1, 0)] == list(tree_pairs(comm.trees[1]))
    (t,) = analyze_topology(model)
    assert sorted((a, b, d["channel"]) for a, b, d in t.graph.edges(data=True) if d["kind"] == "tree") == \
        [(1, 0, 0), (1, 0, 1)]


def test_every_kind_a_process_keeps_as_evidence_is_read_by_a_fact():
    """A process keeps one line of each of these kinds for a finding to quote (its event or its
    place: at 100,000 ranks up to ~200 bytes a rank a kind); each must be asked for by a fact (the
    kind quoted in ``ncclsleuth/model/facts``: ``evidence["kind"]``, ``evidence.get("kind")``, or
    among the keys a fact looks up).  Before: ``net_plugin`` was kept and never read."""
    import re
    from pathlib import Path

    import ncclsleuth
    from ncclsleuth.model import job as J

    root = Path(ncclsleuth.__file__).parent / "model" / "facts"
    code = "\n".join(p.read_text(encoding="utf-8") for p in root.rglob("*.py"))
    unread = [k for k in sorted(J._EVIDENCE_KINDS) if not re.search('"' + re.escape(k) + '"', code)]
    assert unread == [] and len(J._EVIDENCE_KINDS) >= 5


def test_a_communicators_hops_are_two_ints_each_and_merge_by_their_kinds():
    """Before: a (src, dst) tuple and a [transport, net, gdr, lines] list a hop (~270 bytes with their
    ints; three a rank).  Now the ranks in one int and the lines and kind in another, the kinds
    (a handful) in a list of the communicator: read back as before (``hop_items``), and two files'
    models merge hop by hop though their kinds were met in another order.  A rank past 32 bits
    (a damaged line) is no hop (its line still counts for its transport)."""
    from ncclsleuth.model import job as J
    from ncclsleuth.model.merge import merge

    assert J.hop_key(7, 8) is not None and J.hop_ends(J.hop_key(7, 8)) == (7, 8)  # type: ignore[arg-type]
    assert J.hop_ends(J.hop_key(0, (1 << 32) - 1)) == (0, (1 << 32) - 1)  # type: ignore[arg-type]
    assert J.hop_key(1 << 32, 0) is None and J.hop_key(0, -1) is None

    def model(conns: list[tuple[int, int, str]]) -> J.JobModel:
        m = J.JobModel()
        for src, dst, via in conns:
            m.add_conn("f.log", 1, "node1", 10, f"{src}[0]", f"{dst}[1]", via)
        return m

    a = model([(0, 1, "P2P/IPC"), (0, 1, "P2P/IPC"), (1, 2, "NET/IB/0/GDRDMA")])
    b = model([(5, 6, "NET/IB/0/GDRDMA"), (0, 1, "P2P/IPC"), (2, 3, "SHM/direct/direct"),
               (1 << 40, 2, "P2P/IPC")])
    (ca,), (cb,) = a.comms.values(), b.comms.values()
    assert all(type(k) is int and type(v) is int for k, v in ca.hops.items())
    assert list(ca.hop_items()) == [((0, 1), ("P2P", None, False, 2)), ((1, 2), ("NET/IB", "IB", True, 1))]
    assert [k for k, _ in cb.hop_items()] == [(5, 6), (0, 1), (2, 3)] and cb.transports["P2P"] == 2
    assert cb.hop_kinds[0] == ("NET/IB", "IB", True) != ca.hop_kinds[0]
    merge(a, b)
    (c,) = a.comms.values()
    assert sorted(c.hop_items()) == [((0, 1), ("P2P", None, False, 3)), ((1, 2), ("NET/IB", "IB", True, 1)),
                                     ((2, 3), ("SHM", None, False, 1)), ((5, 6), ("NET/IB", "IB", True, 1))]
    assert a.n_hops == 4 and len(c.hop_kinds) == 3


def test_a_process_that_set_nothing_holds_the_shared_empty_settings_and_evidence():
    """Before: two empty dicts and an empty list of its own every process (~230 bytes; a folder of
    per-rank files has two processes a rank, one of them the file's PyTorch lines, which set
    nothing).  Now one shared read-only empty mapping until the first setting or evidence line,
    and a tuple of plugins; the first write gives the process a dict of its own (the shared one
    stays empty), in a merge too; pickled, it is the shared one again."""
    import pickle

    from ncclsleuth.model import job as J
    from ncclsleuth.model.merge import merge

    text = ("[rank3]:[I1129 11:31:50.630429017 ProcessGroupNCCL.cpp:968] [PG ID 0 PG GUID 0(default_pg) Rank 3] "
            "ProcessGroupNCCL initialization options: size: 8, global rank: 3, TIMEOUT(ms): 600000\n"
            "node1:10:11 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0\n"
            "node1:10:11 [0] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v6)\n"
            "node2:20:21 [0] NCCL INFO cudaDriverVersion 12040\n")  # two processes: the rank's lines stay apart
    model = api.build(api.memory_sources({"job.log": text})).model
    torch_lines = model.processes[("job.log", None)]
    nccl = model.processes[("node1", 10)]
    assert torch_lines.env is J._NONE_SET and torch_lines.said is J._NONE_SET and torch_lines.plugins == ()
    assert dict(nccl.env) == {"NCCL_SOCKET_IFNAME": "ib0"} and type(nccl.env) is dict
    assert sorted(nccl.evidence) == ["env:NCCL_SOCKET_IFNAME"] and nccl.plugins == ("Libfabric (v6)",)
    assert len(J._NONE_SET) == 0 and pickle.loads(pickle.dumps(torch_lines)).env is J._NONE_SET
    other = J.JobModel()
    blank = other.processes[("node1", 10)] = J.Process("node1", 10, "job.log")
    assert blank.env is J._NONE_SET
    mine = J.JobModel()
    mine.processes[("node1", 10)] = J.Process("node1", 10, "job.log")
    merge(mine, model)
    merged = mine.processes[("node1", 10)]
    assert dict(merged.env) == {"NCCL_SOCKET_IFNAME": "ib0"} and merged.plugins == ("Libfabric (v6)",)
    assert len(J._NONE_SET) == 0 and blank.env is J._NONE_SET


_RANK_LINE = ("[rank{r}]:[I1129 11:31:50.630429017 ProcessGroupNCCL.cpp:968] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
              "ProcessGroupNCCL initialization options: size: 8, global rank: {r}, TIMEOUT(ms): 600000\n")


def test_a_files_lines_that_name_no_process_are_its_one_process_where_they_tell_only_a_rank(tmp_path):
    """A per-rank file's PyTorch lines (no host, no pid) were a process of their own beside the one
    its NCCL lines name: ~330 bytes a rank, and two processes a rank against ``MAX_PROCESSES``.  At
    the file's end they are that process's (its launcher rank); kept apart where the file names two
    processes, where the process has another launcher rank, where the file names none, and where
    they told something else (an NCCL setting printed without its prefix)."""
    nccl = "node1:10:11 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0\n"
    files = {
        "one.log": _RANK_LINE.format(r=3) + nccl,
        "two.log": _RANK_LINE.format(r=4) + nccl.replace("node1:10", "node2:20")
        + nccl.replace("node1:10", "node2:21"),
        "other.log": _RANK_LINE.format(r=5) + "[rank6]:" + nccl.replace("node1:10", "node3:30"),
        "torch.log": _RANK_LINE.format(r=7),
        "told.log": _RANK_LINE.format(r=8) + "NCCL INFO NCCL_IB_HCA set by environment to mlx5_1\n"
        + nccl.replace("node1:10", "node4:40"),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    model = api.build([str(tmp_path / n) for n in files], api.Options(jobs=1)).model
    got = {(p.source.rsplit("/", 1)[-1], p.host, p.pid): p.launcher_rank for p in model.processes.values()}
    assert got == {("one.log", "node1", 10): 3,
                   ("two.log", None, None): 4, ("two.log", "node2", 20): None, ("two.log", "node2", 21): None,
                   ("other.log", None, None): 5, ("other.log", "node3", 30): 6,
                   ("torch.log", None, None): 7,
                   ("told.log", None, None): 8, ("told.log", "node4", 40): None}
    told = model.processes[(str(tmp_path / "told.log"), None)]
    assert dict(told.env) == {"NCCL_IB_HCA": "mlx5_1"}
    summary = api.diagnose(model, api.load_rules(api.Options())).summary
    assert summary["processes"] == 6  # the five (host, pid), and torch.log's lines (its file names none)


def test_told_nothing_reads_every_field_but_where_and_the_rank():
    """A field added to ``Process`` is read by ``told_nothing`` (so a file's unnamed lines that set it
    are never folded away): each field but the place, the lines and the launcher rank, set, tells."""
    import dataclasses

    from ncclsleuth.model.job import Process

    where = {"host", "pid", "source", "launcher_rank", "first_line", "last_line", "last_kind"}
    blank = Process(None, None, "f.log", launcher_rank=3, first_line=1, last_line=9, last_kind="pg_options")
    assert blank.told_nothing()
    values = {dict: {"X": "1"}, tuple: ("x",), bool: True, int: 1}
    for f in dataclasses.fields(Process):
        if f.name in where:
            continue
        p = Process(None, None, "f.log")
        default = getattr(p, f.name)
        setattr(p, f.name, values.get(type(default), "x") if f.name != "first_error" else object())
        assert not p.told_nothing(), f.name


def test_processes_that_print_the_same_settings_share_one_mapping():
    """Every rank prints the same ``NCCL_*`` settings: one dict per distinct list (a dict a process
    was ~230 bytes a rank).  A process that sets one more gets a new one, the others' unchanged; a
    worker's process merged in shares the lead's; past ``MAX_ENVS`` lists the table starts again."""
    import pickle

    from ncclsleuth.model import job as J
    from ncclsleuth.model.merge import merge

    text = "".join(f"node{h}:{h}0:{h}1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0\n"
                   f"node{h}:{h}0:{h}1 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.\n" for h in (1, 2, 3))
    text += "node3:30:31 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n"
    model = api.build(api.memory_sources({"job.log": text}), api.Options(jobs=1)).model
    a, b, c = (model.processes[(f"node{h}", h * 10)] for h in (1, 2, 3))
    assert a.env is b.env and dict(a.env) == {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_TIMEOUT": "22"}
    assert c.env is not a.env and dict(c.env) == {**a.env, "NCCL_IB_HCA": "mlx5_0"}
    worker = pickle.loads(pickle.dumps(model))  # as a forked worker's per-file model arrives
    lead = J.JobModel()
    lead.processes[("node1", 10)] = J.Process("node1", 10, "job.log")
    merge(lead, worker)
    assert lead.processes[("node2", 20)].env is lead.processes[("node1", 10)].env is a.env
    old = J.MAX_ENVS
    try:
        J.MAX_ENVS = 1
        again = api.build(api.memory_sources({"job.log": text}), api.Options(jobs=1)).model
    finally:
        J.MAX_ENVS = old
    assert [dict(p.env) for p in again.processes.values()] == [dict(p.env) for p in model.processes.values()]
