"""Message templates: clauses and defaults instead of '?', peers named by host, who a finding is about."""
from __future__ import annotations

import pytest

from ncclsleuth import api
from ncclsleuth.rules.template import fill, placeholders

VALUES = {"rank": 4, "host": "node1", "seq": 1245, "op": None, "shape": "", "peer": "?"}


def _fill(tpl: str) -> tuple[str, list[str]]:
    out = fill(tpl, lambda name, sub: VALUES.get(name))
    return out.text, out.missing


@pytest.mark.parametrize("tpl,text", [
    ("Rank {rank}[ on {host}]", "Rank 4 on node1"),
    ("GPU out of memory[ on {peer}]", "GPU out of memory"),  # "?" is a missing value
    ("[{op}: ]the watchdog gave up", "The watchdog gave up"),  # opening clause dropped: capital
    ("[{host}: ]the watchdog gave up", "node1: the watchdog gave up"),  # a value keeps its case
    ("gave up on {op|a collective}[ (SeqNum {seq})]", "gave up on a collective (SeqNum 1245)"),
    ("{op|a process} could not connect", "A process could not connect"),
    ("x[ (seq {seq}[, shape {shape}])] y", "x (seq 1245) y"),  # nested: the inner clause alone goes
    ("x[ (seq {seq}[, op {op}], shape {shape})] y", "x y"),
    ('os.environ["RANK"] = {rank}', 'os.environ["RANK"] = 4'),  # brackets without a placeholder are text
    (r"shape \[{seq}\]", "shape [1245]"),
    ("a [ {rank} unclosed", "a [ 4 unclosed"),
])
def test_clauses_and_defaults(tpl: str, text: str) -> None:
    assert _fill(tpl) == (text, [])


def test_a_bare_missing_placeholder_says_unknown_and_is_recorded() -> None:
    assert _fill("on {op}") == ("on unknown", ["{op}"])


def test_placeholders_know_which_are_optional() -> None:
    assert list(placeholders("{a} [{b}[ {c.d}]] {e|x}")) == [("a", None, False), ("b", None, True),
                                                             ("c", "d", True), ("e", None, True)]


def _findings(log: str) -> list:
    return api.analyze(api.memory_sources(log, dedent=True)).findings


def test_a_peer_ip_is_named_by_the_host_that_bound_it() -> None:
    """node5 cannot connect to 10.0.0.4: node4's bootstrap line says that address is node4's."""
    report = api.analyze(api.memory_sources({
        "node4.log": "node4:11:11 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.4<0>\n",
        "node5.log": "node5:240:240 [6] NCCL INFO Bootstrap : Using ib0:10.0.0.5<0>\n"
                     "node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> "
                     "returned 113(No route to host) errno 115(Operation now in progress)\n"}))
    net = [f for f in report.findings if f.rule_id == "NET005"][0]
    assert "could not connect to node4 (10.0.0.4<56849>)" in net.message
    assert net.hosts == ["node5"]


def test_an_address_on_two_hosts_names_neither() -> None:
    report = api.analyze(api.memory_sources({
        "a.log": "nodeA:1:1 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n",
        "b.log": "nodeB:1:1 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n"
                 "nodeB:1:1 [0] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 172.17.0.1<56849> "
                 "returned 113(No route to host) errno 115(Operation now in progress)\n"}))
    net = [f for f in report.findings if f.rule_id == "NET005"][0]
    assert "connect to 172.17.0.1<56849>:" in net.message


def test_ranks_of_a_duplicate_gpu_are_the_findings_ranks() -> None:
    f = _findings("""
        h:1:1 [0] init.cc:880 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 10
        """)
    dup = [x for x in f if x.rule_id == "DUP001"][0]
    assert dup.ranks == [0, 1]
    assert dup.message == "Ranks 1 and 0 both run on CUDA device 10 (h). Each process must select its own GPU."


def test_a_line_without_host_or_rank_drops_the_clause_and_capitalises() -> None:
    f = _findings("RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    hw = [x for x in f if x.rule_id == "HW001"][0]
    assert hw.title == "GPU hardware fault: ecc"
    assert hw.message.startswith("The GPU reported a hardware fault")


@pytest.mark.parametrize("value,text", [
    (8000, "8,000 ranks"), (7, "7 ranks"), ("20000+", "20,000+ ranks"),  # a floor past the kept events
    ("eth0, ib0", "eth0, ib0 ranks"), (True, "True ranks"), (2.5, "2.5 ranks"),  # not a count: as it is
])
def test_a_count_placeholder_has_thousands_separators(value: object, text: str) -> None:
    """``{name:,}``: before, ``8000`` (and the placeholder with ``:,`` was text)."""
    assert fill("{n:,} ranks", lambda name, sub: value if name == "n" else None).text == text


def test_a_count_placeholder_keeps_default_clause_and_sub_field() -> None:
    values = {("a", "n"): 12345, ("b", None): None}
    assert fill("[{b:,} and ]{a.n:,} of {b:,|all}", lambda name, sub: values.get((name, sub))).text == "12,345 of all"
    assert list(placeholders("{a.n:,} [{b:,}] {c:,|x}")) == [("a", "n", False), ("b", None, True), ("c", None, True)]
    assert fill("{seq} {n:,}", lambda name, sub: 1245).text == "1245 1,245"  # identifiers stay as they are
