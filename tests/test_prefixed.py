"""NCCL INFO lines behind a launcher's or a log collector's prefix (ncclsleuth.parse.prefixed) go by
their plain line's plan and change nothing but speed: the same report, byte for byte, with the path
on and off, in one process and split over two; the same model (launcher ranks included); the
prefix read as the envelope reads it, and nothing taken that the envelope peels otherwise."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from _jobs import layout_job

from ncclsleuth import api
from ncclsleuth.ingest import blocks
from ncclsleuth.model.job import UNREAD_KINDS, JobModel
from ncclsleuth.parallel import split
from ncclsleuth.parse import learned, prefixed
from ncclsleuth.parse import lines as L
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.renderers import render

_HP = re.compile(r"([\w.-]+:\d+):\d+ \[")
_RANK = re.compile(r"\[rank(\d+)\]:")


def _prefixed(text: str, how: str) -> str:
    """Every line of ``text`` as ``how`` would have printed it: each process's lines with its own
    task number (``srun --label``: the order its first line came in), a time on each line
    (``kubectl logs --timestamps``), both ways torchrun and kubectl do, Open MPI's tag
    (``mpirun --tag-output``), NCCL's own time (2.26+, ``NCCL_DEBUG_TIMESTAMP_LEVELS=ALL``), or
    ``kubectl logs --prefix --timestamps``' pod, container and time."""
    tasks: dict[str, int] = {}
    out = []
    for i, line in enumerate(text.split("\n")):
        m = _HP.match(line)
        r = _RANK.match(line)
        task = tasks.setdefault(m.group(1), len(tasks)) if m else int(r.group(1)) if r else 0
        ts = f"2025-11-29T11:{30 + i // 60000 % 30:02d}:{i // 1000 % 60:02d}.{i % 1000:03d}456789Z"
        nccl_ts = f"[2025-11-29 11:{30 + i // 60000 % 30:02d}:{i // 1000 % 60:02d}.{i % 1000:03d}456] "
        out.append({"srun": f"{task}: {line}", "kubectl": f"{ts} {line}",
                    "kubectl-torchrun": f"{ts} [default{task}]:{line}",
                    "srun-kubectl": f"{task}: {ts} {line}", "mpirun": f"[1,{task}]<stdout>:{line}",
                    "kubectl-prefix": f"[pod/train-worker-{task}/pytorch] {ts} {line}",
                    "nccl-time": f"{nccl_ts}{line}" if m else line}[how] if line else line)
    return "\n".join(out)


@pytest.fixture(autouse=True)
def _no_shapes_read_before() -> None:
    """Each test reads its prefixes' shapes from their first line (the table is the process's)."""
    prefixed._SHAPES.clear()


@pytest.fixture(scope="module")
def plain_job(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("prefixed")
    return (layout_job(root, "one-file", ranks=32, comms=2, channels=8, noise=10) / "job.log").read_text()


def _ways(monkeypatch: pytest.MonkeyPatch, on: str) -> None:
    """The full way (``""``), learned plans of whole prefixed lines (``"learned"``), and both with
    the plain lines' plans dressed (``"dressed"``: what analyze does)."""
    monkeypatch.setattr(learned, "ENABLED", on != "")
    monkeypatch.setattr(prefixed, "ENABLED", on == "dressed")


def _report(path: Path, monkeypatch: pytest.MonkeyPatch, on: str, jobs: int = 1, piece: int | None = None) -> str:
    _ways(monkeypatch, on)
    report = api.analyze([str(path)], api.Options(jobs=jobs, piece_bytes=piece, cache=True, shared_cache=False))
    return render("json", report)


@pytest.mark.parametrize("how", ["srun", "kubectl", "kubectl-torchrun", "srun-kubectl", "mpirun", "nccl-time",
                                 "kubectl-prefix"])
def test_the_report_is_the_full_ways_in_one_process_and_split(tmp_path, monkeypatch, plain_job, how):
    path = tmp_path / "job.log"
    path.write_text(_prefixed(plain_job, how))
    full = _report(path, monkeypatch, "")
    assert "desync" in full.lower()  # the injected failure is found at all
    assert _report(path, monkeypatch, "learned") == full
    assert _report(path, monkeypatch, "dressed") == full
    monkeypatch.setattr(blocks, "BLOCK", 4096)
    monkeypatch.setattr(split, "PIECES_PER_JOB", 10_000)
    assert _report(path, monkeypatch, "dressed", jobs=2, piece=4096) == full


def _model(text: str, monkeypatch: pytest.MonkeyPatch, on: str) -> tuple[tuple, int]:
    """The model's state after ``text`` (blocks of ~5,000 characters), and the lines the full way
    parsed of those that hold `` NCCL INFO ``."""
    _ways(monkeypatch, on)
    full = 0
    record = L.FileParser._record_line

    def counted(self: L.FileParser, lineno: int, line: str) -> list:
        nonlocal full
        full += " NCCL INFO " in line
        return record(self, lineno, line)

    monkeypatch.setattr(L.FileParser, "_record_line", counted)
    model = JobModel(UNREAD_KINDS)
    fp = L.FileParser("t.log", ShapeCache(store=False), keep_text=False, use_catalog=False, sink=model,
                      drop=UNREAD_KINDS)
    for i in range(0, len(text), 5000):
        start = text.rfind("\n", 0, i) + 1 if i else 0
        end = text.rfind("\n", 0, i + 5000) if i + 5000 < len(text) else len(text)
        if end > start:
            fp.parse_block(text.count("\n", 0, start) + 1, text[start:end])
    model.settle()
    procs = sorted((k, p.first_line, p.last_line, p.last_kind, p.launcher_rank, p.net_conns, p.gdr_conns)
                   for k, p in model.processes.items())
    comms = sorted((k, sorted(c.hop_items()), sorted(c.transports.items())) for k, c in model.comms.items())
    kept = sorted((k, [e.to_dict() for e in evs]) for k, evs in model.events.items())
    return (procs, comms, sorted(model.kind_counts.items()), kept), full


@pytest.mark.parametrize("how", ["srun", "kubectl", "kubectl-torchrun", "srun-kubectl", "mpirun", "nccl-time",
                                 "kubectl-prefix"])
def test_the_model_is_the_full_ways_launcher_ranks_included(monkeypatch, plain_job, how):
    text = _prefixed(plain_job, how)
    fast, parsed_fast = _model(text, monkeypatch, "dressed")
    full, parsed_full = _model(text, monkeypatch, "")
    assert fast == full
    procs = fast[0]
    if how in ("srun", "kubectl-torchrun", "srun-kubectl", "mpirun"):  # every process's task number, as the full way
        assert procs and all(p[4] is not None for p in procs)
    nccl = text.count(" NCCL INFO ")
    assert parsed_full >= nccl  # the full way: every line (its plan's learning parses some again)
    # the path: about as few as of the plain lines (a shape's first lines before its plan, and the
    # check of each shape: two parses; here up to two shapes of prefix, ``9: `` and ``10: ``)
    _, parsed_plain = _model(plain_job, monkeypatch, "dressed")
    assert parsed_plain < nccl // 5
    assert parsed_fast <= 3 * parsed_plain


def test_a_prefix_is_read_as_the_envelope_reads_it():
    plain = "node3:4242:4300 [2] NCCL INFO Channel 00/24 : 5[2] -> 6[3] via P2P/IPC"
    ts = "2025-11-29T11:31:50.123456789Z"
    cases = {f"12: {plain}": (12, None), f"{ts} {plain}": (None, ts), f"[default7]:{plain}": (7, None),
             f"3: {ts} {plain}": (3, ts), f"[rank 5]: {plain}": (5, None), f"> {plain}": (None, None),
             f"[1,6]<stdout>:{plain}": (6, None), f"[2025-11-29 11:31:50.123456] {plain}": (None, "2025-11-29 11:31:50.123456")}
    for line, want in cases.items():
        k = line.index("node3")
        got = prefixed.fields(line, k)
        assert got is not None and got[:2] == want, line
        # a second prefix of the same shape is read from the same places, not as the first
        other = re.sub(r"\d", lambda m: str((int(m.group()) + 3) % 10), line[:k]) + line[k:]
        again = prefixed.fields(other, k)
        assert again is not None and again[2] == got[2], other
        assert (again[0] is None) == (want[0] is None) and (again[1] is None) == (want[1] is None)
        if want[0] is not None:
            assert again[0] != got[0]


def test_the_host_is_found_right_after_a_prefix_with_no_space():
    for prefix in ("[default3]:", "[1,3]<stdout>:", "2025-11-29T11:31:50.123456789Z [default3]:", "12: "):
        line = f"{prefix}node-3.x_y:4242:4300 [2] NCCL INFO Channel 00/24 : 5[2] -> 6[3] via P2P/IPC"
        assert prefixed.host_start(line, line.index(" [2]")) == len(prefix), prefix
    assert prefixed.host_start("node3 [2] NCCL INFO x", 5) == -1  # no pid, no tid


def test_a_task_number_that_a_time_also_holds_is_read_from_its_own_place():
    """The first line of its shape holds the task's ``3`` also as the time's ``03`` and ``003``: the
    rank's place is the run whose change moves it, and the shape's next line is read from there."""
    plain = "node3:4242:4300 [2] NCCL INFO Channel 00/24 : 5[2] -> 6[3] via P2P/IPC"
    first = f"3: 2025-11-29T11:30:03.003456789Z {plain}"
    assert prefixed.fields(first, first.index("node3"))[:2] == (3, "2025-11-29T11:30:03.003456789Z")
    later = f"7: 2025-11-29T11:31:03.003456789Z {plain}"
    assert prefixed.fields(later, later.index("node3"))[:2] == (7, "2025-11-29T11:31:03.003456789Z")


@pytest.mark.parametrize("line", [
    "[PG 0 Rank 3] node3:4242:4300 [2] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>",  # a process group's tag
    "[1,3]<stdout>:node3:4242:4300 [2] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>[1,4]<stdout>:x",  # Open MPI: split apart
    "12: node3:4242:4300 [2] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>`",  # a backtick peeled off the end
    "12: INFO:4242:4300 [2] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>",  # a host the envelope peels too
    "12: 1999-01-01T10:42:42 [2] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>",  # ... and one it reads as a time
    "12 node3:4242:4300 [2] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>",  # nothing the envelope peels
])
def test_a_line_the_envelope_peels_otherwise_is_not_taken(line):
    k = line.rfind(" ", 0, line.rfind(" ", 0, line.index(" NCCL INFO "))) + 1
    assert prefixed.fields(line, k) is None


def test_a_shape_whose_full_way_differs_goes_the_full_way(monkeypatch, plain_job):
    """Where the check finds the two ways apart, the line is the full way's: here every shape is
    made to fail it, and the model is still the full way's."""
    text = _prefixed(plain_job, "kubectl")
    monkeypatch.setattr(prefixed, "agrees", lambda *a: False)
    refused, parsed = _model(text, monkeypatch, "dressed")
    full, _ = _model(text, monkeypatch, "")
    assert refused == full
    assert parsed > text.count(" NCCL INFO ") // 2  # the full way (or a learned plan's of the whole line)


def test_a_log_of_a_new_long_prefix_on_every_line_keeps_the_tables_bounded(monkeypatch):
    """A hostile log: every NCCL INFO line behind a prefix of its own shape, some of them long; the
    tables the path keeps stay within their bounds, and lines past the length bounds go the full
    way (their model the full way's)."""
    monkeypatch.setattr(prefixed, "MAX_PREFIXES", 64)
    monkeypatch.setattr(prefixed, "MAX_SHAPES", 32)
    lines = []
    for i in range(1, 301):  # 300 shapes of prefix, ``[default1]:`` to a 300-digit task number
        lines.append(f"[default{'7' * i}]:node{i % 7}:{100 + i}:{200 + i} [0] NCCL INFO Using network IB")
    lines.append("12: node1:101:201 [0] NCCL INFO Using network " + "IB" * 1100)  # past MAX_CHARS
    text = "\n".join(lines)
    fast, _ = _model(text, monkeypatch, "dressed")
    full, _ = _model(text, monkeypatch, "")
    assert fast == full
    assert len(prefixed._SHAPES) <= 64
    _ways(monkeypatch, "dressed")
    cache = ShapeCache(store=False)
    fp = L.FileParser("t.log", cache, keep_text=False, use_catalog=False, sink=JobModel(UNREAD_KINDS),
                      drop=UNREAD_KINDS)
    fp.parse_block(1, text)
    assert 0 < len(cache.dressed) <= 32
    assert all(len(shape) <= prefixed.MAX_PREFIX for shape, _ in cache.dressed)


def _runs(text: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lines of each run of connection lines the dressed path handed over at once."""
    sizes: list[int] = []
    at_once = prefixed.Dressed.conn_lines

    def counted(self: prefixed.Dressed, source: str, first: int, hp: str, rests: list[str], cuts: dict) -> None:
        sizes.append(len(rests))
        at_once(self, source, first, hp, rests, cuts)

    monkeypatch.setattr(prefixed.Dressed, "conn_lines", counted)
    return sizes


@pytest.mark.parametrize("how", ["srun", "mpirun"])
def test_a_run_of_connection_lines_behind_one_prefix_goes_at_once(monkeypatch, plain_job, how):
    """One process's connection lines behind one prefix (its task number) go as one run, as they do
    plain. The model is the full way's."""
    text = _prefixed(plain_job, how)
    sizes = _runs(text, monkeypatch)
    fast, _ = _model(text, monkeypatch, "dressed")
    conn = len(re.findall(r"NCCL INFO Channel \d\d/\d+ : \d+\[", text))
    assert sum(sizes) > conn // 2 and min(sizes) >= 2  # most of them, two lines or more a run
    full, _ = _model(text, monkeypatch, "")
    assert fast == full


@pytest.mark.parametrize("how", ["kubectl", "kubectl-torchrun"])
def test_a_collectors_time_on_each_line_makes_no_run(monkeypatch, plain_job, how):
    text = _prefixed(plain_job, how)
    sizes = _runs(text, monkeypatch)
    fast, _ = _model(text, monkeypatch, "dressed")
    assert sizes == []
    assert fast == _model(text, monkeypatch, "")[0]


def test_a_run_ends_at_another_prefix_and_a_line_peeled_otherwise_breaks_it(monkeypatch):
    """A run stops where the next line has another task's prefix; a line of it that the envelope
    peels otherwise (a backtick at its end) makes the lines go one by one, that one the full way."""
    conn = "node3:4242:4300 [2] NCCL INFO Channel {:02d}/04 : 5[2] -> 6[3] via P2P/IPC"
    first = [f"{t}: node3:4242:4300 [2] NCCL INFO Channel 00/04 : 5[2] -> 6[3] via P2P/IPC" for t in (9, 12)]
    body = [f"12: {conn.format(c)}" for c in range(4)] + [f"13: {conn.format(c)}" for c in range(2)]
    text = "\n".join(first + body)  # the first lines teach the plan and check the shapes
    sizes = _runs(text, monkeypatch)
    assert _model(text, monkeypatch, "dressed")[0] == _model(text, monkeypatch, "")[0]
    assert sizes == [4, 2]
    sizes.clear()
    body[2] += "`"
    broken = "\n".join(first + body)
    assert _model(broken, monkeypatch, "dressed")[0] == _model(broken, monkeypatch, "")[0]
    assert sizes == [2]  # the two lines of task 13 only
