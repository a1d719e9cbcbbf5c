"""The lines and blocks around NCCL (issue 19.4): kernel and driver lines, crash reports,
ulimit, aws-ofi-nccl / RCCL banners (fixtures/parse/host_lines.yaml), and the block readers
of diagnostic tools (fixtures/parse/host_blocks.yaml over fixtures/host/*.txt): exact events
line by line, the same kinds and lines on the fast path, and the block machinery's edges
(reading a header back across a 64 KB block, the limit of that, where a block ends)."""
from __future__ import annotations

from pathlib import Path

import pytest
from _linecases import check, ident, load

from ncclsleuth.ingest.blocks import BlockReader
from ncclsleuth.ingest.memory import MemoryInput
from ncclsleuth.parse.blocks import LOOKBACK, ipv4_of, port_state, size_bytes
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

HOST = Path(__file__).resolve().parent.parent / "fixtures" / "host"
CASES = load("host_lines.yaml")
BLOCKS = load("host_blocks.yaml")


@pytest.mark.parametrize("case", CASES, ids=[ident(c) for c in CASES])
def test_line(case):
    check(case)


def _slow(text: str, keep_text: bool = False) -> list:
    fp = FileParser("t", ShapeCache(enabled=False))
    return [e for e in fp.parse_lines(enumerate(text.split("\n"), 1)) if keep_text or e.kind != "text"]


def _fast(text: str, block: int | None = None) -> list:
    fp = FileParser("t", ShapeCache(enabled=False), keep_text=False, use_catalog=False)
    reader = BlockReader(MemoryInput("t", data=text.encode())) if block is None else \
        BlockReader(MemoryInput("t", data=text.encode()), block=block)
    out = []
    for first, chunk in reader:
        out.extend(fp.parse_block(first, chunk))
    return out + fp.finish()


@pytest.mark.parametrize("case", BLOCKS, ids=[c["file"] for c in BLOCKS])
def test_block(case):
    text = (HOST / case["file"]).read_text(encoding="utf-8")
    got = [{k: v for k, v in e.to_dict().items() if k not in ("text", "source")} for e in _slow(text)]
    assert got == case["events"]
    assert [(e.kind, e.line) for e in _fast(text) if e.kind != "step_time"] == [(e["kind"], e["line"]) for e in got]


_IBSTATUS = ("Infiniband device 'mlx5_{n}' port 1 status:\n\tdefault gid:\t fe80:0000:0000:0000:b859:9f03:00d4:0a4{n}\n"
             "\tbase lid:\t 0x0\n\tsm lid:\t\t 0x0\n\tstate:\t\t 2: INIT\n\tphys state:\t 5: LinkUp\n"
             "\trate:\t\t 200 Gb/sec (4X HDR)\n\tlink_layer:\t InfiniBand\n\n")


@pytest.mark.parametrize("block", [64, 100, 160, 300])
def test_the_header_is_read_back_across_the_fast_paths_text_blocks(block):
    """ibstatus starts its block at a state line and reads the header before it: where the
    reader's text block ends between them, the fast path finds it as line by line does."""
    text = "training noise line\n" * 3 + _IBSTATUS.format(n=0) + _IBSTATUS.format(n=1)
    slow = [(e.kind, e.line, getattr(e, "device", None)) for e in _slow(text)]
    fast = [(e.kind, e.line, getattr(e, "device", None)) for e in _fast(text, block=block)]
    assert fast == slow
    assert [x for x in slow if x[0] == "ib_port"] == [("ib_port", 8, "mlx5_0"), ("ib_port", 17, "mlx5_1")]


def test_a_header_beyond_the_look_back_is_not_guessed():
    filler = "".join(f"\tcap_flag_{i}:\t\t0x{i:x}\n" for i in range(LOOKBACK))
    text = "hca_id:\tmlx5_0\n" + filler + "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n"
    ports = [e for e in _slow(text) if e.kind == "ib_port"]
    assert [(p.device, p.state) for p in ports] == [("?", "Down")]
    assert [(e.kind, e.line) for e in _fast(text)] == [(e.kind, e.line) for e in _slow(text)]


def test_the_line_after_a_block_is_parsed_as_usual():
    text = ("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Down\n\t\tPhysical state: Polling\n"
            "node1:11:12 [0] transport/net_ib.cc:1300 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> "
            "with error 12, opcode 0, len 0, vendor err 129 (Send)\n")
    kinds = [(e.kind, e.line) for e in _slow(text)]
    assert kinds == [("tool_output", 1), ("ib_port", 3), ("ib_completion_error", 5)]


def test_every_line_of_a_block_stays_an_event_in_the_parse_view():
    """``ncclsleuth parse`` shows every line: a block's lines without a value are text events."""
    text = (HOST / "topo-healthy.txt").read_text(encoding="utf-8")
    lines = [e.line for e in _slow(text, keep_text=True)]
    assert set(range(1, text.count("\n") + 1)) <= set(lines)


@pytest.mark.parametrize("value,want", [("Active", "Active"), ("4: ACTIVE", "Active"), ("PORT_ACTIVE (4)", "Active"),
                                        ("2: INIT", "Initializing"), ("PORT_INIT (2)", "Initializing"),
                                        ("1: DOWN", "Down"), ("PORT_ARMED (3)", "Armed")])
def test_port_states_of_the_three_tools_read_alike(value, want):
    from ncclsleuth.parse.blocks import _STATES

    assert port_state(value, _STATES) == want


def test_gid_and_size_values():
    assert ipv4_of("::ffff:10.0.0.1") == "10.0.0.1"
    assert ipv4_of("0000:0000:0000:0000:0000:ffff:0a00:0001") == "10.0.0.1"
    assert ipv4_of("fe80:0000:0000:0000:ba59:9fff:fe1e:4f8a") is None
    assert size_bytes("64M") == 64 << 20 and size_bytes("1.5G") == int(1.5 * (1 << 30))
    assert size_bytes("65536", blocks=1024) == 64 << 20 and size_bytes("-") is None


def test_a_flood_of_headerless_port_lines_reads_back_a_bounded_number_of_lines(monkeypatch):
    """Each ibstatus state line starts a block that reads its header back; a hostile file of
    such lines without a header costs each line its own work, not 64 lines read back each."""
    import ncclsleuth.parse.blocks as B

    calls = []
    real = B._indent_and_body
    monkeypatch.setattr(B, "_indent_and_body", lambda t, p: calls.append(1) or real(t, p))
    n = 3000
    got = _slow("state:\t\t 4: ACTIVE\n" * n)  # not indented: each line ends the block before it
    assert len([e for e in got if e.kind == "tool_output"]) == n
    assert len(calls) < 4 * n  # (64 lines read back each: ~190,000)


def test_a_block_ends_after_its_line_budget():
    from ncclsleuth.parse.blocks import MAX_BLOCK_LINES

    text = ("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n" + "\t\tx: y\n" * (MAX_BLOCK_LINES + 5)
            + "h:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43127> failed : "
              "Connection refused\n")
    kinds = [e.kind for e in _fast(text)]
    assert kinds[-1] == "socket_error" and kinds.count("ib_port") == 1
