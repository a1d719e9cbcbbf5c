"""The analyze fast path loses nothing: the prefilter, block reading and --jobs/cache
give the same events and byte-identical reports as the slow, line-by-line path."""
from __future__ import annotations

from pathlib import Path

import pytest

import ncclsleuth.parallel.local as P
from ncclsleuth import api
from ncclsleuth.ingest.blocks import BlockReader
from ncclsleuth.ingest.decode import LineReader
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.model.build import parse_one
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser
from ncclsleuth.renderers import render

ROOT = Path(__file__).resolve().parent.parent
LOGS = sorted(p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and p.suffix in (".txt", ".log", ""))
CORPUS = sorted((ROOT.parent / "shared" / "corpus").glob("*/*/log.txt"))


def _slow(path: Path) -> list[tuple[str, int]]:
    fp = FileParser(str(path), ShapeCache(), keep_text=True)
    return [(e.kind, e.line) for e in fp.parse_lines(LineReader(InputFile(str(path))))
            if e.kind not in ("text", "step_time")]


def _fast(path: Path) -> list[tuple[str, int]]:
    fp = FileParser(str(path), ShapeCache(), keep_text=False, use_catalog=False)
    out = []
    for first, block in BlockReader(InputFile(str(path))):
        out.extend((e.kind, e.line) for e in fp.parse_block(first, block))
    out.extend((e.kind, e.line) for e in fp.finish())
    return [x for x in out if x[0] != "step_time"]  # sampled in the fast path: tested below


@pytest.mark.parametrize("path", LOGS + CORPUS, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_fast_path_keeps_every_meaningful_line(path):
    assert _fast(path) == _slow(path)


def _report(paths, **kw) -> str:
    report = api.analyze([str(p) for p in paths], api.Options(**kw))
    return render("json", report)


def test_same_report_with_and_without_cache_and_with_1_or_2_jobs(monkeypatch):
    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 0)
    inputs = [ROOT / "fixtures" / "examples" / "desync-16", ROOT / "fixtures" / "corpus"]
    base = _report(inputs, jobs=1)
    assert _report(inputs, jobs=1, cache=False) == base
    assert _report(inputs, jobs=2) == base


def test_block_reader_line_numbers_match_line_reader(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(b"a\r\nb NCCL WARN x\n\nc\xff\n" + b"d" * 10 + b"\nlast-without-newline")
    lines = dict(LineReader(InputFile(str(p))))
    blocks = {}
    for first, block in BlockReader(InputFile(str(p)), block=4):
        for i, s in enumerate(block.split("\n")):
            blocks[first + i] = s
    assert sorted(blocks) == sorted(lines)
    assert blocks[2] == lines[2] == "b NCCL WARN x"


def test_connection_lines_folded_without_events_give_the_same_model():
    """parse_one folds 'Channel .. via ..' lines straight into aggregates (no event objects);
    the model must equal the one built from the events."""
    from ncclsleuth.model import JobModel
    from ncclsleuth.model.summary import summarize

    for folder in (ROOT / "fixtures" / "examples" / "desync-16", ROOT / "fixtures" / "report" / "job64"):
        for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.endswith(".json")):
            inp = InputFile(str(path))
            fast, _, _ = parse_one(inp, True, ShapeCache())
            slow = JobModel()
            slow.add_source(inp.display)
            fp = FileParser(inp.display, ShapeCache(), keep_text=False, use_catalog=False)
            for first, block in BlockReader(inp):
                for ev in fp.parse_block(first, block):
                    slow.add(ev)
            for ev in [*fp.finish(), *fp.tail()]:  # as parse_one: what is left open, where the output stops
                slow.add(ev)
            slow.settle()  # as parse_one: the file's end
            slow.lines = fast.lines
            assert summarize(fast) == summarize(slow), path
            assert {k: list(c.hop_items()) for k, c in fast.comms.items()} == \
                   {k: list(c.hop_items()) for k, c in slow.comms.items()}
            assert [(p.key, p.net_conns, p.gdr_conns, p.last_line) for p in fast.processes.values()] == \
                   [(p.key, p.net_conns, p.gdr_conns, p.last_line) for p in slow.processes.values()]


def test_step_times_are_sampled_in_the_fast_path(tmp_path):
    """Step lines carry no prefilter keyword: the literal scans find them, 32 per rank."""
    from ncclsleuth.parse.lines import STEP_SAMPLES_PER_RANK

    p = tmp_path / "rank0.log"
    p.write_text("".join(f"iter {i}: loss 1.0, time: {1000 + i}.0ms\n" for i in range(100)))
    fp = FileParser(str(p), ShapeCache(), keep_text=False, use_catalog=False)
    evs = [e for first, block in BlockReader(InputFile(str(p))) for e in fp.parse_block(first, block)]
    assert [(e.kind, e.line, e.ms) for e in evs][:2] == [("step_time", 1, 1000.0), ("step_time", 2, 1001.0)]
    assert len(evs) == STEP_SAMPLES_PER_RANK


def test_step_lines_read_one_by_one_are_not_counted_twice(tmp_path):
    """After nccl-tests' header every line is read one by one (its rows are only numbers); the
    step scan of the block must not take those step lines a second time."""
    header = "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20\n"
    p = tmp_path / "rank0.log"
    p.write_text(header + "".join(f"iter {i}: loss 1.0, time: {1000 + i}.0ms\n" for i in range(10)))
    fp = FileParser(str(p), ShapeCache(), keep_text=False, use_catalog=False)
    evs = [e for first, block in BlockReader(InputFile(str(p))) for e in fp.parse_block(first, block)]
    steps = [(e.line, e.ms) for e in evs if e.kind == "step_time"]
    assert steps == [(i + 2, 1000.0 + i) for i in range(10)]


def test_step_scan_skips_exactly_the_lines_the_main_loop_handled(tmp_path):
    """The step scan leaves the lines the main loop parsed (a prefilter keyword in them: "GPU0",
    an NCCL INFO line) and takes the others, each once, without running the prefilter again:
    "GPU1" is no keyword, "GPU0" is one (a keyword whose digit matters)."""
    from ncclsleuth.parse.anchors import PREFILTER

    lines = [
        "iter 1: loss 1.0, time: 100.0ms",
        "GPU0 iter 2: loss 1.0, time: 101.0ms",
        "GPU1 iter 3: loss 1.0, time: 102.0ms",
        "node1:7:7 [0] NCCL INFO iter 4: loss 1.0, time: 103.0ms",
        "noise between",
        "iter 6: loss 1.0, time: 105.0ms",
    ]
    assert [PREFILTER.search(s) is not None for s in lines] == [False, True, False, True, False, False]
    p = tmp_path / "rank0.log"
    p.write_text("\n".join(lines) + "\n")
    fp = FileParser(str(p), ShapeCache(), keep_text=False, use_catalog=False)
    evs = [e for first, block in BlockReader(InputFile(str(p))) for e in fp.parse_block(first, block)]
    # the main loop's (its keyword lines) first, then the scan's: each line once
    assert [(e.line, e.ms) for e in evs if e.kind == "step_time"] == \
        [(2, 101.0), (4, 103.0), (1, 100.0), (3, 102.0), (6, 105.0)]


def test_common_first_keywords_in_short_and_long_ranges_keep_their_lines(tmp_path):
    """A block holding "terminate called" / ": error: " is scanned with the rare-first prefilter
    and str.find over long ranges, with the full one over ranges under SHORT_RANGE (between two
    NCCL INFO lines close together, or a short tail): each such line must reach the model
    wherever it stands, as on the line path."""
    from ncclsleuth.parse.anchors import SHORT_RANGE

    info = "node1:7:7 [0] NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/IPC\n"
    noise = "iter 12: loss 2.31, time: 41.2ms, tokens/s 9000\n"
    # lines whose only keyword is the common-first literal ("DistBackendError" would be another)
    terminate = "terminate called after throwing an instance of 'std::bad_alloc'\n"
    srun = "srun: error: node07: task 3: Exited with exit code 1\n"
    long_run = noise * (2 * SHORT_RANGE // len(noise))
    text = (info + terminate + info                                  # a short range between INFO lines
            + long_run + srun + long_run + terminate + info          # a long one, literals inside
            + srun + info                                            # short again
            + long_run + terminate + srun + long_run + terminate     # a long tail after the last INFO line
            + info + srun + terminate)                               # a short tail
    path = tmp_path / "rank0.log"
    path.write_text(text)
    model, _, _ = parse_one(InputFile(str(path)), False, ShapeCache())
    kept = sorted((kind, e.line) for kind in ("cpp_abort", "warn_text") for e in model.events.get(kind, []))
    assert kept == sorted(x for x in _slow(path) if x[0] in ("cpp_abort", "warn_text"))
    wanted = [i for i, line in enumerate(text.split("\n"), 1) if line.startswith(("terminate called", "srun: error:"))]
    assert len(wanted) == 9 and sorted(n for _, n in kept) == wanted
