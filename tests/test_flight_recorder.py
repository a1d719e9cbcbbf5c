"""Flight Recorder dumps as inputs: found by content, read safely, every format, the rules.

The real dumps are PyTorch 2.13.0's (fixtures/real/fr-*, gloo, 4 ranks; each case.yaml
says what was injected and who the culprit is); the other formats are constructed by
hand (fixtures/fr-constructed, labelled so)."""
from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ncclsleuth import api
from ncclsleuth.ingest import dumps
from ncclsleuth.ingest.memory import MemoryInput
from ncclsleuth.ingest.sources import InputFile
from ncclsleuth.parse.frdump import normalise, rank_from_name
from ncclsleuth.renderers import render

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"
MADE = ROOT / "fixtures" / "fr-constructed"


def _analyze(*paths: Path | str, **kw) -> api.Report:
    return api.analyze([str(p) for p in paths], api.Options(**kw))


def _fr(report: api.Report) -> list:
    return [f for f in report.findings if f.rule_id.startswith("FR")]


# --------------------------------------------------------------------------- hostile pickles


class _System:
    def __init__(self, cmd: str) -> None:
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


class _Eval:
    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        import builtins

        return (builtins.eval, (self.code,))


class _Popen:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv

    def __reduce__(self):
        return (subprocess.Popen, (self.argv,))


def _payloads(marker: Path) -> dict[str, bytes]:
    """Pickles that create ``marker`` when unpickled with ``pickle.load``, each wrapped in
    what looks like a dump (the attack rides inside an entry)."""
    def as_dump(obj: object, protocol: int) -> bytes:
        return pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [{"frames": obj}]}, protocol=protocol)

    touch = f"touch {marker}"
    return {
        "os.system via __reduce__ (protocol 2, GLOBAL)": as_dump(_System(touch), 2),
        "os.system via __reduce__ (protocol 4, STACK_GLOBAL)": as_dump(_System(touch), 4),
        "builtins.eval (protocol 5)": as_dump(_Eval(f"open({str(marker)!r}, 'w').write('pwned')"), 5),
        "subprocess.Popen (protocol 3)": as_dump(_Popen(["touch", str(marker)]), 3),
        "os.system, bare (protocol 0 text pickle)": pickle.dumps(_System(touch), protocol=0),
    }


def _wait_gone(marker: Path) -> bool:
    """Popen runs asynchronously: give a (wrongly) started child time to create the file."""
    time.sleep(0.3)
    return not marker.exists()


@pytest.mark.parametrize("name", list(_payloads(Path("/x")).keys()))
def test_a_hostile_pickle_is_refused_and_runs_nothing(tmp_path, name):
    marker = tmp_path / "pwned"
    payload = _payloads(marker)[name]
    # control: the payload is real, plain pickle.load runs it
    pickle.loads(payload)
    time.sleep(0.3)
    assert marker.exists(), "the control failed: the payload does not do what the test assumes"
    marker.unlink()

    dump = tmp_path / "nccl_trace_rank_0"
    dump.write_bytes(payload)
    report = _analyze(dump)
    assert _wait_gone(marker), "unpickling the dump ran its code"
    if payload.startswith(b"\x80"):
        notes = [n for n in report.notices if n["path"] == str(dump)]
        assert len(notes) == 1 and "pickle refused" in notes[0]["message"] and "nothing in it was run" in \
            notes[0]["message"]
        assert any(w in notes[0]["message"] for w in ("os.system", "posix.system", "builtins.eval",
                                                      "subprocess.Popen")), notes[0]["message"]
    assert not _fr(report)


def test_a_hostile_pickle_through_the_cli_is_one_line_and_no_traceback(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "dumps").mkdir()
    dump = tmp_path / "dumps" / "rank_3"
    dump.write_bytes(_payloads(marker)["os.system via __reduce__ (protocol 2, GLOBAL)"])
    r = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", str(tmp_path / "dumps")],
                       capture_output=True, text=True, timeout=120)
    assert _wait_gone(marker)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert f"{dump}: pickle refused: it asks for posix.system" in lines[0] and "nothing in it was run" in lines[0]
    assert "Traceback" not in r.stderr and r.returncode == 2  # nothing else to analyse


def test_the_restricted_unpickler_reads_plain_data_of_every_protocol():
    """What a dump holds (dicts, lists, tuples, strings, numbers, bools, None) needs no
    global in any protocol; sets and bytes do before protocols 4/3 (builtins.set,
    _codecs.encode; protocol 2 names them __builtin__.set) and are refused like any other global: no allowlist to get wrong."""
    plain = {"version": "2.10", "entries": [{"a": (1, 2.5, None, True), "b": ["y", -3], "f": 10 ** 30,
                                             "g": {"x": [[1, 2], [3]]}}], "pg_config": {}}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(plain, protocol=protocol)
        loaded = dumps.load(MemoryInput("rank_0", data=data), "pickle")
        assert loaded.data == plain, protocol
        assert not loaded.notices
    with_set = dict(plain, extra={1, 2})
    assert dumps.load(MemoryInput("rank_0", data=pickle.dumps(with_set, protocol=5)), "pickle").data == with_set
    refused = dumps.load(MemoryInput("rank_0", data=pickle.dumps(with_set, protocol=2)), "pickle")
    assert refused.data is None and "it asks for __builtin__.set" in refused.notices[0].message


def test_a_pickle_that_is_no_dump_is_skipped_with_a_notice():
    loaded = dumps.load(MemoryInput("model.bin", data=pickle.dumps([1, 2, 3], protocol=2)), "pickle")
    assert loaded.data is None and "not a Flight Recorder dump" in loaded.notices[0].message


def test_a_broken_pickle_is_a_notice(tmp_path):
    good = (REAL / "fr-skip-allreduce" / "dumps" / "pickle" / "rank_0").read_bytes()
    (tmp_path / "rank_0").write_bytes(good[: len(good) // 2])
    report = _analyze(tmp_path)
    assert [n["message"][:13] for n in report.notices] == ["broken pickle"]


def test_a_dump_over_the_size_bound_is_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr(dumps, "MAX_DUMP_BYTES", 1000)
    monkeypatch.setattr(dumps.load, "__defaults__", (1000,))
    shutil.copy(REAL / "fr-skip-allreduce" / "dumps" / "pickle" / "rank_0", tmp_path / "rank_0")
    report = _analyze(tmp_path)
    assert report.notices[0]["message"] == "Flight Recorder dump larger than 0 MB, not read"
    assert not _fr(report)


def test_a_pickle_that_shares_one_huge_list_everywhere_stays_bounded(tmp_path):
    """A pickle can reference one object from everywhere (its memo): 10^6 ints as every
    tensor's shape and every frame's name of every entry cost the file 5 MB once; reading
    them naively would build 10^11 elements."""
    huge = list(range(10 ** 6))
    entry = {"record_id": 0, "collective_seq_id": 1, "profiling_name": "nccl:all_reduce",
             "process_group": ("0", "default_pg"), "input_sizes": [huge] * 256, "output_sizes": [huge] * 256,
             "input_dtypes": [huge] * 256, "frames": [{"name": huge, "filename": huge, "line": 1}] * 64,
             "state": "scheduled"}
    data = pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [entry] * 20_000}, protocol=4)
    assert len(data) < 16 << 20
    (tmp_path / "rank_0").write_bytes(data)
    t = time.process_time()
    built = api.build([str(tmp_path)])
    assert time.process_time() - t < 20
    view = built.model.flight.fold().ranks[0]
    assert view.entries == 20_000  # one shape, converted once (by identity) and cut to the bounds
    op = view.last
    assert op is not None and len(op.in_sizes) == 256 and all(len(t) == 16 for t in op.in_sizes)
    assert op.frames[0].name == "?"


def test_entries_of_distinct_odd_shapes_are_read_a_bounded_number_of_times(tmp_path):
    huge = list(range(10 ** 5))
    entries = [{"record_id": i, "collective_seq_id": i + 1, "profiling_name": "nccl:all_reduce",
                "process_group": ("0", "default_pg"), "input_sizes": [huge] * 64, "output_sizes": [huge] * 64,
                "state": "completed"} for i in range(5000)]  # a new outer list per entry: not shared
    (tmp_path / "rank_0").write_bytes(pickle.dumps({"version": "2.10", "pg_config": {}, "entries": entries}, 4))
    t = time.process_time()
    view = api.build([str(tmp_path)]).model.flight.fold().ranks[0]
    assert time.process_time() - t < 20
    assert view.entries == 2000
    assert "3000 malformed entries skipped (of an unusual shape, past the first 2000 read)" in view.notes


# --------------------------------------------------------------------------- found by content


def test_dumps_are_found_by_content_under_any_name_and_compressed(tmp_path):
    case = REAL / "fr-bcast-vs-allreduce" / "dumps"
    for r in range(4):
        raw = (case / "pickle" / f"rank_{r}").read_bytes()
        if r == 0:
            (tmp_path / "trace_0.log").write_bytes(raw)  # a log's name
        elif r == 1:
            (tmp_path / "trace_1.gz").write_bytes(gzip.compress(raw))  # compressed
        elif r == 2:
            (tmp_path / "trace_2.txt").write_bytes((case / "json" / "rank_2.json").read_bytes())  # JSON, a text name
        else:
            (tmp_path / "trace_3").write_bytes(raw)
    report = _analyze(tmp_path)
    top = report.findings[0]
    assert top.rule_id == "FR001" and top.ranks == [2]
    assert not [n for n in report.notices if n["severity"] == "warning"]


def test_a_json_document_that_is_no_dump_is_read_as_a_log(tmp_path):
    (tmp_path / "events.json").write_text('{"version": 3, "note": "not a dump"}\n'
                                          "node1:12:34 [0] NCCL WARN NET/IB : Got completion from peer "
                                          "10.0.0.2<1234> with error 12, opcode 0, len 0, vendor err 129\n")
    report = _analyze(tmp_path / "events.json")
    assert report.files_read == 1 and not _fr(report)
    assert any("Got completion" in e.text for f in report.findings for e in f.evidence) or \
        any("Got completion" in e.text for e in report.unexplained)


def test_a_json_lines_log_is_not_mistaken_for_a_dump():
    assert dumps.sniff_bytes(b'{"ts": 1, "msg": "NCCL INFO x"}\n') is None
    assert dumps.sniff_bytes(b'{"version": "2.10", "entries": [') == "json"
    assert dumps.sniff_bytes(b'\n  {\n  "comm_lib_version": "",') == "json"
    assert dumps.sniff_bytes(b"\x80\x02}q\x00") == "pickle"
    assert dumps.sniff_bytes(b"\x80\x09") is None and dumps.sniff_bytes(b"NCCL INFO") is None


def test_a_dump_on_standard_input(monkeypatch):
    data = (REAL / "fr-slow-rank0" / "dumps" / "json" / "rank_1.json").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    report = api.analyze(["-"])
    assert report.files_read == 1
    fl = report  # one rank alone cannot be compared: the dump is read, nothing is claimed
    assert not [f for f in fl.findings if f.severity == "error"]


def test_the_rank_comes_from_the_file_name():
    assert rank_from_name("/tmp/nccl_trace_rank_12") == 12
    assert rank_from_name("dumps/json/rank_3.json") == 3
    assert rank_from_name("nccl_trace_rank_container-node07_40.gz") == 40
    assert rank_from_name("trace.json") is None


# --------------------------------------------------------------------------- the real dumps

#: case -> (rule, culprit ranks, the group and seq named, the culprit's evidence entry)
REAL_CASES = {
    "fr-skip-allreduce": ("FR001", [1], "#16 of default_pg (pg 0)",
                          "rank 1 entry 16/16 (record_id 15): default_pg (pg 0) #16 gloo:barrier []"),
    "fr-ring-wrap": ("FR001", [1], "#16 of default_pg (pg 0)",
                     "rank 1 entry 6/6 (record_id 15): default_pg (pg 0) #16 gloo:barrier []"),
    "fr-bcast-vs-allreduce": ("FR001", [2], "#11 of default_pg (pg 0)",
                              "rank 2 entry 11/11 (record_id 10): default_pg (pg 0) #11 gloo:broadcast [[1089]] Float"),
    "fr-size-mismatch": ("FR002", [2], "#11 of default_pg (pg 0)",
                         "rank 2 entry 11/11 (record_id 10): default_pg (pg 0) #11 gloo:all_reduce [[1153]] Float"),
    "fr-slow-rank0": ("FR003", [0], "#11 of default_pg (pg 0)",
                      "rank 0 entry 10/10 (record_id 9): default_pg (pg 0) #10 gloo:all_reduce [[1089]] Float "
                      "[completed]"),
    "fr-subgroup-skip": ("FR003", [3], "#11 of dp_pair1 (pg 2)",
                         "rank 3 entry 21/21 (record_id 20): default_pg (pg 0) #11 gloo:all_reduce [[1]] Float"),
    "fr-killed-rank": ("FR005", [3], "no dump from rank 3",
                       "rank 1 entry 11/11 (record_id 10): default_pg (pg 0) #11 gloo:all_reduce [[1089]] Float "
                       "[scheduled, not completed]"),
}


@pytest.mark.parametrize("case", sorted(REAL_CASES))
@pytest.mark.parametrize("form", ["pickle", "json"])
def test_the_real_dumps_name_the_culprit(case, form):
    rule, ranks, where, evidence = REAL_CASES[case]
    report = _analyze(REAL / case / "dumps" / form)
    top = report.findings[0]
    assert (top.rule_id, top.ranks) == (rule, ranks), top.title
    assert where in top.title
    culprit = REAL / case / "dumps" / form / (f"rank_{ranks[0]}" + (".json" if form == "json" else ""))
    src = {e.file for e in top.evidence}
    assert any(e.text.startswith(evidence) for e in top.evidence), [e.text for e in top.evidence]
    if rule != "FR005":  # the culprit's own entry, quoted from its own dump, at its position
        lead = top.evidence[0]
        assert (lead.file, lead.text.startswith(evidence)) == (str(culprit), True)
        assert lead.line == int(evidence.split(" entry ")[1].split("/")[0])
    assert all(s.startswith(str(REAL / case / "dumps" / form)) for s in src)
    real = yaml_culprit(case)
    assert ranks == [real], "the fixture's case.yaml says otherwise"
    if rule == "FR003":  # busy (no collective at the dump) is a timeout; waiting in another, a desync
        want = yaml.safe_load((REAL / case / "case.yaml").read_text())["category"]
        assert top.category == want, (top.category, want)


def yaml_culprit(case: str) -> int:
    import yaml

    return int(yaml.safe_load((REAL / case / "case.yaml").read_text())["culprit"]["rank"])


def test_the_pickle_names_the_python_frame_the_json_form_has_none():
    pk = _analyze(REAL / "fr-bcast-vs-allreduce" / "dumps" / "pickle").findings[0]
    js = _analyze(REAL / "fr-bcast-vs-allreduce" / "dumps" / "json").findings[0]
    assert "_make/train.py:180 in main" in pk.message and "_make/train.py:183 in main" in pk.message
    assert "(no stack in this dump)" in js.message


def test_a_rank_given_as_pickle_and_json_counts_once():
    report = _analyze(REAL / "fr-skip-allreduce" / "dumps")
    top = report.findings[0]
    assert (top.rule_id, top.ranks) == ("FR001", [1])
    assert top.evidence[0].file.endswith("dumps/pickle/rank_1")  # the form with frames
    notes = next(f for f in report.findings if f.rule_id == "FR007")
    assert "ranks 0-3 given twice, as pickle and as JSON of the same record" in notes.message


def test_with_the_console_log_the_dumps_and_the_logs_make_one_verdict():
    case = REAL / "fr-skip-allreduce"
    report = _analyze(case / "console.log", case / "dumps" / "pickle")
    assert report.verdict is not None and report.verdict.rule_id == "FR001"
    msg = report.verdict.message
    assert "Source: Flight Recorder dumps of ranks 0-3" in msg
    assert "the logs agree: rank 1's traceback stops in barrier (console.log:105)" in msg
    ev = [(Path(e.file).name, e.line) for e in report.verdict.evidence]
    assert ("rank_1", 16) in ev and ("console.log", 105) in ev
    # the log lines the dumps explain are not left over as unexplained problems
    assert not [e for e in report.unexplained if "Timed out waiting" in e.text]


def test_the_logs_disagree_when_they_show_the_culprit_elsewhere(tmp_path):
    case = REAL / "fr-bcast-vs-allreduce"
    log = (case / "console.log").read_text().replace("in broadcast", "in all_reduce")
    (tmp_path / "console.log").write_text(log)
    report = _analyze(tmp_path / "console.log", case / "dumps" / "pickle")
    top = report.findings[0]
    assert top.rule_id == "FR001" and "the logs partly agree: rank 2's traceback stops in all_reduce" in top.message
    assert ", not in broadcast" in top.message


def test_a_killed_rank_the_dumps_and_the_launcher_agree():
    case = REAL / "fr-killed-rank"
    report = _analyze(case / "console.log", case / "dumps" / "pickle")
    top = report.verdict
    assert top is not None and (top.rule_id, top.ranks) == ("FR005", [3])
    assert "ranks 0-2 reached all_reduce #11 of default_pg (pg 0)" in top.message
    assert "The logs agree: the launcher reports rank 3 exited with -9 (SIGKILL)" in top.message
    assert any(e.file.endswith("console.log") and "local_rank: 3" in e.text for e in top.evidence)


def test_a_size_mismatch_and_the_rank_it_killed():
    report = _analyze(REAL / "fr-size-mismatch" / "dumps" / "pickle")
    ids = [(f.rule_id, f.ranks) for f in report.findings if f.severity == "error"]
    assert ids[:2] == [("FR002", [2]), ("FR005", [1])]
    nodump = report.findings[1]
    assert "a size mismatch at default_pg (pg 0) #11 (rank 2)" in nodump.message


def test_detail_mode_dumps_hold_no_collective_in_flight_and_the_logs_decide():
    case = REAL / "fr-size-mismatch-detail"
    report = _analyze(case / "console.log", case / "dumps" / "pickle")
    # the logs' odd one out: rank 2's DETAIL fingerprint differs from the other three's
    assert report.verdict is not None and (report.verdict.rule_id, report.verdict.ranks) == ("DESYNC005", [2])
    quiet = next(f for f in report.findings if f.rule_id == "FR006")
    assert quiet.severity == "info" and "TORCH_DISTRIBUTED_DEBUG=DETAIL wrapper" in quiet.message
    assert not [f for f in _fr(report) if f.severity == "error"]


def test_a_cycle_across_groups_names_the_rank_that_left_a_collective_out():
    report = _analyze(REAL / "fr-subgroup-skip" / "dumps" / "pickle")
    top = report.findings[0]
    assert (top.rule_id, top.ranks) == ("FR003", [3])
    assert "rank 2 itself waits in dp_pair1 (pg 2) #11 (all_reduce) for rank 3" in top.message
    assert "at its op #21 (record_id 20) rank 3 issued all_reduce [[1]] Float where ranks 0-2 issued " \
           "all_reduce [[1089]] Float" in top.message
    assert len([f for f in report.findings if f.rule_id == "FR003"]) == 1


def test_results_do_not_depend_on_input_order_or_jobs(monkeypatch):
    import ncclsleuth.parallel.local as P

    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 0)
    files = sorted(str(p) for p in (REAL / "fr-subgroup-skip" / "dumps").rglob("rank_*"))
    a = render("json", api.analyze(files, api.Options(jobs=1)))
    b = render("json", api.analyze(files[::-1], api.Options(jobs=1)))
    c = render("json", api.analyze(files, api.Options(jobs=2)))
    strip = lambda s: json.dumps({k: v for k, v in json.loads(s).items() if k != "summary"})  # noqa: E731
    assert strip(a) == strip(c)
    fa, fb = json.loads(a)["findings"], json.loads(b)["findings"]
    assert [(f["rule_id"], f["ranks"], f["message"]) for f in fa] == [(f["rule_id"], f["ranks"], f["message"])
                                                                      for f in fb]


# --------------------------------------------------------------------------- every format

MADE_CASES = {
    "v1.4-missing-rank": ("FR003", [1], "1.4"),
    "v2.1-size-mismatch": ("FR002", [3], "2.1"),
    "v2.4-hang": ("FR004", [0, 1, 2, 3], "2.4"),
    "v2.9-desync": ("FR001", [5], "2.9"),
    "mixed-versions": ("FR003", [3], "2.10, 2.4"),
}


@pytest.mark.parametrize("case", sorted(MADE_CASES))
def test_every_documented_format(case):
    rule, ranks, version = MADE_CASES[case]
    report = _analyze(MADE / case)
    top = report.findings[0]
    assert (top.rule_id, top.ranks) == (rule, ranks), top.title
    assert f"(format {version}," in top.message


def test_mixed_versions_are_compared_and_said():
    report = _analyze(MADE / "mixed-versions")
    notes = next(f for f in report.findings if f.rule_id == "FR007")
    assert "format 2.10 (ranks 0-1), 2.4 (ranks 2-3)" in notes.title
    assert "refuses dumps of different versions" in notes.message


def test_uneven_all_to_all_and_point_to_point_are_no_mismatch():
    report = _analyze(MADE / "v2.4-hang")
    assert [f.rule_id for f in report.findings if f.severity == "error"] == ["FR004"]


def test_a_coalesced_group_sharing_one_seq_is_no_mismatch():
    """Coalesced collectives record one entry per op under one collective_seq_id: every
    rank then has several signatures at that seq, which is no disagreement."""
    def e(rid, seq, op, n, st="completed"):
        return {"record_id": rid, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
                "profiling_name": f"nccl:{op}", "input_sizes": [[n]], "output_sizes": [[n]], "input_dtypes": ["Float"],
                "output_dtypes": ["Float"], "state": st, "retired": st == "completed"}
    files = {f"rank_{r}.json": json.dumps({"version": "2.10", "pg_config": {}, "entries": [
        e(0, 1, "all_reduce", 10), e(1, 1, "all_reduce", 20), e(2, 1, "coalesced", 0), e(3, 2, "broadcast", 5)]})
        for r in range(3)}
    report = api.analyze(api.memory_sources(files))
    assert not [f for f in report.findings if f.severity == "error"]
    files["rank_2.json"] = files["rank_2.json"].replace('"nccl:broadcast"', '"nccl:all_gather"')
    report = api.analyze(api.memory_sources(files))
    assert [(f.rule_id, f.ranks) for f in report.findings if f.severity == "error"] == [("FR001", [2])]


def test_old_formats_read_seq_id_and_do_without_dtypes():
    d = pickle.loads((MADE / "v1.4-missing-rank" / "nccl_trace_rank_0").read_bytes())
    fr = normalise(d, "nccl_trace_rank_0", "pickle")
    assert [op.seq for op in fr.entries] == [1, 2, 3, 4, 5]
    assert fr.entries[0].in_dtypes == () and fr.entries[-1].state == "scheduled"


def test_state_from_retired_and_pg_status_when_it_never_leaves_scheduled():
    d = pickle.loads((REAL / "fr-slow-rank0" / "dumps" / "pickle" / "rank_1").read_bytes())
    assert {e["state"] for e in d["entries"]} == {"scheduled"}
    fr = normalise(d, "rank_1", "pickle")
    assert [op.state for op in fr.entries] == ["completed"] * 10 + ["scheduled"]
    d["entries"][-2]["retired"] = False  # pg_status.last_completed_collective (10) still says it completed
    assert normalise(d, "rank_1", "pickle").entries[-2].state == "completed"
    js = json.loads((REAL / "fr-slow-rank0" / "dumps" / "json" / "rank_1.json").read_text())
    assert js["pg_status"]["0"]["last_completed_collective"] == "10"  # strings in the JSON form
    assert [op.state for op in normalise(js, "rank_1.json", "json").entries] == ["completed"] * 10 + ["scheduled"]


def test_malformed_entries_are_skipped_and_counted():
    d = {"version": "2.10", "pg_config": {}, "entries": [
        {"profiling_name": "nccl:all_reduce", "record_id": 0, "collective_seq_id": 1, "process_group": ["0", "x"]},
        {"profiling_name": 7}, "junk", {"record_id": "x"}]}
    fr = normalise(d, "rank_0", "json")
    assert len(fr.entries) == 1 and fr.skipped == 3 and "3 malformed entries skipped" in fr.notes


# --------------------------------------------------------------------------- scale


def _synthetic(folder: Path, ranks: int, entries: int, culprit: int) -> None:
    pg = ["0", "default_pg"]
    base = [{"record_id": i, "pg_id": 0, "process_group": pg, "collective_seq_id": i + 1, "profiling_name":
             "nccl:all_reduce", "input_sizes": [[1 << 20]], "output_sizes": [[1 << 20]], "input_dtypes": ["BFloat16"],
             "output_dtypes": ["BFloat16"], "state": "completed", "retired": True} for i in range(entries)]
    for r in range(ranks):
        es = [dict(e) for e in base[: entries - 1 if r == culprit else entries]]
        if r != culprit:
            es[-1].update(state="scheduled", retired=False)
        (folder / f"rank_{r}.json").write_text(json.dumps({"version": "2.10", "entries": es, "pg_config": {
            "0": {"name": "0", "desc": "default_pg", "ranks": "[]"}}}))


def test_many_ranks_fold_into_small_tables(tmp_path):
    _synthetic(tmp_path, 512, 100, culprit=377)
    t = time.perf_counter()
    built = api.build([str(tmp_path)])
    top = api.diagnose(built.model, api.load_rules(api.Options())).findings[0]
    took = time.perf_counter() - t
    assert (top.rule_id, top.ranks) == ("FR003", [377])
    fl = built.model.flight
    assert fl is not None and len(fl.rows) == 100 and len(fl.ranks) == 512
    row = fl.rows[("0", 50)]
    assert len(row.sigs) == 1 and len(next(iter(row.sigs.values())).b) == 64  # 512 ranks in 64 bytes
    assert took < 30, took


def test_the_input_object_is_opened_once(tmp_path, monkeypatch):
    shutil.copy(REAL / "fr-slow-rank0" / "dumps" / "pickle" / "rank_0", tmp_path / "rank_0")
    (tmp_path / "log.txt").write_text("node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    from ncclsleuth.ingest import decode

    opened: list[str] = []
    real = decode.open_regular  # what open_binary opens a file with (a regular file only)
    monkeypatch.setattr(decode, "open_regular", lambda path: (opened.append(path), real(path))[1])
    report = api.analyze([str(tmp_path)])
    assert report.files_read == 2
    assert sorted(opened) == sorted([str(tmp_path / "rank_0"), str(tmp_path / "log.txt")])  # once each


def test_an_input_file_object_still_reads_as_a_log():
    form, inp = dumps.sniff(MemoryInput("x.log", data=b"hello\n"))
    assert form is None and isinstance(inp, InputFile) and inp.open().read() == b"hello\n"


@pytest.mark.parametrize("case", ["fr-skip-allreduce", "fr-ring-wrap"])
def test_a_rank_in_the_barrier_is_no_busy_rank_when_the_dumps_show_a_desync(case):
    """Logs alone name rank 1 as the odd one out (its traceback stops in barrier where the
    others' stop in all_reduce: DESYNC005), not TIMEOUT002 (a rank worked alone past the
    timeout); the dumps show the same, so the merged list has one explanation, and the log
    lines DESYNC005 quoted are accounted for by it."""
    logs_only = _analyze(REAL / case / "console.log")
    assert [(f.rule_id, f.ranks) for f in logs_only.findings][:1] == [("DESYNC005", [1])]
    quoted = {(e.file, e.line) for f in logs_only.findings if f.rule_id == "DESYNC005" for e in f.evidence}
    report = _analyze(REAL / case / "console.log", REAL / case / "dumps" / "pickle")
    ids = [f.rule_id for f in report.findings if f.severity == "error"]
    assert ids[0] == "FR001" and "TIMEOUT002" not in ids
    covered = {(e.file, e.line) for f in report.findings for e in f.evidence} | {
        k for f in report.findings for k in f.explained}
    assert quoted <= covered, quoted - covered


def test_the_job_summary_counts_the_ranks_of_the_dumps():
    """No NCCL line gives a rank count on gloo: the dumps do, a rank without a dump included."""
    assert _analyze(REAL / "fr-skip-allreduce" / "dumps" / "pickle").summary["ranks"] == 4
    assert _analyze(REAL / "fr-killed-rank" / "dumps" / "pickle").summary["ranks"] == 4  # rank 3 wrote none
    assert _analyze(MADE / "v2.9-desync").summary["ranks"] == 8
