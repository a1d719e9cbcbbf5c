"""NCCL text inside other text (issue 19, part 3): every wrapper still yields the typed event.

Real pastes carry NCCL messages quoted or wrapped by the layer above: PyTorch's ``Last
error:`` line (NCCLUtils getNcclErrorDetailStr appends ``"\\nLast error:\\n" +
ncclGetLastError()``, the text of NCCL's last WARN without its prefix), XLA's ``Last NCCL
warning(error) log entry``, exception texts, lines hard-wrapped by a terminal or a log
viewer, pytest's ``E   `` prefix, lines pasted without the word NCCL, fields abbreviated or
redacted by the poster.  Each case checks the event through both parser paths (analyze's
block reader and ``parse``'s line reader) and, where it matters, what the knowledge base and
the report make of it.
"""
from __future__ import annotations

from typing import Any

import pytest

from ncclsleuth import api
from ncclsleuth.events import Event
from ncclsleuth.model.facts import knowledge as kfact
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

_ENVELOPE = ("text", "source")


def _plain(ev: Event) -> dict[str, Any]:
    return {k: v for k, v in ev.to_dict().items() if k not in _ENVELOPE}


def events(text: str) -> list[dict[str, Any]]:
    """Events of ``text`` through analyze's block path; the line path must agree."""
    fast = FileParser("t", ShapeCache(enabled=False), keep_text=False)
    got = [_plain(e) for e in fast.parse_block(1, text.rstrip("\n")) + fast.finish()]
    slow = FileParser("t", ShapeCache(enabled=False), keep_text=True)
    lines = list(enumerate(text.rstrip("\n").split("\n"), 1))
    assert [_plain(e) for e in slow.parse_lines(lines) if e.kind != "text"] == got
    return got


def report(text: str) -> Any:
    return api.analyze(api.memory_sources({"s.log": text}), api.Options(cache=False))


def known(text: str) -> list[dict[str, Any]]:
    rep = api.build(api.memory_sources({"s.log": text}), api.Options(cache=False))
    return [{"id": r["id"], "line": r["evidence"][0].line, "message": r["message"]}
            for r in kfact.known_message(rep.model)]


# ------------------------------------------------------------------ PyTorch's "Last error:"
NCCL_1837 = """\
[trainer3]:twshared1016:1958:1958 [3] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth2
[trainer0|0]:ncclInternalError: Internal check failed.
[trainer0|0]:Last error:
[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)
"""


def test_last_error_next_line_is_the_typed_warn():
    evs = events(NCCL_1837)
    assert [e["kind"] for e in evs] == ["env_setting", "nccl_error_class", "socket_error"]
    inner = evs[2]
    assert inner["line"] == 4 and inner["level"] == "WARN" and inner["rank"] == 0
    assert inner["func"] == "ncclSocketInit"
    assert inner["inner"] == ("ncclSocketInit: connecting to address  with family 59936 is neither "
                              "AF_INET(2) nor AF_INET6(10)")


def test_last_error_is_identified_as_the_nccl_warn_it_quotes():
    # NCCL-W-026873a6: misc/socket.cc ncclSocketInit's WARN (the catalog's id of that format)
    assert {"id": "NCCL-W-026873a6", "line": 4,
            "message": "ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) "
                       "nor AF_INET6(10)"} in known(NCCL_1837)


def test_last_error_any_warn_the_grammar_does_not_know():
    text = ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, invalid usage"
            " (run with NCCL_DEBUG=WARN for details), NCCL version 2.18.1\n"
            "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
            "Last error:\n"
            "Invalid rank requested : 7/4\n")
    last = events(text)[-1]
    assert {k: last[k] for k in ("kind", "line", "level", "inner", "message")} == {
        "kind": "nccl_other", "line": 4, "level": "WARN", "inner": "Invalid rank requested : 7/4",
        "message": "Invalid rank requested : 7/4"}
    from ncclsleuth.parse import catalog

    want = catalog.lookup("Invalid rank requested : 7/4", "WARN")
    assert want is not None
    assert {"id": want.id, "line": 4, "message": "Invalid rank requested : 7/4"} in known(text)
    rep = report(text)
    line4 = [f.rule_id for f in rep.findings if any(e.line == 4 for e in f.evidence)]
    assert line4, "the quoted WARN is the evidence of a finding"
    assert not [u for u in rep.unexplained if u.line == 4]


def test_last_error_on_the_same_line():
    text = ("[rank1]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device"
            " error. Last error: socketStartConnect: Connect to 10.0.0.2<43527> failed : Software caused connection"
            " abort\n")
    evs = events(text)
    kinds = [e["kind"] for e in evs]
    assert kinds == ["socket_error", "nccl_error_class"]
    assert evs[0]["peer"] == "10.0.0.2<43527>" and evs[0]["level"] == "WARN" and evs[0]["rank"] == 1
    assert evs[1]["code"] == "ncclSystemError"


def test_last_error_line_alone_with_the_message_after_it():
    evs = events("Last error: socketPollConnect: Connect to 10.0.0.7<35001> returned 113(No route to host) errno"
                 " 115(Operation now in progress)\n")
    assert [(e["kind"], e["line"], e["level"]) for e in evs] == [("socket_error", 1, "WARN")]


@pytest.mark.parametrize("after", ["Last error: Unknown NCCL Error", "Last error:\nException raised from"
                                   " getNcclErrorDetailStr at NCCLUtils.cpp:1 (most recent call first):"])
def test_no_last_error_is_no_event(after):
    """No quoted WARN after "Last error:"; a C++ stack's first line is only where its block starts."""
    evs = events("ncclInternalError: Internal check failed.\n" + after + "\n")
    assert [e["kind"] for e in evs if e["kind"] != "tool_output"] == ["nccl_error_class"]
    assert not [e for e in evs if e["kind"] == "tool_output" and e.get("level")]


def test_last_error_is_per_rank():
    text = ("[rank0]: Last error:\n"
            "[rank1]: Watchdog caught collective operation timeout\n"
            "[rank0]: Call to ibv_reg_mr failed with error Cannot allocate memory\n")
    evs = events(text)
    assert [(e["kind"], e["line"], e.get("rank")) for e in evs] == [
        ("watchdog_timeout", 2, 1), ("ibv_error", 3, 0)]
    assert evs[1]["inner"].startswith("Call to ibv_reg_mr failed")


# ------------------------------------------------------------------ XLA
def test_xla_last_nccl_warning():
    # jax-cuda12-pjrt 0.12 nccl_collectives.cc: "NCCL operation %s failed: %s. Last NCCL warning(error)
    # log entry (may be unrelated) '%s'."
    text = ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: NCCL operation ncclGroupEnd() failed: unhandled"
            " system error (run with NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be"
            " unrelated) 'NET/IB : Got completion from peer 10.1.1.2<43262> with status=12 opcode=0 len=0 vendor"
            " err 129 (Recv) localGid ::ffff:10.1.1.1 remoteGids::ffff:10.1.1.2'.\n")
    evs = events(text)
    assert [e["kind"] for e in evs] == ["ib_completion_error", "exception"]
    assert evs[0]["status"] == 12 and evs[0]["peer"] == "10.1.1.2<43262>" and evs[0]["level"] == "WARN"
    assert evs[0]["inner"].startswith("NET/IB : Got completion") and evs[0]["inner"].endswith("::ffff:10.1.1.2")
    assert evs[1]["exc_type"] == "jaxlib.xla_extension.XlaRuntimeError"
    assert "Last NCCL" not in evs[1]["message"]
    top = report(text).findings[0]  # the IB completion rules see the quoted WARN
    assert (top.rule_id, top.evidence[0].line) == ("IB002", 1)


def test_xla_last_nccl_error_maybe_unrelated():
    # nccl_communicator.cc: "%s. Last NCCL error (maybe unrelated): %s"
    text = ("E0101 12:00:00.000000 1234 pjrt_client.cc:100] INTERNAL: unhandled cuda error. Last NCCL error"
            " (maybe unrelated): Cuda failure 'out of memory'\n")
    evs = events(text)
    assert evs[0]["kind"] == "cuda_error" and evs[0]["error"] == "out of memory" and evs[0]["level"] == "WARN"
    assert report(text).findings[0].category == "cuda_oom"


# ------------------------------------------------------------------ exception texts
def test_watchdog_exception_embedding_a_cuda_error():
    text = ("[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 3]"
            " Process group watchdog thread terminated with exception: CUDA error: uncorrectable ECC error"
            " encountered\n")
    evs = events(text)
    assert [(e["kind"], e["what"], e["rank"]) for e in evs] == [("hw_error", "ecc", 3)]
    assert report(text).findings[0].category == "hardware_fault"


def test_dist_backend_error_embedding_a_watchdog_timeout():
    text = ("terminate called after throwing an instance of 'c10::DistBackendError'\n"
            "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with"
            " exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1245,"
            " OpType=ALLREDUCE, NumelIn=26214400, NumelOut=26214400, Timeout(ms)=600000) ran for 600047"
            " milliseconds before timing out.\n")
    evs = [e for e in events(text) if e["kind"] == "watchdog_timeout"]
    assert len(evs) == 1
    assert (evs[0]["seq"], evs[0]["op"], evs[0]["timeout_ms"], evs[0]["ran_ms"]) == (1245, "ALLREDUCE", 600000, 600047)


# ------------------------------------------------------------------ hard-wrapped lines
AUTOCAST_381 = """\
`Trainer.fit` stopped: `max_epochs=N` reached.
[Rank 0] Watchdog caught collective operation timeout:
  WorkNCCL(..., OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)
  ran for 1800090 milliseconds before timing out.
...
srun: error: ... Aborted (core dumped)
"""


def test_watchdog_wrapped_over_three_lines_is_one_event():
    evs = [e for e in events(AUTOCAST_381) if e["kind"] == "watchdog_timeout"]
    assert evs == [{"kind": "watchdog_timeout", "line": 2, "rank": 0, "op": "ALLREDUCE", "numel_in": 1,
                    "numel_out": 1, "timeout_ms": 1800000, "ran_ms": 1800090}]


def test_wrapped_message_keeps_its_first_line_as_evidence():
    rep = report(AUTOCAST_381)
    ev = next(f for f in rep.findings if f.rule_id == "TIMEOUT001").evidence[0]
    assert (ev.line, ev.text) == (2, "[Rank 0] Watchdog caught collective operation timeout:")


def test_wrap_then_a_new_line_is_its_own_event():
    text = ("[Rank 0] Watchdog caught collective operation timeout:\n"
            "  WorkNCCL(SeqNum=7, OpType=BROADCAST, NumelIn=4, NumelOut=4, Timeout(ms)=600000)\n"
            "node1:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43127> failed :"
            " Connection refused\n")
    evs = events(text)
    assert [(e["kind"], e["line"]) for e in evs] == [("watchdog_timeout", 1), ("socket_error", 3)]
    assert evs[0]["seq"] == 7 and evs[0]["op"] == "BROADCAST" and "ran_ms" not in evs[0]


def test_indented_line_that_says_nothing_more_is_not_joined():
    text = ("[Rank 0] Watchdog caught collective operation timeout:\n"
            "  (see the flight recorder dump)\n")
    evs = events(text)
    assert evs == [{"kind": "watchdog_timeout", "line": 1, "rank": 0}]


def test_held_message_at_end_of_input_is_kept():
    evs = events("[Rank 2] Watchdog caught collective operation timeout:")
    assert evs == [{"kind": "watchdog_timeout", "line": 1, "rank": 2}]


def test_wrap_across_blocks():
    """The block reader hands 64 KB blocks: a message held at the end of one joins the next."""
    fp = FileParser("t", ShapeCache(enabled=False), keep_text=False)
    got = fp.parse_block(1, "[Rank 0] Watchdog caught collective operation timeout:")
    got += fp.parse_block(2, "  WorkNCCL(SeqNum=3, OpType=ALLGATHER, NumelIn=8, NumelOut=64, Timeout(ms)=600000)\n"
                             "  ran for 600100 milliseconds before timing out.")
    got += fp.finish()
    assert [(e.kind, e.line, e.op, e.ran_ms) for e in got] == [("watchdog_timeout", 1, "ALLGATHER", 600100)]


# ------------------------------------------------------------------ pytest, bare levels
def test_pytest_failure_lines():
    text = ("E   RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled"
            " system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.14.3\n"
            "E   ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
            "E   Last error:\n"
            "E   socketStartConnect: Connect to 10.0.0.2<43527> failed : Software caused connection abort\n")
    evs = events(text)
    assert [(e["kind"], e["line"]) for e in evs] == [("nccl_error", 1), ("nccl_error_class", 2), ("socket_error", 4)]
    assert evs[0]["exc_type"] == "RuntimeError" and evs[0]["nccl_version"] == "2.14.3"
    assert evs[2]["level"] == "WARN"
    rep = report(text)
    assert any(e.line == 4 for f in rep.findings for e in f.evidence)


def test_bare_info_net_lines_without_the_word_nccl():
    evs = events("INFO NET/IB : No device found.\n"
                 "INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
                 "INFO Using network Socket\n")
    assert [(e["kind"], e["level"]) for e in evs] == [("net_ib_none", "INFO"), ("net_socket_ifaces", "INFO"),
                                                      ("net_selected", "INFO")]
    assert evs[1]["ifaces"] == [{"name": "eth0", "addr": "10.0.0.1", "idx": 0}]


def test_bare_warn_line_is_an_nccl_warn():
    text = "WARN NET/IB : Got completion from peer 10.1.1.2<43262> with error 12, opcode 0, len 0, vendor err 129\n"
    evs = events(text)
    assert evs[0]["kind"] == "ib_completion_error" and evs[0]["level"] == "WARN" and evs[0]["status"] == 12
    assert evs[0]["inner"] == text.strip()[5:]
    assert any(k["line"] == 1 and k["id"].startswith("NCCL-W-") for k in known(text))


# ------------------------------------------------------------------ abbreviated and redacted fields
def test_worknccl_abbreviated():
    evs = events("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(..., OpType=ALLREDUCE, ...)"
                 " ran for 1800512 milliseconds before timing out.\n")
    assert evs == [{"kind": "watchdog_timeout", "line": 1, "rank": 3, "op": "ALLREDUCE", "ran_ms": 1800512}]


@pytest.mark.parametrize("peer", ["xxx", "xxx<42315>", "XXX.XXX.XXX.XXX<1234>", "***"])
def test_redacted_address(peer):
    evs = events(f"node1:1234:5678 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to {peer} failed :"
                 " Connection refused\n")
    assert [(e["kind"], e["op"], e["peer"], e["error"]) for e in evs] == [
        ("socket_error", "connect", peer, "Connection refused")]


def test_redacted_hostname():
    evs = events("...-48:1234:5678 [0] NCCL INFO NET/Socket : Using [0]eth0:xxx<0>\n")
    assert (evs[0]["kind"], evs[0]["host"], evs[0]["pid"]) == ("net_socket_ifaces", "...-48", 1234)


def test_torchx_role_prefix():
    evs = events("[trainer0|3]:ncclInternalError: Internal check failed.\n")
    assert (evs[0]["kind"], evs[0]["rank"]) == ("nccl_error_class", 0)
