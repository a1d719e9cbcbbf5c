"""bench/floors.py, what stands between the 8k job and issue 16's targets: the line classes it
cuts a log into, and its measure of what ``--jobs 2`` pays per piece, on a small job."""
from __future__ import annotations

import gc
import importlib.util
import os
from pathlib import Path

import pytest
from _jobs import generator

from ncclsleuth.ingest import blocks
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.parallel import split

ROOT = Path(__file__).resolve().parents[1]


def _floors():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ncclsleuth_bench_floors", ROOT / "bench" / "floors.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CONN = b"node1:200:300 [1] NCCL INFO Channel 04/0 : 5[5] -> 6[6] via P2P/IPC/read\n"
NET = b"node1:200:300 [1] NCCL INFO Channel 14/0 : 3735[7] -> 3736[0] [send] via NET/IB/7/GDRDMA\n"
RING = b"node1:200:300 [1] NCCL INFO Channel 12/24 : 0 1 2 3 4 5 6 7\n"
INFO = b"node1:200:300 [1] NCCL INFO Connected all rings\n"
NOISE = b"iter 12: loss 1.5980, time: 4372.87ms\n"
QUOTE = b"[rank3]: Channel 04/0 : 5[5] -> 6[6] said the log\n"  # no NCCL INFO marker: not one


def test_connection_lines_are_told_from_ring_dumps_and_other_text():
    f = _floors()
    assert f.is_conn(CONN) and f.is_conn(NET)
    assert not f.is_conn(RING) and not f.is_conn(INFO) and not f.is_conn(NOISE) and not f.is_conn(QUOTE)
    assert not f.is_conn(b"node1:200:300 [1] NCCL INFO Channel 04/0 : [5] -> 6[6]\n")  # no source rank digits


def test_derived_logs_keep_their_line_class_and_follow_the_source(tmp_path):
    f = _floors()
    log = tmp_path / "job.log"
    log.write_bytes(CONN + NOISE + RING + NET + INFO + QUOTE)
    paths = f.derived(str(log), str(tmp_path / "out"))
    assert set(paths) == {"no-connection-lines", "no-nccl-info-lines", "nccl-info-lines-only"}
    read = {name: Path(p).read_bytes() for name, p in paths.items()}
    assert read["no-connection-lines"] == NOISE + RING + INFO + QUOTE
    assert read["no-nccl-info-lines"] == NOISE + QUOTE
    assert read["nccl-info-lines-only"] == CONN + RING + NET + INFO
    # the same source: not written again; a changed one: written again
    stamp = os.stat(paths["no-nccl-info-lines"]).st_mtime_ns
    assert f.derived(str(log), str(tmp_path / "out")) == paths
    assert os.stat(paths["no-nccl-info-lines"]).st_mtime_ns == stamp
    log.write_bytes(NOISE + NOISE)
    f.derived(str(log), str(tmp_path / "out"))
    assert Path(paths["no-nccl-info-lines"]).read_bytes() == NOISE + NOISE
    assert Path(paths["nccl-info-lines-only"]).read_bytes() == b""


def test_every_piece_is_parsed_shipped_and_replayed_once(tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "BLOCK", 4096)
    gen = generator()
    out = tmp_path / "job"
    gen.generate(gen.build_parser().parse_args(["--ranks", "32", "--per-host", "8", "--channels", "2",
                                                "--layout", "one-file", "--inject", "desync", "--seed", "5",
                                                "--noise-per-rank", "30", "--out", str(out)]))
    log = str(out / "job.log")
    size = os.path.getsize(log)
    piece = size // 10
    assert gc.isenabled()
    got = _floors().child_pieces(log, piece)
    assert gc.isenabled()  # paused while it measured, as analyze does, and on again
    items = split.plan([InputFile(log)], 2, piece)
    assert items is not None and got["pieces"] == sum(1 for it in items if it[0] == "piece") >= 8
    with open(log, "rb") as fh:
        assert got["lines"] == fh.read().count(b"\n")  # the assembled model took every line
    assert got["bytes"] > 0
    for what in ("split_pass", "parse", "pickle", "unpickle", "replay", "tail"):
        assert got[what] >= 0.0


def test_a_small_log_is_measured_whole_and_a_folder_refused(tmp_path, capsys, monkeypatch):
    f = _floors()
    monkeypatch.setattr(f, "OUT", str(tmp_path / "out"))
    log = tmp_path / "job.log"
    log.write_bytes((CONN + NOISE + RING + INFO) * 50)
    assert f.main(["--log", str(log), "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "| the log | 200 |" in out and "| nccl-info-lines-only | 150 |" in out
    assert "The log is under 17 MB: `--jobs 2` parses it whole" in out  # no split: no piece costs
    assert os.path.exists(tmp_path / "out" / "no-connection-lines.log")
    with pytest.raises(SystemExit):
        f.main(["--log", str(tmp_path)])
    assert "not a file" in capsys.readouterr().err


def test_what_the_model_of_a_small_job_holds(tmp_path):
    gen = generator()
    out = tmp_path / "job"
    gen.generate(gen.build_parser().parse_args(["--ranks", "16", "--per-host", "8", "--channels", "2",
                                                "--layout", "one-file", "--inject", "desync", "--seed", "5",
                                                "--noise-per-rank", "30", "--out", str(out)]))
    assert gc.isenabled()
    # the caches warm first, as the script's runs before it warm them: a cold cache folder's first
    # build compiles and keeps what a tiny job's model does not reach (functions, patterns), and
    # the test then depended on whether a test before it had warmed the session's folder
    _floors().child_memory(str(out / "job.log"))
    gc.collect()  # the warm-up's model gone before the measured build's snapshot
    got = _floors().child_memory(str(out / "job.log"))
    assert gc.isenabled()
    assert got["ranks"] == 16 and got["rss_build"] > 0
    assert 0 < got["events"] < got["objects"]  # what the build added: its events among the rest
    # the kept events' line numbers and references; strings are a difference of two snapshots of a
    # warm process (a cache's strings given up during the build count against it): no sign to assert
    assert got["ints"] > 0
    assert any(name in ("CommInit", "InitTimings", "WatchdogTimeout") for name, _ in got["top"]), got["top"]
    assert got["rule_step_peak"] >= got["rule_step_kept"] > 0
    by_kind = {kind: (n, kept, mb) for kind, n, kept, mb in got["by_kind"]}
    # each of the 16 ranks' connection lines are counted, never kept as events
    assert by_kind["channel_conn"][0] > 16 and by_kind["channel_conn"][1] == 0
    # the watchdog lines of the desync are kept whole, one event a line
    n, kept, mb = by_kind["watchdog_timeout"]
    assert 0 < kept <= n and mb > 0
    # an Init START/COMPLETE line is read into its rank's state (its place), not kept as an event
    assert by_kind["comm_init"] == (32, 0, 0.0)


def test_the_census_lists_lines_and_the_events_the_build_left_by_kind():
    got = _floors().census({"ring": 24, "trees": 16, "pg_abort": 4}, {"trees": (3, 600), "pg_abort": (5, 1000)},
                           {"pg_abort": (1, 200)})
    assert got == [("ring", 24, 0, 0.0), ("trees", 16, 3, 0.0006), ("pg_abort", 4, 4, 0.0008)]


def test_lines_are_told_by_kind_for_the_cost_of_each():
    f = _floors()
    assert f.kind_of(CONN) == f.kind_of(NET) == "connection"
    assert f.kind_of(RING) == "Channel_"  # a ring dump: an INFO message like any other
    assert f.kind_of(INFO) == "Connected_all"
    assert f.kind_of(NOISE) == f.kind_of(QUOTE) == "not NCCL INFO"
    assert f.kind_of(b"node1:200:300 [1] NCCL INFO Init timings - ncclCommInitRank: rank 3 nranks 8\n") \
        == "Init_timings"
    assert f.kind_of(b"node1:200:300 [1] NCCL INFO 24 coll channels, 24 collnet channels\n") == "_coll"


def test_each_kind_of_line_gets_a_log_of_its_own_and_its_build_time(tmp_path):
    f = _floors()
    log = tmp_path / "job.log"
    log.write_bytes(CONN * 30 + NOISE * 50 + INFO * 19 + RING)  # 100 lines, the ring dump 1 of them
    kinds = f.by_kind(str(log), str(tmp_path / "kinds"), share=0.05)
    assert list(kinds) == ["not NCCL INFO", "connection", "Connected_all"]  # most lines first; the ring dump under 5%
    for kind, (path, n) in kinds.items():
        lines = Path(path).read_bytes().splitlines(keepends=True)
        assert len(lines) == n and {f.kind_of(x) for x in lines} == {kind}
    seconds = f.child_kinds(str(tmp_path / "kinds"), "1")
    assert gc.isenabled()  # the collector as it was
    assert set(seconds) == {Path(p).name for p, _ in kinds.values()}
    assert all(isinstance(s, float) and s > 0 for s in seconds.values())


def test_more_cores_are_bounded_by_what_the_lead_process_does_alone():
    f = _floors()
    phases = {"import": 0.04, "rules": 0.02, "diagnose": 1.3, "render": 0.05, "build": 7.6}
    pieces = {"split_pass": 0.001, "tail": 0.2, "parse": 4.68, "pickle": 0.72, "unpickle": 0.75, "replay": 1.63}
    once = 0.04 + 0.02 + 1.3 + 0.05 + 0.001 + 0.2
    # two cores: the even share of every piece's parse and replay, half of them shipped
    assert f.least_with(2, phases, pieces) == pytest.approx(once + (4.68 + 1.63 + (0.72 + 0.75) / 2) / 2)
    # four: the lead's replay of every piece and unpickling of the three quarters shipped outweigh
    # an even share (1.85 s); more processes would ship it more to unpickle, so 64 cores do no better
    assert f.least_with(4, phases, pieces) == pytest.approx(once + 1.63 + 0.75 * 3 / 4)
    assert f.least_with(64, phases, pieces) == f.least_with(4, phases, pieces)
    walls = [f.least_with(n, phases, pieces) for n in (2, 3, 4, 8, 16, 64)]
    assert walls == sorted(walls, reverse=True)
    assert walls[-1] > once + 1.63  # never below the replay
    # a lead whose replay outweighs the even share already at two cores is bounded by it there too
    heavy = dict(pieces, replay=9.0, parse=1.0)
    assert f.least_with(2, phases, heavy) == pytest.approx(once + 9.0 + 0.75 / 2)
