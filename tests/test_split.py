"""``--jobs N`` parses a big file in pieces (byte ranges) and the report is the unsplit one.

The pieces are forced tiny here (blocks of a few hundred bytes, a piece per block or two),
so that piece boundaries land inside tracebacks, watchdog blocks, nccl-tests tables, tool
blocks and hard-wrapped messages: every report must be byte for byte the one of
``--jobs 1`` reading the file whole with the same block size.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from _jobs import generator
from conftest import CORPUS, FIXTURES, require_shared

from ncclsleuth import api
from ncclsleuth.ingest import blocks
from ncclsleuth.ingest.blocks import BlockReader, RangeReader
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.parallel import split
from ncclsleuth.parallel.split import Assembler
from ncclsleuth.renderers import json_out

ROOT = Path(__file__).resolve().parent.parent
#: tiny blocks and pieces: boundaries every few lines
BLOCK = 256


@pytest.fixture(scope="module")
def rules():  # type: ignore[no-untyped-def]
    return api.load_rules(api.Options())


@pytest.fixture
def tiny(monkeypatch):  # type: ignore[no-untyped-def]
    """Blocks of BLOCK bytes, as many pieces as blocks allow; counts what the assembler did."""
    monkeypatch.setattr(blocks, "BLOCK", BLOCK)
    monkeypatch.setattr(split, "PIECES_PER_JOB", 10_000)
    seen = {"files": 0, "pieces": 0, "reparsed": 0}
    done = Assembler.done

    def counted(self):  # type: ignore[no-untyped-def]
        seen["files"] += 1
        seen["pieces"] += len(self.spans)
        seen["reparsed"] += self.reparsed
        return done(self)

    monkeypatch.setattr(Assembler, "done", counted)
    return seen


def _report(paths: list[str], rules, jobs: int, piece: int | None = None) -> str:  # type: ignore[no-untyped-def]
    built = api.build(paths, api.Options(jobs=jobs, piece_bytes=piece, shared_cache=False))
    report = api.diagnose(built.model, rules, [n.to_dict() for n in built.notices])
    report.files_read = built.files_read
    return json_out.render(report)


def _same(paths: list[str], rules, piece: int = BLOCK) -> None:  # type: ignore[no-untyped-def]
    whole = _report(paths, rules, 1)
    cut = _report(paths, rules, 2, piece)
    assert cut == whole, paths


def _inputs(root: Path) -> list[Path]:
    """Each fixture that is one file or one folder of files (dumps and archives included:
    those are simply not cut)."""
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix not in (".yaml", ".json", ".md", ".py") and p.stat().st_size >= 2 * BLOCK:
            out.append(p)
    return out


def test_every_fixture_file_reports_the_same_in_pieces(tiny, rules):
    files = _inputs(FIXTURES)
    assert len(files) > 50
    for p in files:
        _same([str(p)], rules)
    assert tiny["files"] > 100 and tiny["pieces"] > 5 * tiny["files"]
    assert tiny["reparsed"] > 0  # some boundaries fell where a meaning spans lines


def test_fixture_folders_report_the_same_with_their_big_files_in_pieces(tiny, rules):
    folders = sorted({p.parent for p in _inputs(FIXTURES)} - {FIXTURES})
    folders = [d for d in folders if sum(1 for f in d.iterdir() if f.is_file()) > 1]
    assert len(folders) > 20
    for d in folders:
        _same([str(d)], rules)  # big files in pieces, small ones in runs, dumps whole: in input order
    assert tiny["files"] > 20


def test_corpus_logs_report_the_same_in_pieces(tiny, rules):
    logs = sorted(require_shared(CORPUS, "the shared corpus").glob("cases/*/log.txt"))
    assert len(logs) > 30
    for p in logs:
        _same([str(p)], rules)
    assert tiny["files"] > 20


def test_generated_one_file_jobs_report_the_same_in_pieces(tiny, rules, tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "BLOCK", 4096)  # a bigger job: ~100 pieces each
    gen = generator()
    for inject in ("desync", "ib_error", "socket_fallback", "missing_rank"):
        out = tmp_path / inject
        gen.generate(gen.build_parser().parse_args(["--ranks", "32", "--per-host", "8", "--channels", "2",
                                                    "--layout", "one-file", "--inject", inject, "--seed", "5",
                                                    "--noise-per-rank", "30", "--out", str(out)]))
        _same([str(out / "job.log")], rules, 4096)
    assert tiny["files"] == 4 and tiny["pieces"] > 100


def _shapes():  # type: ignore[no-untyped-def]
    name = "ncclsleuth_bench_shapes"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "shapes.py")
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return sys.modules[name]


def test_shapes_in_one_interleaved_file_report_the_same_in_pieces(tiny, rules, tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "BLOCK", 1024)
    gen = _shapes()
    variants = [("silent", ""), ("out_of_data", ""), ("other_collective", "op"), ("other_collective", "size"),
                ("died_first", "error"), ("died_first", "sigkill"), ("rank0_busy", ""), ("straggler_node", ""),
                ("dup_gpu", "warn"), ("dup_gpu", "nowarn")]
    assert {s for s, _ in variants} == set(gen.SHAPES)
    for shape, variant in variants:
        out = tmp_path / f"{shape}-{variant}"
        gen.make(gen.build_parser().parse_args(["--shape", shape, "--variant", variant, "--ranks", "16",
                                                "--layout", "one-file", "--out", str(out)]))
        _same([str(out)], rules, 1024)  # the folder: job.log in pieces, the agents' files whole
    assert tiny["files"] == len(variants)


# --------------------------------------------------------------------------- the boundaries


def _traceback_log(tmp_path: Path) -> tuple[Path, int, int]:
    """A log whose Python traceback spans many blocks, then a WARN well after it."""
    lines = [f"host1:100:100 [0] NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for i in range(40)]
    tb_start = len(lines) + 1
    lines.append("[rank0]: Traceback (most recent call last):")
    for i in range(30):
        lines.append(f'[rank0]:   File "/work/train_{i}.py", line {i + 1}, in step_{i}')
        lines.append(f"[rank0]:     loss = model.forward_{i}(batch)")
    lines.append("[rank0]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error")
    lines += [f"host1:100:100 [0] NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for i in range(60)]
    lines.append("host1:100:100 [0] NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129")
    warn = len(lines)
    lines += [f"host1:100:100 [0] NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for i in range(20)]
    p = tmp_path / "tb.log"
    p.write_text("\n".join(lines) + "\n")
    return p, tb_start, warn


def test_a_boundary_inside_a_traceback_is_parsed_again_here(tiny, rules, tmp_path):
    path, tb_start, warn = _traceback_log(tmp_path)
    sp = split.spans(str(path), path.stat().st_size, 1000)
    inside = [s.first for s in sp if tb_start < s.first <= tb_start + 61]
    assert len(inside) >= 3  # pieces start inside the traceback
    _same([str(path)], rules)
    assert tiny["reparsed"] >= 1
    model = api.build([str(path)], api.Options(jobs=2, piece_bytes=BLOCK)).model
    (tb,) = model.events["traceback"]
    assert (tb.start_line, tb.line, tb.frames) == (tb_start, tb_start + 61, 30)
    assert tb.exc_type == "RuntimeError"


def test_evidence_after_a_boundary_has_its_exact_line_number(tiny, rules, tmp_path):
    path, _, warn = _traceback_log(tmp_path)
    sp = split.spans(str(path), path.stat().st_size, 1000)
    assert any(1 < s.first < warn for s in sp)  # the WARN comes after boundaries
    model = api.build([str(path)], api.Options(jobs=2, piece_bytes=BLOCK)).model
    evs = [e for e in model.error_events() if "completion with error" in e.text]
    assert [(e.line, e.text) for e in evs] == [(warn, path.read_text().split("\n")[warn - 1])]


def test_piece_first_line_numbers_count_the_newlines_before(tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "BLOCK", 1024)
    p = tmp_path / "n.log"
    p.write_bytes(b"".join(b"line %d " % i + b"x" * (i * 37 % 300) + b"\n" for i in range(3000)))
    data = p.read_bytes()
    sp = split.spans(str(p), len(data), 40)
    assert len(sp) > 20 and sp[0].start == 0 and sp[-1].end == len(data)
    for a, b in zip(sp, sp[1:]):
        assert a.end == b.start and data[b.start - 1:b.start] == b"\n"
        assert b.first == data[:b.start].count(b"\n") + 1


def _numbered(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(blocks, "BLOCK", 1024)
    p = tmp_path / "n.log"
    p.write_bytes(b"".join(b"line %d " % i + b"x" * (i * 37 % 300) + b"\n" for i in range(3000)))
    data = p.read_bytes()
    sp, firsts = split.cut(str(p), len(data), 40)
    return p, data, sp, firsts


def test_piece_first_lines_found_in_any_order_are_the_counted_ones(tmp_path, monkeypatch):
    """``split.cut`` counts nothing: each piece's first line is counted when it is asked for,
    from the nearest piece start known, in whatever order the processes ask."""
    p, data, sp, firsts = _numbered(tmp_path, monkeypatch)
    assert [s.first for s in sp] == [1] + [0] * (len(sp) - 1)
    want = [data[:s.start].count(b"\n") + 1 for s in sp]
    for k in (len(sp) - 1, 3, 7, 2, 0, len(sp) // 2):
        assert firsts.first(k) == want[k]
    assert [firsts.first(k) for k in range(len(sp))] == want


def test_a_piece_read_to_its_end_tells_where_the_next_starts(tmp_path, monkeypatch):
    p, data, sp, firsts = _numbered(tmp_path, monkeypatch)
    reader = RangeReader(InputFile(str(p)), sp[0].start, sp[0].end, firsts.first(0))
    list(reader)
    firsts.learn(1, reader.lines + 1)
    monkeypatch.setattr(blocks, "_newlines", lambda *a: pytest.fail("counted although it was told"))
    assert firsts.first(1) == data[:sp[1].start].count(b"\n") + 1


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork here")
def test_first_lines_found_by_a_forked_worker_are_known_here(tmp_path, monkeypatch):
    """The table is shared memory: what a worker found, the lead does not count again."""
    import os

    p, data, sp, firsts = _numbered(tmp_path, monkeypatch)
    k = len(sp) - 1
    pid = os.fork()
    if pid == 0:  # the worker: count up to the last piece, then leave at once
        os._exit(0 if firsts.first(k) == data[:sp[k].start].count(b"\n") + 1 else 1)
    assert os.waitpid(pid, 0)[1] == 0
    monkeypatch.setattr(blocks, "_newlines", lambda *a: pytest.fail("counted again in the lead"))
    assert [firsts.first(i) for i in range(len(sp))] == [data[:s.start].count(b"\n") + 1 for s in sp]


def test_pieces_read_the_blocks_the_whole_file_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "BLOCK", 512)
    p = tmp_path / "b.log"
    p.write_bytes(b"".join(b"%d " % i + b"y" * (i * 53 % 700) + b"\n" for i in range(2000)))
    whole = list(BlockReader(InputFile(str(p))))
    sp = split.spans(str(p), p.stat().st_size, 30)
    got = [b for s in sp for b in RangeReader(InputFile(str(p)), s.start, s.end, s.first)]
    assert got == whole


def test_compressed_and_small_files_are_not_cut(tmp_path):
    import gzip

    big = tmp_path / "big.log"
    big.write_bytes(b"host1:1:1 [0] NCCL INFO Using network IB\n" * 2000)
    gz = tmp_path / "big.log.gz"
    gz.write_bytes(gzip.compress(big.read_bytes() * 4))
    assert split.plan([InputFile(str(gz))], 2, 1024) is None
    assert split.plan([InputFile(str(big))], 2, big.stat().st_size) is None  # not twice the piece size
    items = split.plan([InputFile(str(big))], 2, 4096)
    assert items is not None and {i[0] for i in items} == {"piece"}
    assert split.plan([InputFile(str(big))], 1, 4096) is None


def test_api_knows_the_piece_size_without_importing_the_engine():
    assert api._PIECE_BYTES == split.PIECE_BYTES


def test_a_tool_block_read_back_across_a_boundary_is_parsed_again_here(tiny, rules, tmp_path):
    """ibstatus' ``phys state`` line opens its block and the reader reads the adapter's header
    and port state back: at the start of a piece, those lines are in the piece before."""
    head = ("Infiniband device 'mlx5_0' port 1 status:\n\tdefault gid:\t fe80:0000:0000:0000:b859:9f03:00d4:0a4e\n"
            "\tbase lid:\t 0x0\n\tsm lid:\t\t 0x0\n\tstate:\t\t 2: INIT\n")
    opener = "\tphys state:\t 5: LinkUp\n"
    rest = "\trate:\t\t 200 Gb/sec (4X HDR)\n\tlink_layer:\t InfiniBand\n\n"
    filler = "host1:100:100 [0] NCCL INFO Using network IB\n" * 8
    at = 2 * BLOCK - 4  # the opener starts here and crosses a read boundary: a block starts at it
    pad = at - len(filler) - len(head) - 1
    text = filler + "x" * pad + "\n" + head + opener + rest + filler * 4
    assert text.index(opener) == at
    path = tmp_path / "ib.log"
    path.write_text(text)
    assert any(s.start == at for s in split.spans(str(path), len(text), 1000))
    _same([str(path)], rules)
    assert tiny["reparsed"] >= 1
    model = api.build([str(path)], api.Options(jobs=2, piece_bytes=BLOCK)).model
    state_line = text[:at].count("\n")
    assert [(e.device, e.state, e.line) for e in model.events["ib_port"]] == [("mlx5_0", "Initializing", state_line)]


def test_cut_long_lines_and_bad_bytes_are_said_once_for_the_file(tiny, rules, tmp_path):
    """A line over the line cap and invalid UTF-8 in several pieces: the notices of the whole
    file (the first cut line by its number, then the counts), as the unsplit read says them."""
    from ncclsleuth.ingest.decode import MAX_LINE_BYTES

    line = b"host1:100:100 [0] NCCL WARN NET/IB : Got completion with error 12, opcode 0\n"
    body = line * 40 + b"x" * (MAX_LINE_BYTES + 10) + b"\n" + b"caf\xe9 ok\n" + line * 40
    path = tmp_path / "cut.log"
    path.write_bytes(body + b"y" * (MAX_LINE_BYTES + 5) + b"\n" + b"\xff\xfe bad\n" + line * 40)
    _same([str(path)], rules)
    notes = [n.message for n in api.build([str(path)], api.Options(jobs=2, piece_bytes=BLOCK)).notices]
    assert notes == [n.message for n in api.build([str(path)], api.Options(jobs=1)).notices]
    assert sum("is longer than" in n for n in notes) == 1 and any("2 lines longer" in n for n in notes)
    assert tiny["pieces"] > 10


def test_a_file_without_line_ends_is_searched_for_piece_starts_a_bounded_way(tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "BLOCK", 256)
    p = tmp_path / "flat.log"
    p.write_bytes(b"z" * (256 * 1000))
    assert len(split.spans(str(p), p.stat().st_size, 8)) == 1  # no line end: one piece
    with open(p, "rb") as f:
        assert blocks.block_start(f, 0, 256) is None
        assert f.tell() <= (blocks._SEEK_BLOCKS + 1) * 256  # not read to the end


def test_a_replayed_piece_is_not_held_while_the_next_is_parsed(tiny, tmp_path, monkeypatch):
    """Once the lead has replayed a piece its recorded events are the model's or garbage: nothing
    holds the piece while the next one is parsed (zip's reused result pair held it, and with it a
    piece's worth of events the model does not keep, ~5 MiB of the 8,000-rank file's peak)."""
    import weakref

    from ncclsleuth.ingest.sources import discover

    log = tmp_path / "job.log"
    log.write_text("".join(f"node1:10:11 [0] NCCL INFO comm 0x{i:x} rank 0 nranks 2 cudaDev 0 busId 1000 "
                           f"commId 0x{i:x} - Init START\nstep {i} loss 1.0\n" for i in range(40)))
    (inp,) = discover([str(log)]).files
    items = split.plan([inp], 2, piece_bytes=BLOCK)
    assert items is not None and len(items) > 3
    made: list[weakref.ref] = []
    alive: list[int] = []
    work = split._work

    def serial(n, fn, *a, **k):  # type: ignore[no-untyped-def]  # the engine's order, in this process
        for i in range(n):
            alive.append(sum(r() is not None for r in made))  # pieces before i: all replayed
            yield fn(i)  # no local of its own: as forked._collect yields ready.pop(k)

    def recorded(item, cache, drop):  # type: ignore[no-untyped-def]
        got = work(item, cache, drop)
        made.append(weakref.ref(got))
        return got

    monkeypatch.setattr(split, "run_in_order", serial)
    monkeypatch.setattr(split, "_work", recorded)
    (model, _, _), = split.split_results(items, 2, False)
    assert model.comms and alive == [0] * len(items)


def test_the_tail_of_a_file_in_pieces_is_kept_by_offset_as_the_whole_files(rules, tmp_path, monkeypatch):
    """The end blocks the assembler reads again for the file's tail are kept as the whole file's
    parser keeps them: the newest ``TAIL_CHARS`` as text, the older ones as their offsets, read
    once more one at a time by the scan.  Held as text, an 8,000-rank file's 8 M characters of
    tail were ~20 MB more at the peak of its ``--jobs 2`` build than of its ``--jobs 1`` one."""
    from ncclsleuth.parse.lines import FileParser
    from ncclsleuth.parse.tail import TAIL_CHARS, Kept

    log = tmp_path / "job.log"
    log.write_text("".join(f"[rank{r}]: RuntimeError: NCCL communicator was aborted on rank {r}.\n" for r in range(8))
                   + "".join(f"[rank{i % 8}]: step {i} loss 1.0\nnode1:11:11 [0] NCCL INFO Channel 00/0 : "
                             f"{i % 8}[{i % 8}] -> 1[1] via P2P/IPC\n" for i in range(40_000)))
    given: list[Kept] = []
    end_blocks = FileParser.end_blocks

    def seen(self, blocks):  # type: ignore[no-untyped-def]
        given.append(blocks)
        end_blocks(self, blocks)

    monkeypatch.setattr(FileParser, "end_blocks", seen)
    cut = _report([str(log)], rules, 2, 256 << 10)
    assert len(given) == 1 and isinstance(given[0], Kept)
    items = given[0]._items
    as_text = [i for i, (_, k, _, _) in enumerate(items) if not isinstance(k, int)]
    assert len(items) > 20 and as_text == list(range(as_text[0], len(items)))  # the older ones: offsets
    assert sum(n for _, _, n, _ in items[as_text[0]:]) < TAIL_CHARS + (64 << 10)
    assert cut == _report([str(log)], rules, 1)


def test_a_piece_is_replayed_op_by_op_each_freed_once_done():
    """The lead replays a piece's recorded ops taking each out of the piece: an event the model does
    not keep is freed as soon as it has been added, not held with the whole piece to its end (the
    lead's RSS after the 8,000-rank file's ``--jobs 2`` build: ~106 -> ~100 MB)."""
    import weakref

    from ncclsleuth.parse.pieces import replay

    class Ev:  # an event nothing keeps
        kind = "comm_info"

    ops = [Ev() for _ in range(5)]
    refs = [weakref.ref(op) for op in ops]
    alive_at_add: list[int] = []

    class Model:  # keeps nothing it is given
        def add(self, ev):  # type: ignore[no-untyped-def]
            alive_at_add.append(sum(r() is not None for r in refs))

        touch = bind = conn_seen = add_conn_first = None

    replay(Model(), "job.log", ops, lambda evs: evs)  # type: ignore[arg-type]
    assert alive_at_add == [5, 4, 3, 2, 1]  # the one being added and those still to come
    assert ops == [] and all(r() is None for r in refs)


class _Counted:
    """An event nothing keeps that counts how many of its kind are alive (made by unpickling)."""

    alive = 0
    kind = "comm_info"

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return _counted, ()

    def __del__(self) -> None:
        _Counted.alive -= 1


def _counted() -> _Counted:
    _Counted.alive += 1
    return _Counted()


def test_a_shipped_piece_is_read_back_a_chunk_of_records_at_a_time(monkeypatch):
    """A worker's piece crosses the pipe with its records pickled in chunks, and the lead reads one
    chunk back at a time as it replays them: a big file's piece (~100,000 records) is never alive
    whole in the lead (its traced peak on a 460 MB file: 108 MB against --jobs 1's 69 MB)."""
    import pickle

    from ncclsleuth.parse import pieces
    from ncclsleuth.parse.lines import Carry

    monkeypatch.setattr(pieces, "OPS_CHUNK", 3)
    made = [_counted() for _ in range(7)]
    piece = pieces.Piece(0, made, Carry(), False, False, False, False, [], 7, (0, 0, 0))
    data = pickle.dumps(piece, protocol=pickle.HIGHEST_PROTOCOL)
    assert type(piece.ops) is list  # pickling leaves the worker's piece as it was
    del piece, made
    assert _Counted.alive == 0
    got = pickle.loads(data)
    assert type(got.ops) is pieces.OpChunks and len(got.ops.chunks) == 3
    assert _Counted.alive == 0  # nothing read back yet
    alive_at_add: list[int] = []

    class Model:  # keeps nothing it is given
        def add(self, ev):  # type: ignore[no-untyped-def]
            alive_at_add.append(_Counted.alive)

        touch = bind = conn_seen = add_conn_first = None

    pieces.replay(Model(), "job.log", got.ops, lambda evs: evs)  # type: ignore[arg-type]
    assert alive_at_add == [3, 2, 1, 3, 2, 1, 1]  # a chunk at a time, each record freed once done
    assert _Counted.alive == 0 and got.ops.chunks == []
