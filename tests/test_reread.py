"""Evidence by reference (ncclsleuth.util.reread): the model keeps a line's place in its file
instead of its text, and the report is the same byte for byte as with every text kept, on the
fixtures, the shared corpus and generated jobs (one file and per-rank files, one process and
two, a file in pieces); a line that can no longer be read as it was says so."""
from __future__ import annotations

import json
import pickle

import pytest
from _jobs import layout_job as _job
from _jobs import log_inputs as _inputs

from ncclsleuth import api
from ncclsleuth import events as E
from ncclsleuth.renderers import render
from ncclsleuth.util import reread


def _report(paths: list[str], monkeypatch: pytest.MonkeyPatch, on: bool, jobs: int = 1,
            piece: int | None = None) -> str:
    monkeypatch.setattr(reread, "ENABLED", on)
    monkeypatch.setattr(reread, "_PATHS", {})
    report = api.analyze(paths, api.Options(jobs=jobs, shared_cache=False, piece_bytes=piece))
    return render("json", report)


def _kept(model: object) -> list[E.Event]:
    return [ev for evs in model.events.values() for ev in evs]  # type: ignore[attr-defined]


def test_fixtures_and_corpus_same_with_and_without_references(monkeypatch):
    paths = _inputs()
    assert len(paths) > 20
    differ = [p for p in paths
              if _report([str(p)], monkeypatch, True) != _report([str(p)], monkeypatch, False)]
    assert differ == []


@pytest.mark.parametrize("layout,jobs,piece", [("one-file", 1, None), ("one-file", 2, 4096),
                                               ("per-rank-files", 1, None), ("per-rank-files", 2, None)])
def test_generated_job_same_with_and_without_references(tmp_path, monkeypatch, layout, jobs, piece):
    from ncclsleuth.parallel import local

    monkeypatch.setattr(local, "PARALLEL_MIN_BYTES", 0)  # two processes for a small job too
    job = _job(tmp_path, layout)
    by_ref = _report([str(job)], monkeypatch, True, jobs, piece)
    assert "desync" in by_ref.lower()
    assert by_ref == _report([str(job)], monkeypatch, False, 1)


def test_kept_events_hold_references_that_read_back_their_lines(tmp_path, monkeypatch):
    """On a generated job nearly every kept event holds a reference (an int), also after a
    worker process pickled it; each reads back exactly its line (a progress bar's block
    characters before it in the block included: offsets count bytes, not characters)."""
    monkeypatch.setattr(reread, "_PATHS", {})
    job = _job(tmp_path, "one-file")
    (log,) = job.iterdir()
    with log.open("a", encoding="utf-8") as f:
        f.write("Training:  50%|█████     | 5/10\nh9:9:9 [0] NCCL WARN Cuda failure 'out of memory' – größer\n")
    lines = log.read_bytes().decode("utf-8").split("\n")  # as read: a progress bar's \r ends no line
    model = api.build([str(job)], api.Options(jobs=1, shared_cache=False)).model
    kept = _kept(model)
    by_ref = [ev for ev in kept if type(ev._text) is int]  # type: ignore[attr-defined]
    assert len(by_ref) > 0.9 * len(kept) > 100
    assert all(ev.text == lines[ev.line - 1] for ev in kept)
    (last,) = [ev for ev in by_ref if ev.line == len(lines) - 1]  # after a progress bar, in one block
    assert last.is_problem and last.text == lines[-2] and last.text.endswith("– größer")
    again = pickle.loads(pickle.dumps(by_ref[:50]))
    assert [type(ev._text) for ev in again] == [int] * 50  # type: ignore[attr-defined]
    assert [ev.text for ev in again] == [ev.text for ev in by_ref[:50]]


def test_lines_that_are_not_their_bytes_keep_their_text(tmp_path, monkeypatch):
    """CRLF line ends, a NUL, bad UTF-8: the block's text is not the file's bytes, so its lines
    keep their text; an unregistered input (standard input, a Dask worker's) keeps every text."""
    monkeypatch.setattr(reread, "_PATHS", {})
    line = b"h1:1:1 [0] NCCL WARN Cuda failure 'out of memory'"
    for name, data in (("crlf.log", line + b"\r\n"), ("nul.log", line + b"\n\x00x\n"), ("bad.log", line + b"\n\xff\n")):
        p = tmp_path / name
        p.write_bytes(data)
        model = api.build([str(p)], api.Options(jobs=1, shared_cache=False)).model
        kept = [ev for ev in _kept(model) if ev.kind == "cuda_error"]
        assert [type(ev._text) for ev in kept] == [str], name  # type: ignore[attr-defined]
    plain = tmp_path / "plain.log"
    plain.write_bytes(line + b"\n")
    monkeypatch.setattr(reread, "ENABLED", False)
    model = api.build([str(plain)], api.Options(jobs=1, shared_cache=False)).model
    assert [type(ev._text) for ev in _kept(model) if ev.kind == "cuda_error"] == [str]  # type: ignore[attr-defined]


def test_a_line_changed_after_it_was_read_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(reread, "_PATHS", {})
    p = tmp_path / "job.log"
    text = "h1:1:1 [0] NCCL WARN Cuda failure 'out of memory'\nh1:1:1 [0] NCCL INFO cudaDriverVersion 12040\n"
    p.write_text(text)
    model = api.build([str(p)], api.Options(jobs=1, shared_cache=False)).model
    (ev,) = [ev for ev in _kept(model) if ev.kind == "cuda_error"]
    assert type(ev._text) is int and ev.text == text.split("\n")[0]  # type: ignore[attr-defined]
    said = f"[line 1 of {p} could not be read again: the file changed after it was read]"
    reread.forget()
    p.write_text(text.replace("out of memory", "out of MEMORY"))  # the same length, other characters
    assert ev.text == said
    reread.forget()
    p.write_text("x" * 10 + "\n" + text)  # everything moved by 11 bytes
    assert ev.text == said
    p.unlink()
    reread.forget()
    assert "could not be read again" in ev.text


def test_lines_read_back_are_kept_up_to_a_bound_the_latest_first(tmp_path, monkeypatch):
    """The lines read back are kept for the next reads of the same lines, at most ``_MAX_LINES``
    of them (the least recently read go first): a job of any size holds a bounded number."""
    monkeypatch.setattr(reread, "_PATHS", {})
    monkeypatch.setattr(reread, "_LINES", type(reread._LINES)())
    n = reread._MAX_LINES + 50
    lines = [f"h1:1:1 [0] NCCL WARN line {i:06d}" for i in range(n)]
    p = tmp_path / "job.log"
    p.write_text("".join(f"{ln}\n" for ln in lines))
    reread.register("job.log", str(p))
    width = len(lines[0]) + 1
    refs = [reread.ref(i * width, width - 1, ln) for i, ln in enumerate(lines)]
    assert all(r is not None for r in refs)
    reads: list[int] = []
    real = reread._line
    monkeypatch.setattr(reread, "_line", lambda *a: reads.append(a[2]) or real(*a))
    got = [reread.line("job.log", r, i + 1) for i, r in enumerate(refs)]  # type: ignore[arg-type]
    assert got == lines and len(reads) == n
    assert len(reread._LINES) == reread._MAX_LINES
    assert reread.line("job.log", refs[-1], n) == lines[-1] and len(reads) == n  # kept: not read again
    assert reread.line("job.log", refs[0], 1) == lines[0] and len(reads) == n + 1  # gone: read again
    reread.forget()


@pytest.mark.parametrize("utf8", [False, True])
def test_a_rank_files_last_line_and_progress_line_are_kept_by_reference(tmp_path, monkeypatch, utf8):
    """Before: a file of one rank's last line and last progress line kept their text (~500 bytes a
    rank at 100,000 per-rank files).  Now their place, read back as they were, also after a
    multi-byte character before them; a file read with CRLF folded keeps them as text (its
    bytes are not its text); the report is the same either way (the test above)."""
    monkeypatch.setattr(reread, "_PATHS", {})
    mark = "█" if utf8 else "#"
    lines = [f"noise {i} {mark}" for i in range(40)] + ["step 12 loss 0.93 | lr 1e-4", "", "saving checkpoint"]
    plain = tmp_path / "rank3.log"
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    crlf = tmp_path / "crlf" / "rank4.log"
    crlf.parent.mkdir()
    crlf.write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))
    for path, by_ref in ((plain, True), (crlf, False)):
        model = api.build([str(path)], api.Options(jobs=1, shared_cache=False)).model
        ends = {type(ev).__name__: ev for t in model.tracks.values() for ev in (t.last_line(), t.progress_line())
                if ev is not None}
        placed = [type(x) is int for t in model.tracks.values() for x in (t.last, t.progress) if x is not None]
        assert placed == [by_ref, by_ref], path  # by reference: kept as their places, made again here
        assert sorted(ends) == ["LastLine", "Progress"], path
        assert (ends["LastLine"].line, ends["LastLine"].text) == (43, "saving checkpoint")
        assert (ends["Progress"].line, ends["Progress"].text) == (41, "step 12 loss 0.93 | lr 1e-4")
        assert all(type(ev._text) is (int if by_ref else str) for ev in ends.values()), path


def test_an_interleaved_files_last_lines_keep_their_text(tmp_path, monkeypatch):
    """Every rank's last line of a file that interleaves ranks is not placed one by one (each would
    be looked for back from the end of its block): they keep their text."""
    monkeypatch.setattr(reread, "_PATHS", {})
    log = tmp_path / "job.log"
    log.write_text("".join(f"[rank{r}]: step {s} loss 0.5\n" for s in range(3) for r in range(4)), encoding="utf-8")
    model = api.build([str(log)], api.Options(jobs=1, shared_cache=False)).model
    lasts = [t.last for t in model.tracks.values() if t.last is not None]
    assert all(isinstance(ev, E.Event) for ev in lasts)  # not placed: their events kept
    assert len(lasts) == 4 and all(type(ev._text) is str for ev in lasts)
    assert sorted(ev.text for ev in lasts) == [f"[rank{r}]: step 2 loss 0.5" for r in range(4)]


def _said_events(model: object) -> dict[tuple[object, object], dict]:
    """(process key, evidence key) -> the evidence line's event as a dict, and (communicator, rank) ->
    its ``Init timings`` line's event as a dict with the total and phases kept beside it; each made
    again where placed."""
    out = {(k, key): p.evidence[key].to_dict() for k, p in model.processes.items()  # type: ignore[attr-defined]
           for key in p.said}
    for c in model.comms.values():  # type: ignore[attr-defined]
        for r, st in c.ranks.items():
            if st.timed is not None:
                out[(c.key, r)] = {**st.timings.to_dict(), "kept": (st.init_total, st.init_phases)}
            if st.began is not None:
                out[(c.key, r, "start")] = {**st.start.to_dict(), "kept": (st.source, st.start_phase, st.start_ts),
                                            "where": st.start_where()}
            if st.complete is not None:
                out[(c.key, r, "complete")] = {k: getattr(st.complete, k) for k in ("source", "line", "ts", "host", "pid")}
    return out


def _placed(model: object) -> int:
    return (sum(type(v) is int for pr in model.processes.values() for v in pr.said.values())  # type: ignore[attr-defined]
            + sum((type(st.timed) is int) + (type(st.began) is int)
                  for c in model.comms.values() for st in c.ranks.values()))  # type: ignore[attr-defined]


def test_evidence_lines_past_the_bound_are_kept_by_place_and_made_again_as_they_were(monkeypatch):
    """Before: a process kept the event of each line it set a value from (its NCCL version, network,
    interfaces, settings: six a rank, ~1.4 KB with their integers), and a rank state its ``Init
    timings`` and Init START lines' (three a rank each), also where the model keeps no other event
    of them.  Now their place (one integer; a rank state the timings' total and phases, the start's
    file, phase and time beside it); a fact asking for the line gets the event the parser makes
    again from it, and where it was printed (``start_where``) and an Init COMPLETE line kept as its
    line and time (``Done``) read the same as with the event kept.  On every fixture and corpus log, with no event
    kept by the model (``KEEP_PER_KIND`` 0), each made again is the event kept with places off,
    field for field."""
    from ncclsleuth.model import job as J
    from ncclsleuth.model import merge as MG

    paths = [str(p) for p in _inputs()]
    monkeypatch.setattr(J, "KEEP_PER_KIND", 0)
    monkeypatch.setattr(MG, "KEEP_PER_KIND", 0)
    placed = {p: api.build([p], api.Options(jobs=1, shared_cache=False)).model for p in paths}
    n = sum(map(_placed, placed.values()))
    timed = sum(type(st.timed) is int for m in placed.values() for c in m.comms.values() for st in c.ranks.values())
    began = sum(type(st.began) is int for m in placed.values() for c in m.comms.values() for st in c.ranks.values())
    monkeypatch.setattr(J, "place", lambda p, ev: None)
    differ = [p for p, m in placed.items()
              if _said_events(m) != _said_events(api.build([p], api.Options(jobs=1, shared_cache=False)).model)]
    assert differ == [] and n > 300 and timed > 50 and began > 100


def _minority_job(tmp_path) -> tuple[object, list[str]]:
    lines = []
    for h in range(4):
        ver, net = ("2.21.5", "Socket") if h == 3 else ("2.23.4", "IB")
        lines += [f"node{h}:{100 + h}:{100 + h} [0] NCCL INFO NCCL version {ver}+cuda12.4",
                  f"node{h}:{100 + h}:{100 + h} [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0",
                  f"node{h}:{100 + h}:{100 + h} [0] NCCL INFO Bootstrap : Using ib0:10.0.0.{h}<0>",
                  f"node{h}:{100 + h}:{100 + h} [0] NCCL INFO Using network {net}"]
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log, lines


@pytest.mark.parametrize("jobs", [1, 2])
def test_findings_quote_evidence_lines_kept_by_place(tmp_path, monkeypatch, jobs):
    """The lines a version mismatch and a network minority quote are kept by place (analyze keeps no
    ``nccl_version`` or ``net_selected`` event): the findings quote them, file and line, and the
    report is the same byte for byte as with every text kept."""
    from ncclsleuth.parallel import local

    monkeypatch.setattr(local, "PARALLEL_MIN_BYTES", 0)
    log, lines = _minority_job(tmp_path)
    monkeypatch.setattr(reread, "_PATHS", {})
    model = api.build([str(log)], api.Options(jobs=jobs, shared_cache=False)).model
    odd = model.processes[("node3", 103)]
    assert type(odd.said["nccl_version"]) is int and type(odd.said["net_selected"]) is int

    made: list[int] = []
    from ncclsleuth.model import places

    real = places.make_again
    monkeypatch.setattr(places, "make_again", lambda *a: made.append(a[1]) or real(*a))  # type: ignore[misc]
    assert "net_selected" in odd.evidence and "net_plugin" not in odd.evidence and made == []  # asked: not made
    assert odd.said_at("net_selected") == (str(log), 16)
    assert odd.evidence["net_selected"].text == lines[15] and odd.evidence["net_selected"].network == "Socket"
    assert made == [16, 16]
    report = api.analyze([str(log)], api.Options(jobs=jobs, shared_cache=False))
    quoted = {(e.line, e.text) for f in report.findings for e in f.evidence}
    assert {(13, lines[12]), (16, lines[15])} <= quoted
    assert _report([str(log)], monkeypatch, True, jobs) == _report([str(log)], monkeypatch, False)


def test_an_evidence_line_changed_after_it_was_read_says_so(tmp_path, monkeypatch):
    """Made again from a line that is no longer there: an event of its kind at its line, whose text
    says what happened (no fields of its own)."""
    log, lines = _minority_job(tmp_path)
    monkeypatch.setattr(reread, "_PATHS", {})
    model = api.build([str(log)], api.Options(jobs=1, shared_cache=False)).model
    odd = model.processes[("node3", 103)]
    reread.forget()
    log.write_text("\n".join(ln.replace("Socket", "SOCKET") for ln in lines) + "\n", encoding="utf-8")
    ev = odd.evidence["net_selected"]
    assert (ev.kind, ev.line, ev.network) == ("net_selected", 16, "")
    assert ev.text == f"[line 16 of {log} could not be read again: the file changed after it was read]"
    reread.forget()


def test_a_place_is_its_processs_file_s_a_merge_from_another_file_makes_the_event(tmp_path, monkeypatch):
    """A process whose lines are in two files (a log and a copy of a rank's part): a place is read in
    the file of the process that keeps it, so a merge takes another file's placed line as its event."""
    from ncclsleuth.model import job as J
    from ncclsleuth.model import merge as MG
    monkeypatch.setattr(reread, "_PATHS", {})
    monkeypatch.setattr(J, "KEEP_PER_KIND", 0)
    monkeypatch.setattr(MG, "KEEP_PER_KIND", 0)
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("h1:7:7 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n", encoding="utf-8")
    b.write_text("x\nh1:7:7 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0\n", encoding="utf-8")
    ma, mb = (api.build([str(p)], api.Options(jobs=1, shared_cache=False)).model for p in (a, b))
    assert all(type(v) is int for m in (ma, mb) for v in m.processes[("h1", 7)].said.values())
    MG.merge(ma, mb)
    said = ma.processes[("h1", 7)].said
    assert type(said["env:NCCL_IB_HCA"]) is int
    moved = said["env:NCCL_SOCKET_IFNAME"]
    assert not isinstance(moved, int) and (moved.source, moved.line, moved.value) == (str(b), 2, "ib0")
    assert ma.processes[("h1", 7)].evidence["env:NCCL_IB_HCA"].text == a.read_text().rstrip("\n")


def test_a_timing_place_is_read_in_its_starts_file_a_merge_from_another_file_makes_the_event(tmp_path, monkeypatch):
    """A rank state keeps its ``Init timings`` line's place where its Init START line is of the same
    file (the place is read in that file), its total and phases beside it.  Merged into the rank
    state of another file's START, the line is kept as its event."""
    from ncclsleuth.model import merge as MG

    monkeypatch.setattr(reread, "_PATHS", {})
    start = ("{h}:7:8 [0] NCCL INFO ncclCommInitRank comm 0x5555 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
             "commId 0xabc - Init START")
    timed = ("{h}:7:8 [0] NCCL INFO Init timings - ncclCommInitRank: rank 0 nranks 2 total 3.09 (kernels 0.15, "
             "alloc 0.02, bootstrap 2.46, allgathers 0.07, topo 0.23, graphs 0.02, connections 0.00, rest 0.14)")
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(start.format(h="h1") + "\n", encoding="utf-8")
    b.write_text(start.format(h="h2") + "\n" + timed.format(h="h2") + "\n", encoding="utf-8")
    ma, mb = (api.build([str(p)], api.Options(jobs=1, shared_cache=False)).model for p in (a, b))
    (st_b,) = mb.comms["0xabc"].ranks.values()
    assert type(st_b.timed) is int and st_b.init_total == 3.09 and dict(st_b.init_phases)["bootstrap"] == 2.46
    assert (st_b.timings.source, st_b.timings.line, st_b.timings.total) == (str(b), 2, 3.09)  # type: ignore[union-attr]
    MG.merge(ma, mb)
    (st,) = ma.comms["0xabc"].ranks.values()
    assert st.start.source == str(a) and not isinstance(st.timed, int)  # type: ignore[union-attr]
    assert (st.timed.source, st.timed.line, st.timed.text) == (str(b), 2, timed.format(h="h2"))  # type: ignore[union-attr]
    assert (st.init_total, st.init_phases) == (st_b.init_total, st_b.init_phases)


def test_a_placed_start_is_of_its_rank_states_process_merged_into_another_process_state_it_is_made(
        tmp_path, monkeypatch):
    """A rank state keeps its Init START line's place where the line is of the process it was made
    for (its host and pid are the line's), with the file, phase and time beside it; an Init COMPLETE
    line after it is its line and time (``Done``).  Merged into the state of the same rank made by
    another process (a relaunch's log with the same communicator), the start is kept as its event."""
    from ncclsleuth.model import job as J
    from ncclsleuth.model import merge as MG

    monkeypatch.setattr(reread, "_PATHS", {})
    monkeypatch.setattr(J, "KEEP_PER_KIND", 0)
    monkeypatch.setattr(MG, "KEEP_PER_KIND", 0)
    line = ("{h}:{p}:8 [0] NCCL INFO ncclCommInitRank comm 0x5555 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
            "commId 0xabc - Init {phase}")
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("h1:7:8 [0] NCCL INFO cudaDriverVersion 12040\n", encoding="utf-8")
    b.write_text("\n".join(line.format(h="h2", p=9, phase=ph) for ph in ("START", "COMPLETE")) + "\n", encoding="utf-8")
    ma, mb = (api.build([str(p)], api.Options(jobs=1, shared_cache=False)).model for p in (a, b))
    (st_b,) = mb.comms["0xabc"].ranks.values()
    assert type(st_b.began) is int and (st_b.source, st_b.start_phase) == (str(b), "START")
    assert st_b.start_where() == (str(b), "h2", 9) and st_b.start.text == line.format(h="h2", p=9, phase="START")  # type: ignore[union-attr]
    assert type(st_b.complete) is J.Done and (st_b.complete.source, st_b.complete.line, st_b.complete.pid) == (str(b), 2, 9)
    mine = J.RankState("0xabc", 0, host="h1", pid=7)  # the rank as process h1:7 printed it (its Init lines cut off)
    ma.comms["0xabc"] = J.Comm("0xabc", ranks={0: mine})
    MG.merge(ma, mb)
    assert mine.began is not None and not isinstance(mine.began, int)
    assert (mine.began.source, mine.began.line, mine.began.host, mine.began.pid) == (str(b), 1, "h2", 9)
    assert mine.start_where() == (str(b), "h2", 9) and mine.start_phase == "START"


def test_paths_kept_as_their_folder_where_the_name_is_the_sources(tmp_path, monkeypatch):
    """A file whose path is a folder joined with its source's last part keeps that folder's index
    (one string per folder, not one path per file: 100,000 per-rank files); any other keeps its
    path.  Both read their lines back."""
    monkeypatch.setattr(reread, "_PATHS", {})
    monkeypatch.setattr(reread, "_DIRS", [])
    monkeypatch.setattr(reread, "_DIR_INDEX", {})
    for name in ("a.log", "b.log"):
        (tmp_path / name).write_text("first\nsecond line\n", encoding="utf-8")
    reread.register("logs/a.log", str(tmp_path / "a.log"))
    reread.register("b.log", str(tmp_path / "b.log"))
    reread.register("renamed.log", str(tmp_path / "a.log"))
    assert reread._PATHS == {"logs/a.log": 0, "b.log": 0, "renamed.log": str(tmp_path / "a.log")}
    assert reread._DIRS == [str(tmp_path)]
    assert [reread.path_of(s) for s in ("logs/a.log", "b.log", "renamed.log", "other.log")] == [
        str(tmp_path / "a.log"), str(tmp_path / "b.log"), str(tmp_path / "a.log"), None]
    where = reread.ref(6, 11, "second line")
    assert [reread.line(s, where, 2) for s in ("logs/a.log", "b.log", "renamed.log")] == ["second line"] * 3


def _straggler_job(root):  # type: ignore[no-untyped-def]
    """Eight per-rank files whose training loops print no rank; rank 5's steps take twice as long."""
    root.mkdir()
    for r in range(8):
        ms = 2000.0 if r == 5 else 1000.0 + r
        lines = [f"iter {i}: loss 1.{r}{i % 10}, time: {ms + i % 3:.2f}ms" for i in range(1, 21)]
        # a progress bar first: the block is not ASCII (offsets count bytes, not characters)
        (root / f"rank{r}.log").write_text("Training:  5%|█▌        | 1/20\n" + "\n".join(lines) + "\n",
                                           encoding="utf-8")
    return root


def test_a_files_first_step_line_is_kept_by_its_place_and_quoted_as_read(tmp_path, monkeypatch):
    """A per-rank file's first step-timing line (keyed by its file: the loop prints no rank) is
    kept by its place, and the straggler findings quote it exactly as with every text kept."""
    job = _straggler_job(tmp_path / "job")
    by_ref = _report([str(job)], monkeypatch, True)
    (f,) = json.loads(by_ref)["findings"]
    assert (f["rule_id"], f["evidence"]) == ("STRAG001", [
        {"file": str(job / "rank5.log"), "line": 2, "text": "iter 1: loss 1.51, time: 2001.00ms"}])
    assert by_ref == _report([str(job)], monkeypatch, False)
    monkeypatch.setattr(reread, "ENABLED", True)
    model = api.build([str(job)], api.Options(shared_cache=False)).model
    src = str(job / "rank5.log")
    assert isinstance(model.step_evidence[src], int)
    made = model.step_line(src)
    assert (made.kind, made.source, made.line, made.text, made.ms) == (
        "step_time", src, 2, "iter 1: loss 1.51, time: 2001.00ms", 2001.0)


def test_a_ranks_first_step_line_in_a_shared_file_reads_back_its_line(tmp_path, monkeypatch):
    """Where the loop prints its rank (``[rank3]:``, every rank in one file), the model keeps each
    rank's first step event (keyed by rank, not by a file) with its text by reference: it reads
    back its own line, after a non-ASCII line."""
    monkeypatch.setattr(reread, "_PATHS", {})
    monkeypatch.setattr(reread, "ENABLED", True)
    log = tmp_path / "all.log"
    lines = ["Training:  5%|█▌        | 1/20"] + [f"[rank{r}]:iter {i}: loss 1.5, time: {1000 + r}.00ms"
                                                 for i in range(1, 8) for r in range(4)]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = api.build([str(log)], api.Options(shared_cache=False)).model
    assert sorted(model.step_evidence) == [0, 1, 2, 3]
    for r in range(4):
        ev = model.step_evidence[r]
        assert isinstance(ev._text, int)  # type: ignore[union-attr]
        assert (ev.line, ev.text) == (2 + r, f"[rank{r}]:iter 1: loss 1.5, time: {1000 + r}.00ms")  # type: ignore[union-attr]


@pytest.mark.parametrize("last", ["[rank3]:[E1129 11:41:55.972090988 ProcessGroupNCCL.cpp:632] [Rank 3] boom",
                                  "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] watchdog thread terminated"])
def test_a_files_last_and_progress_lines_kept_by_place_are_made_again_as_read(tmp_path, monkeypatch, last):
    """A one-rank file's last line and last progress line (a progress bar: step, total, elapsed,
    unit) are kept as their places in the job's model, with the time stamp, step and elapsed
    seconds beside them; made again, each is field for field the event kept with every text."""
    log = tmp_path / "rank3.log"
    log.write_text("iter 9: loss 1.5, time: 1000.00ms\n"
                   "Training:  47%|████▋     | 1695/3634 [30:09<33:25, 1.07it/s]\n" + last + "\n", encoding="utf-8")
    got = {}
    for on in (True, False):
        monkeypatch.setattr(reread, "ENABLED", on)
        monkeypatch.setattr(reread, "_PATHS", {})
        model = api.build([str(log)], api.Options(shared_cache=False)).model
        (t,) = [t for t in model.tracks.values() if t.last is not None]  # its rank's track, or the file's
        (p,) = [p for p in model.tracks.values() if p.progress is not None]
        assert (type(t.last) is int, type(p.progress) is int) == (on, on)
        got[on] = (t.last_line().to_dict(), p.progress_line().to_dict(), t.last_ts, p.step, p.elapsed_s)  # type: ignore[union-attr]
    assert got[True] == got[False]
    assert got[True][1]["step"] == 1695 and got[True][3:] == (1695, 30 * 60 + 9)
    assert got[True][2] == ("1129 11:41:55.972090988" if last.startswith("[rank3]") else None)


def test_a_source_registered_again_is_read_from_its_new_folder(tmp_path, monkeypatch):
    """The joined paths are kept (``_JOINED``) by the folder they were joined from: a source
    registered again from another folder (the same file name in another run's folder) is read
    from there, not from the path joined before."""
    monkeypatch.setattr(reread, "_PATHS", {})
    monkeypatch.setattr(reread, "_JOINED", {})
    a, b = tmp_path / "a", tmp_path / "b"
    for d, text in ((a, "first\n"), (b, "second\n")):
        d.mkdir()
        (d / "rank0.log").write_text(text)
    reread.register("rank0.log", str(a / "rank0.log"))
    assert reread.path_of("rank0.log") == str(a / "rank0.log")
    assert reread.path_of("rank0.log") == str(a / "rank0.log")  # the joined path, kept
    reread.register("rank0.log", str(b / "rank0.log"))
    assert reread.path_of("rank0.log") == str(b / "rank0.log")
    reread.register("rank0.log", str(tmp_path / "elsewhere.log"))  # a name of its own: the path as is
    assert reread.path_of("rank0.log") == str(tmp_path / "elsewhere.log")
    assert reread.path_of("never-registered.log") is None


def test_only_events_something_holds_are_given_their_place(tmp_path, monkeypatch):
    """The fast path puts an event's text by reference only where something besides the parser
    holds it once the model had it (``lines._held_elsewhere``): a ``comm`` line read by a handler
    and dropped is not worth a reference; the settings the model keeps are kept by place all the
    same, and read back as they were."""
    from ncclsleuth.parse import lines as L

    mine: list[object] = []

    def alone() -> bool:
        ev = object()
        return L._held_elsewhere(ev)  # type: ignore[arg-type]  # noqa: SLF001

    def kept() -> bool:
        ev = object()
        mine.append(ev)
        return L._held_elsewhere(ev)  # type: ignore[arg-type]  # noqa: SLF001

    assert (alone(), kept()) == (False, True)
    monkeypatch.setattr(L, "_GETREFCOUNT", None)  # an interpreter without it: every event detached
    assert (alone(), kept()) == (True, True)
    monkeypatch.undo()
    monkeypatch.setattr(reread, "_PATHS", {})
    monkeypatch.setattr(reread, "ENABLED", True)
    detached: list[str] = []
    real = L.FileParser._detach

    def spy(self: L.FileParser, ev: E.Event) -> None:
        detached.append(ev.kind)
        real(self, ev)

    monkeypatch.setattr(L.FileParser, "_detach", spy)
    log = tmp_path / "init.log"
    lines = []
    for r in range(40):  # enough lines of each shape for the fast path's plans and makers
        hp = f"node{r // 8}:{1000 + r}:{1000 + r}"
        lines += [f"{hp} [{r % 8}] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0",
                  f"{hp} [{r % 8}] NCCL INFO ncclCommInitRank comm 0x55f6e5fc{r:04x} rank {r} nranks 40 cudaDev "
                  f"{r % 8} nvmlDev {r % 8} busId {r % 8}a000 commId 0xb5ca0139f4c8d965 - Init START",
                  f"{hp} [{r % 8}] NCCL INFO comm 0x55f6e5fc{r:04x} rank {r} nRanks 40 nNodes 5 localRanks 8 "
                  f"localRank {r % 8} MNNVL 0"]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = api.build([str(log)], api.Options(shared_cache=False)).model
    made = model.kind_counts
    assert made["comm_info"] == made["env_setting"] == 40
    # every kept setting by reference; of the dropped comm lines only those the full parser read
    # while the fast path learned their shapes (a shape's first lines, a new host's first line)
    assert detached.count("env_setting") == 40 and detached.count("comm_info") <= 6
    settings = model.events["env_setting"]
    assert len(settings) == 40 and all(isinstance(ev._text, int) for ev in settings)  # type: ignore[attr-defined]
    assert settings[-1].text == lines[-3]


def test_a_kept_line_of_a_block_that_is_not_ascii_is_found_by_its_bytes(tmp_path, monkeypatch):
    """``RAW_REFS``: in a block with a progress bar (not ASCII), a kept line after a gap of more than
    ``RAW_GAP`` characters is found by its own bytes in the block's bytes and the line ends before it
    (an equal line earlier is not it); the references are the same integers as with the characters
    counted, and every kept event reads back its line (non-ASCII kept lines, a line that is another's
    tail, the block's first and last lines included)."""
    from ncclsleuth.parse import lines as L

    warn = "h1:7:7 [0] NCCL WARN NET/IB : Got completion with error 12, größer"
    rows = [warn, *(f"Training:  50%|█████     | {i}/1000 [00:10<00:11]" for i in range(L.RAW_GAP // 40)),
            "x" + warn,  # another line's tail: not a whole line that is the warning
            "h1:7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>"]
    rows += [f"h2:{p}:{p} [0] NCCL WARN Call to ibv_reg_mr failed – {p}" for p in range(10, 14)]
    rows += [warn, *(f"Training:  70%|███████   | {i}/1000 [00:14<00:06]" for i in range(L.RAW_GAP // 40)),
             "step 3 loss 1.0 ██", warn]  # after a second gap, an equal line before it
    log = tmp_path / "job.log"
    log.write_text("\n".join(rows) + "\n", encoding="utf-8")  # one block: its last line ends the file

    def kept(raw: bool) -> list[tuple[int, object, str]]:
        monkeypatch.setattr(L, "RAW_REFS", raw)
        monkeypatch.setattr(reread, "_PATHS", {})
        model = api.build([str(log)], api.Options(jobs=1, shared_cache=False)).model
        return sorted((ev.line, ev._text, ev.text) for ev in _kept(model))  # type: ignore[attr-defined]

    used: list[int] = []
    real = L.FileParser._raw_ref
    monkeypatch.setattr(L.FileParser, "_raw_ref",
                        lambda self, start, line, n: used.append(start) or real(self, start, line, n))
    on, off = kept(True), kept(False)
    assert len(on) >= 6 and all(type(where) is int for _, where, _ in on) and len(used) >= 2
    assert [(n, text) for n, _, text in on] == [(n, text) for n, _, text in off] \
        == [(n, rows[n - 1]) for n, _, _ in off]
    assert on == off
    data = b"ab\nxab\nab"
    assert [L._line_at(data, b"ab", s) for s in (0, 1, 4, 8)] == [0, 7, 7, -1]
    # a line with an equal line before it in the block: its own place, by the line ends before it
    block = "\n".join(rows)
    fp = L.FileParser(str(log), keep_text=False)
    fp._rblock, fp._rraw, fp._rbyte, fp._rbase, fp._rline = block, block.encode(), 0, 0, 1
    monkeypatch.setattr(reread, "_PATHS", {})
    reread.register(str(log), str(log))
    second = block.index("\n" + warn + "\n") + 1  # the second whole line that is the warning
    n = block.count("\n", 0, second) + 1
    where, at = fp._raw_ref(second, warn, n)
    assert at == len(block[:second].encode()) and where is not None and reread.line(str(log), where, n) == warn
    assert fp._raw_ref(second, warn, n + 1) == (None, -1)  # no whole line there is the warning
