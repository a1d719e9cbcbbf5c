"""Derived facts of the job model, each on a small multi-file job."""
from __future__ import annotations

import pytest

from ncclsleuth.model.facts import FACTS
from ncclsleuth.model.facts.network import iface_problem
from ncclsleuth.model.topology import analyze_topology, check_ring
from ncclsleuth.ruletests import model_of


@pytest.mark.parametrize("name,addr,bad", [
    ("lo", "127.0.0.1", True), ("docker0", "172.17.0.1", True), ("virbr0", "192.168.122.1", True),
    ("ip6tnl0", "fe80::1%ip6tnl0", True), ("eth1", "fe80::215:5dff:fe33:ff6d%eth1", True),
    ("eth0", "10.0.0.1", False), ("ib0", "10.1.0.1", False), ("veth0", "2a02:6b8::1", False),
    ("bond0", "169.254.3.1", True), ("dstack-default-", "192.168.0.5", False),
])
def test_iface_problem(name, addr, bad):
    assert (iface_problem(name, addr) is not None) is bad


def test_bad_interface_names_host_iface_and_alternative():
    m = model_of("h1:7:7 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0> [1]eth0:10.0.0.5<0>\n")
    (f,) = FACTS["bad_interface"](m)
    assert (f["host"], f["iface"], f["first"], f["suggest"]) == ("h1", "docker0", True, "eth0")


def test_socket_fallback_reason_and_healthy_cloud_vm():
    m = model_of("h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
                 "h:1:1 [0] NCCL INFO Using network Socket\n")
    (f,) = FACTS["socket_fallback"](m)
    assert f["reason"] == "NCCL_IB_DISABLE is set" and f["host"] == "h"
    m = model_of("h:1:1 [0] NCCL INFO NET/IB : No device found.\nh:1:1 [0] NCCL INFO Using network Socket\n")
    assert FACTS["socket_fallback"](m) == []


def test_socket_minority_is_named():
    logs = {f"n{i}.log": f"n{i}:1:1 [0] NCCL INFO Using network IB\n" for i in range(15)}
    logs["c.log"] = "node-c:1:1 [0] NCCL INFO Using network Socket\n"
    m = model_of(logs)
    (f,) = FACTS["network_minority"](m)
    assert (f["host"], f["network"], f["majority"], f["majority_hosts"]) == ("node-c", "Socket", "IB", 15)
    (s,) = FACTS["socket_fallback"](m)
    assert s["host"] == "node-c" and "other nodes of this job use NET/IB" in s["reason"]


def _rank_logs(n: int, lag: int, seq: int = 1245) -> dict[str, str]:
    out = {}
    for r in range(n):
        if r == lag:
            out[f"r{r}.log"] = (f"[rank{r}]:[E1129 11:41:56.804870112 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) "
                                f"Rank {r}] Received a dump signal due to a collective timeout from  rank 0 and we will try "
                                f"our best to dump the debug info. Last enqueued NCCL work: {seq - 1}, last completed NCCL "
                                f"work: {seq - 1}.This is most likely caused by incorrect usages of collectives.\n")
        else:
            out[f"r{r}.log"] = (f"[rank{r}]:[E1129 11:41:55.712034518 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
                                f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, "
                                f"NumelOut=1, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.\n"
                                f"[rank{r}]:[E1129 11:41:55.735402977 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID "
                                f"0(default_pg) Rank {r}]  failure detected by watchdog at work sequence id: {seq} PG "
                                f"status: last enqueued work: {seq}, last completed work: {seq - 1}\n")
    return out


def test_laggard_rank_from_work_counters():
    m = model_of(_rank_logs(16, lag=5))
    (f,) = FACTS["collective_laggard"](m)
    assert (f["rank"], f["seq"], f["others_seq"], f["ahead"], f["op"]) == (5, 1244, 1245, 15, "ALLREDUCE")


def test_no_laggard_when_all_equal():
    logs = _rank_logs(4, lag=-1)
    assert FACTS["collective_laggard"](model_of(logs)) == []


def test_init_timing_outlier_host():
    logs = {}
    for r, tot in enumerate([2.0, 2.1, 1.9, 41.0]):
        logs[f"h{r}.log"] = (
            f"h{r}:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank {r} nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0xabc - Init START\n"
            f"h{r}:1:1 [0] NCCL INFO Init timings - ncclCommInitRank: rank {r} nranks 4 total {tot} (kernels 0.1, alloc 0.0, "
            f"bootstrap 0.5, allgathers 0.1, topo {tot - 1.0:.1f}, graphs 0.1, connections 0.1, rest 0.1)\n")
    (f,) = FACTS["init_timing"](model_of(logs))
    assert (f["slow_rank"], f["slow_host"], f["phase"], f["outlier"]) == (3, "h3", "topo", True)


def test_topology_ring_check_and_hops():
    assert check_ring((0, 1, 2, 3), 4) is None
    assert check_ring((0, 1, 1, 3), 4) == "visits a rank twice"
    assert "misses" in check_ring((0, 1, 2), 4)
    log = ("a:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xabc - Init START\n"
           "a:1:1 [0] NCCL INFO Channel 00/01 : 0 1\n"
           "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n")
    (t,) = analyze_topology(model_of(log))
    assert t.hops == {"NET/Socket": 1} and t.rings_checked == 1 and t.ring_problems == []


def test_median_helper_matches_statistics():
    """whole_job's median (no statistics import at start-up) agrees with statistics.median."""
    import random
    import statistics

    from ncclsleuth.model.stats import median as _median

    rnd = random.Random(7)
    for n in range(1, 40):
        ints = [rnd.randint(0, 50) for _ in range(n)]
        floats = [rnd.random() * 100 for _ in range(n)]
        assert _median(ints) == statistics.median(ints)
        assert _median(floats) == statistics.median(floats)
        assert _median(iter(ints)) == statistics.median(ints)
    with pytest.raises(ValueError):
        _median([])


def test_fact_records_carry_exactly_the_declared_fields(tmp_path):
    """What each fact declares (its TypedDict) is what its records hold: the rule schema
    checks ``where:`` keys and placeholders against it.  The rules' own fail snippets make
    every fact produce records; the live one (watch only) comes from a watched job."""
    from ncclsleuth.live import Watcher
    from ncclsleuth.model.facts import SPECS
    from ncclsleuth.rules.loader import load_rules
    from ncclsleuth.rules.schema import facts_of

    produced: set[str] = set()
    rules, _ = load_rules()
    for rule in rules:
        for name in facts_of(rule.match) - {n for n, s in SPECS.items() if s.live}:
            for t in (t for t in rule.tests if t.should_fire):
                for rec in FACTS[name](model_of(t.log)):
                    assert set(rec) == SPECS[name].fields, (name, rule.id, t.name)
                    produced.add(name)
    (tmp_path / "a.log").write_text("a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE\n")
    (tmp_path / "b.log").write_text("b:2:2 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 - Init START\n")
    now = [0.0]
    w = Watcher([str(tmp_path)], rules=[], silence=10, clock=lambda: now[0])
    w.poll()
    now[0] = 60.0
    from ncclsleuth.model.live import LiveView

    w.model.live = LiveView(now[0], w.silence, w.units())
    (rec,) = FACTS["silent_ranks"](w.model)
    assert set(rec) == SPECS["silent_ranks"].fields and rec["host"] == "b" and rec["seconds"] == 60
    produced.add("silent_ranks")
    assert produced == set(SPECS), f"no rule test makes {sorted(set(SPECS) - produced)} produce a record"


def test_topology_text_says_communicators_that_read_alike_once():
    """A job's per-host splits read alike: said once with how many and the first names (the 8k job:
    1,000 of them, 3,003 lines before); one that differs, or has a problem, is said on its own."""
    from ncclsleuth.model.topology import CommTopology
    from ncclsleuth.renderers.topology import render

    def split(key: str, **kw: object) -> CommTopology:
        return CommTopology(key, 8, {r: "node1" for r in range(8)}, hops={"P2P": 8}, rings_checked=2, **kw)

    world = CommTopology("0xw", 16, {r: f"node{r // 8}" for r in range(16)}, hops={"NET/IB": 2, "P2P": 14},
                         rings_checked=2)
    tops = [world, *(split(f"0x{i}") for i in range(5)), split("0xodd", shm_intra_node=3)]
    assert render(tops).splitlines() == [
        "communicator 0xw: 16 ranks, 2 host(s)", "  hops: NET/IB 2, P2P 14",
        "  rings checked: 2, all visit every rank once",
        "5 communicators of 8 ranks, 1 host(s) each: 0x0, 0x1, 0x2 and 2 more", "  hops: P2P 8",
        "  rings checked: 2, all visit every rank once",
        "communicator 0xodd: 8 ranks, 1 host(s)", "  hops: P2P 8", "  rings checked: 2, all visit every rank once",
        "  ! 3 intra-node hops over SHM (P2P disabled or unavailable)"]
    assert render(tops[:3]).count("communicator") == 2  # two alike: "2 communicators of ..."
    assert "2 communicators of 8 ranks, 1 host(s) each: 0x0, 0x1\n" in render(tops[:3])
