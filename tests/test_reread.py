"""Evidence by reference (ncclsleuth.util.reread): the model keeps a line's place in its file
instead of its text, and the report is the same byte for byte as with every text kept, on the
fixtures, the shared corpus and generated jobs (one file and per-rank files, one process and
two, a file in pieces); a line that can no longer be read as it was says so."""
from __future__ import annotations

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
        ends = {type(ev).__name__: ev for t in model.tracks.values() for ev in (t.last, t.progress) if ev is not None}
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
    assert len(lasts) == 4 and all(type(ev._text) is str for ev in lasts)
    assert sorted(ev.text for ev in lasts) == [f"[rank{r}]: step 2 loss 0.5" for r in range(4)]
