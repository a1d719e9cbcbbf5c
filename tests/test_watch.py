"""watch: follow a starting job's logs and raise findings as soon as the evidence is written.

Every live test writes a generated multi-rank job (bench/generate.py: real NCCL 2.23 and
PyTorch formats) into a folder *incrementally* from the test thread while a Watcher
polls it in another thread, and measures the wall time from writing the decisive line
to the finding (must be under 2 s).
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _jobs import generator  # the shared bench/generate.py loader (tests/_jobs.py)
from click.testing import CliRunner

from ncclsleuth.cli import main
from ncclsleuth.live import Watcher, parse_duration
from ncclsleuth.model.live import rank_ranges

ROOT = Path(__file__).resolve().parent.parent
LATENCY_S = 2.0


GEN = generator()


def job_lines(tmp_path: Path, inject: str, ranks: int, per_host: int, seed: int = 5) -> tuple[dict[str, list[str]], dict]:
    """The generated job, file name -> its lines (with line ends), and the manifest."""
    src = tmp_path / f"src-{inject}"
    man = GEN.generate(GEN.build_parser().parse_args(
        ["--ranks", str(ranks), "--per-host", str(per_host), "--channels", "2", "--inject", inject,
         "--nccl-version", "2.23", "--seed", str(seed), "--out", str(src)]))
    files = {p.name: p.read_text(encoding="utf-8").splitlines(keepends=True) for p in sorted(src.iterdir())}
    return files, man


def host_of(name: str) -> str:
    return name.split(".")[1]  # nccl.<host>.<pid>.log


def split_at(lines: list[str], marker: str) -> tuple[list[str], list[str]]:
    """Lines before the first line containing ``marker`` (and before the blank line NCCL puts before
    a WARN), and the rest."""
    for i, ln in enumerate(lines):
        if marker in ln:
            j = i - 1 if i and not lines[i - 1].strip() else i
            return lines[:j], lines[j:]
    return lines, []


def append(path: Path, lines: list[str]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(lines)


class Running:
    """A Watcher polling in a background thread; findings recorded with the wall time they appeared."""

    def __init__(self, paths: list[str], interval: float = 0.1, **kw) -> None:
        self.found: list[tuple[float, object]] = []
        self.w = Watcher(paths, on_finding=lambda f: self.found.append((time.time(), f)), **kw)
        self.interval = interval
        self._stop = threading.Event()
        self.lock = threading.Lock()  # held by each poll: a test holds it to write several files between polls
        self.errors: list[BaseException] = []
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                with self.lock:
                    self.w.poll()
                time.sleep(self.interval)
        except BaseException as exc:  # noqa: BLE001 - surfaced by the test
            self.errors.append(exc)

    def settle(self, polls: int = 3) -> None:
        """Wait until the watcher has polled a few more times (it has read what was written)."""
        target = self.w.polls + polls
        end = time.time() + 10
        while self.w.polls < target and time.time() < end:
            time.sleep(0.02)

    def wait_for(self, pred, timeout: float = 10.0):
        end = time.time() + timeout
        while time.time() < end:
            for t, f in list(self.found):
                if pred(f):
                    return t, f
            assert not self.errors, self.errors
            time.sleep(0.01)
        raise AssertionError(f"no such finding within {timeout} s; got {[f.rule_id for _, f in self.found]}")

    def ids(self) -> set[str]:
        return {f.rule_id for _, f in self.found}

    def stop(self) -> None:
        self._stop.set()
        self.t.join(5)
        assert not self.errors, self.errors


@pytest.fixture
def live(tmp_path):
    started: list[Running] = []

    def start(paths, **kw) -> Running:
        r = Running([str(p) for p in paths], **kw)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


# --------------------------------------------------------------------------- live findings


def test_silent_host_while_others_finished_init(tmp_path, live):
    """(a) ranks 8-11 on node002 stop in bootstrap; the other 12 ranks finish init."""
    files, _ = job_lines(tmp_path, "none", 16, 4)
    watched = tmp_path / "job"
    watched.mkdir()
    run = live([watched], silence=1.5)
    silent = {n for n in files if host_of(n) == "node002"}
    with run.lock:  # one poll sees all four start: a poll between the files would make rank 8 silent first
        for n in sorted(silent):  # these ranks start, reach Init START, then never write again
            before, _ = split_at(files[n], "Bootstrap timings")
            append(watched / n, before)
    t_silent = time.time()
    for n in sorted(set(files) - silent):  # the others start (new files appear) and finish init, in steps
        half = len(files[n]) // 2
        append(watched / n, files[n][:half])
    run.settle()
    for n in sorted(set(files) - silent):
        half = len(files[n]) // 2
        append(watched / n, files[n][half:])
    t_others = time.time()
    assert "WATCH001" not in run.ids()
    t, f = run.wait_for(lambda f: f.rule_id == "WATCH001", timeout=10)
    decisive = max(t_silent + 1.5, t_others)
    assert t - decisive < LATENCY_S, f"silence reported {t - decisive:.2f} s after it passed the threshold"
    assert f.hosts == ["node002"] and f.ranks == [8, 9, 10, 11]
    assert f.message.startswith("ranks 8-11 on node002 (every process on node002): no line for ")
    assert "last seen in bootstrap, while 12 of 16 processes finished NCCL init" in f.message
    assert all("Init START" in e.text for e in f.evidence)
    st = run.w.status()
    assert st["comms"][0]["complete"] == 12 and st["comms"][0]["rest_in"] == {"bootstrap": 4}
    assert st["hosts"][0]["host"] == "node002"
    print(f"silent rank latency: {t - decisive:.3f} s")


def test_first_warn_connect_refused(tmp_path, live):
    """(b) node001 bootstraps over docker0 (diagnosed from its Bootstrap line), then the first WARN."""
    files, man = job_lines(tmp_path, "wrong_iface", 8, 4)
    watched = tmp_path / "job"
    watched.mkdir()
    run = live([watched], silence=60)
    rest = {}
    for n, lines in files.items():
        before, rest[n] = split_at(lines, "NCCL WARN")
        append(watched / n, before)
    t, net001 = run.wait_for(lambda f: f.rule_id == "NET001")
    assert net001.hosts == man["culprit_hosts"] == ["node001"] and "docker0" in net001.title
    run.settle()
    assert "NET005" not in run.ids()
    first = next(n for n in sorted(files) if rest[n])  # one rank of node000 writes the first WARN
    t0 = time.time()
    append(watched / first, rest[first])
    t, f = run.wait_for(lambda f: f.rule_id == "NET005")
    assert t - t0 < LATENCY_S
    assert "Connection refused" in f.title and "Connect to 172.17.0.1" in f.evidence[0].text
    print(f"first WARN latency: {t - t0:.3f} s")


def test_socket_chosen_on_one_node_of_four(tmp_path, live):
    """(c) three nodes use NET/IB; the fourth finds no IB device and chooses Socket."""
    files, man = job_lines(tmp_path, "socket_fallback", 16, 4)
    (bad_host,) = man["culprit_hosts"]
    watched = tmp_path / "job"
    watched.mkdir()
    run = live([watched], silence=60)
    rest = {}
    for n, lines in files.items():
        if host_of(n) == bad_host:
            before, rest[n] = split_at(lines, "NET/IB : No device found")
            append(watched / n, before)
        else:
            append(watched / n, lines)
    run.settle()
    assert "NET003" not in run.ids()
    t0 = time.time()
    for n in sorted(rest):
        append(watched / n, rest[n])
    t, f = run.wait_for(lambda f: f.rule_id == "NET003")
    assert t - t0 < LATENCY_S
    assert f.hosts == [bad_host] and f.category == "socket_fallback"
    print(f"socket fallback latency: {t - t0:.3f} s")


def test_watchdog_timeout_names_the_laggard(tmp_path, live):
    """(d) 16 ranks run; 15 time out in collective #1245 and rank 0 names the one that never joined."""
    files, man = job_lines(tmp_path, "desync", 16, 8)
    (culprit,) = man["culprit_ranks"]
    watched = tmp_path / "job"
    watched.mkdir()
    run = live([watched], silence=60)
    rest = {}
    for n, lines in files.items():
        before, rest[n] = split_at(lines, "ProcessGroupNCCL.cpp:632")
        if rest[n] == []:  # the laggard: its dump-signal lines come instead
            before, rest[n] = split_at(lines, "ProcessGroupNCCL.cpp:1685")
        append(watched / n, before)
    run.settle()
    assert not {"DESYNC002", "TIMEOUT001"} & run.ids()
    t0 = time.time()
    for n in sorted(rest):
        append(watched / n, rest[n])
    t, f = run.wait_for(lambda f: f.rule_id == "DESYNC002")
    assert t - t0 < LATENCY_S
    assert f.ranks[:1] == [culprit] or f"Rank {culprit} " in f.title
    assert f"Rank {culprit} (host {man['culprit_hosts'][0]}) stopped at SeqNum 1244" in f.message
    tt, timeout = run.wait_for(lambda f: f.rule_id == "TIMEOUT001")
    assert tt - t0 < LATENCY_S
    print(f"watchdog timeout latency: {t - t0:.3f} s")


def test_cli_jsonl_exit_on_error_subprocess(tmp_path):
    """The real command: jsonl lines as findings appear, exit 1 at the first error."""
    files, man = job_lines(tmp_path, "desync", 16, 8)
    (culprit,) = man["culprit_ranks"]
    watched = tmp_path / "job"
    watched.mkdir()
    rest = {}
    for n, lines in files.items():
        before, rest[n] = split_at(lines, "ProcessGroupNCCL.cpp:632")
        if not rest[n]:
            before, rest[n] = split_at(lines, "ProcessGroupNCCL.cpp:1685")
        append(watched / n, before)
    proc = subprocess.Popen([sys.executable, "-m", "ncclsleuth", "watch", str(watched), "--format", "jsonl",
                             "--exit-on", "error", "--interval", "0.2", "--timeout", "60s"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()

    def reader() -> None:
        for ln in proc.stdout:
            lines.put((time.time(), ln))
        lines.put((time.time(), None))

    threading.Thread(target=reader, daemon=True).start()
    try:
        t, ln = lines.get(timeout=30)  # INITT001 (info): the watcher has read the job so far
        assert ln is not None and json.loads(ln)["rule_id"] == "INITT001", ln
        t0 = time.time()
        for n in sorted(rest):
            append(watched / n, rest[n])
        got = []
        while True:
            t, ln = lines.get(timeout=15)
            if ln is None:
                break
            got.append((t, json.loads(ln)))
        rc = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 1, proc.stderr.read()
    first_error = next((t, d) for t, d in got if d["severity"] == "error")
    assert first_error[0] - t0 < LATENCY_S
    by_id = {d["rule_id"]: d for _, d in got}
    assert "DESYNC002" in by_id and f"Rank {culprit} " in by_id["DESYNC002"]["title"]
    print(f"subprocess first error latency: {first_error[0] - t0:.3f} s")


# --------------------------------------------------------------------------- following files


def test_partial_line_waits_for_its_end(tmp_path):
    log = tmp_path / "r0.log"
    log.write_text("node0:11:11 [0] NCCL INFO NCCL version 2.23.4+cuda12.4\nnode0:11:11 [0] NCCL INFO Using net")
    w = Watcher([str(tmp_path)], silence=60)
    w.poll()
    assert w.model.lines == 1 and "net_selected" not in w.model.kind_counts
    append(log, ["work IB\n"])
    w.poll()
    assert w.model.lines == 2 and w.model.kind_counts["net_selected"] == 1
    assert next(iter(w.model.processes.values())).network == "IB"


def test_truncated_file_is_reread_and_rotated_file_followed(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    log = d / "r0.log"
    log.write_text("node0:11:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.2\n")
    w = Watcher([str(d)], silence=60)
    w.poll()
    assert set(w.model.nccl_versions()) == {"2.21.5"}
    log.write_text("node0:12:12 [0] NCCL INFO NCCL version 2.23.4+cuda12.4\n")  # truncated in place, rewritten
    w.poll()
    assert set(w.model.nccl_versions()) == {"2.23.4"} and w.model.lines == 1
    assert any("truncated" in n.message for n in w.notices)
    os.rename(log, tmp_path / "r0.log.1")  # rotated away out of the watched folder, a new file takes the name
    log.write_text("node0:12:12 [0] NCCL INFO Using network Socket\n")
    w.poll()
    assert w.model.kind_counts["nccl_version"] == 1 and w.model.kind_counts["net_selected"] == 1  # old kept
    p = w.model.processes[("node0", 12)]
    assert (p.nccl_version, p.network) == ("2.23.4", "Socket")


def test_renamed_within_folder_keeps_its_offset(tmp_path):
    log = tmp_path / "r0.log"
    log.write_text("node0:11:11 [0] NCCL INFO NCCL version 2.23.4+cuda12.4\n")
    w = Watcher([str(tmp_path)], silence=60)
    w.poll()
    os.rename(log, tmp_path / "r0.log.1")
    w.poll()
    assert w.model.kind_counts["nccl_version"] == 1  # not read twice


def test_a_thousand_files_cost_a_stat_each(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    for i in range(1000):
        (d / f"rank{i:04d}.log").write_text(f"h{i // 8}:{1000 + i}:{1000 + i} [{i % 8}] NCCL INFO Using network IB\n")
    w = Watcher([str(d)], silence=60)
    w.poll()
    assert len(w.files) == 1000 and w.model.kind_counts["net_selected"] == 1000
    time.sleep(1.1)  # past the folder-mtime grace period
    reads = w.reads
    t = time.perf_counter()
    for _ in range(5):
        w.poll()
    idle = (time.perf_counter() - t) / 5
    assert w.reads == reads  # nothing changed: nothing read
    append(d / "rank0500.log", ["h62:1500:1500 [4] NCCL INFO NCCL version 2.23.4+cuda12.4\n"])
    (d / "rank1000.log").write_text("h125:2000:2000 [0] NCCL INFO Using network IB\n")  # a rank starts late
    w.poll()
    assert w.reads == reads + 2 and len(w.files) == 1001
    assert idle < 0.1, f"idle poll of 1,000 files took {idle * 1000:.1f} ms"
    print(f"idle poll, 1,000 files: {idle * 1000:.1f} ms")


def test_absence_rules_wait_until_the_job_is_quiet(tmp_path):
    clock = [1000.0]
    log = tmp_path / "a.log"
    log.write_text(
        "a:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xabc - Init START\n"
        "b:2:2 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xabc - Init START\n"
        "a:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xabc - Init COMPLETE\n")
    w = Watcher([str(tmp_path)], silence=30, clock=lambda: clock[0])
    assert w.poll() == []  # still starting: rank 1 may yet complete
    clock[0] += 31
    ids = [f.rule_id for f in w.poll(force=True)]
    assert "INIT001" in ids and "WATCH001" in ids  # rank 1 on b: silent in bootstrap while rank 0 finished


def test_durations_and_rank_ranges():
    assert parse_duration("60s") == 60 and parse_duration("2m") == 120 and parse_duration("500ms") == 0.5
    assert parse_duration("1.5") == 1.5 and parse_duration("1h") == 3600
    with pytest.raises(ValueError):
        parse_duration("soon")
    assert rank_ranges([47, 40, 41, 42, 44]) == "40-42, 44, 47"


def test_once_exit_codes_and_formats(tmp_path):
    r = CliRunner().invoke(main, ["watch", "--once", str(ROOT / "fixtures" / "examples" / "desync-16")])
    assert r.exit_code == 1 and "DESYNC002" in r.output
    r = CliRunner().invoke(main, ["watch", "--once", "--format", "jsonl", str(ROOT / "fixtures" / "diff" / "good")])
    assert r.exit_code == 0 and r.output == ""
    r = CliRunner().invoke(main, ["watch", "--once", "--format", "json", str(ROOT / "fixtures" / "diff" / "bad")])
    assert r.exit_code == 1 and json.loads(r.output)["findings"][0]["rule_id"] == "NET001"
    r = CliRunner().invoke(main, ["watch", "--once", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "nothing to watch" in r.output
    r = CliRunner().invoke(main, ["watch", "--help"])
    assert "watchdog" in r.output and "--silence" in r.output


# --------------------------------------------------------------------------- events for bots


def test_events_new_updated_resolved_by_stable_id(tmp_path):
    """A silent host is a WATCH001 (new), stays one finding while its silence grows (no
    event), and is resolved when it speaks again; the ids do not change with the wording."""
    files, _ = job_lines(tmp_path, "none", 16, 4)
    watched = tmp_path / "job"
    watched.mkdir()
    now = [1000.0]
    events: list[tuple[str, str, dict]] = []
    w = Watcher([str(watched)], silence=5, clock=lambda: now[0], on_event=lambda k, f, c: events.append((k, f.id, c)))
    silent = {n for n in files if host_of(n) == "node002"}
    rest = {}
    for n in sorted(files):
        before, rest[n] = split_at(files[n], "Bootstrap timings") if n in silent else (files[n], [])
        append(watched / n, before)
    w.poll(force=True)
    for step in (6, 7, 8):  # silence of 6, 13, 21 s: one finding, no event for the growing numbers
        now[0] += step
        w.poll(force=True)
    watch_events = [e for e in events if e[1].startswith("WATCH001")]
    assert [k for k, _, _ in watch_events] == ["new"]
    (fid,) = {i for _, i, _ in watch_events}
    assert fid == "WATCH001/ranks 8-11"
    for n in sorted(silent):
        append(watched / n, rest[n])
    now[0] += 1
    w.poll(force=True)
    assert ("resolved", fid, {}) in events
    news = [i for k, i, _ in events if k == "new"]
    assert len(news) == len(set(news))  # a finding is new once


def test_count_dependent_error_waits_one_poll(tmp_path):
    """Half of the ranks' watchdog lines are written when a poll runs: the laggard found
    then is held back; the next poll, with every line, reports the right one first."""
    files, man = job_lines(tmp_path, "desync", 16, 8)
    (culprit,) = man["culprit_ranks"]
    watched = tmp_path / "job"
    watched.mkdir()
    events: list[tuple[str, object, dict]] = []
    w = Watcher([str(watched)], silence=60, on_event=lambda k, f, c: events.append((k, f, c)))
    rest = {}
    for n, lines in files.items():
        before, rest[n] = split_at(lines, "ProcessGroupNCCL.cpp:632")
        if not rest[n]:
            before, rest[n] = split_at(lines, "ProcessGroupNCCL.cpp:1685")
        append(watched / n, before)
    w.poll(force=True)
    names = sorted(rest)
    for n in names[: len(names) // 2]:
        append(watched / n, rest[n])
    w.poll(force=True)
    assert not [f for k, f, _ in events if k == "new" and f.rule_id == "DESYNC002"], "reported while arriving"
    held, _ = w.pending["DESYNC002"]  # half the lines in: the wrong collective, held back
    assert "never called collective #1246" in held.title
    for n in names[len(names) // 2:]:
        append(watched / n, rest[n])
    w.poll(force=True)
    w.poll(force=True)
    first = next(f for k, f, _ in events if k == "new" and f.rule_id == "DESYNC002")
    assert f"Rank {culprit} " in first.title and "never called collective #1245" in first.title
    assert "stopped at SeqNum 1244" in first.message
    assert not w.pending
    # a finding already out that grows is 'updated', with the previous value of what changed
    upd = next(c for k, f, c in events if k == "updated" and f.rule_id == "TIMEOUT001")
    assert set(upd) == {"message", "hosts", "ranks", "evidence_total"} and upd["hosts"] == ["node000"]
    now = next(f for k, f, _ in reversed(events) if k == "updated" and f.rule_id == "TIMEOUT001")
    assert now.hosts == ["node000", "node001"] and len(now.ranks) > len(upd["ranks"])


def test_cli_jsonl_events_carry_id_and_kind(tmp_path):
    r = CliRunner().invoke(main, ["watch", "--once", "--format", "jsonl", str(ROOT / "fixtures" / "examples" /
                                                                            "desync-16")])
    lines = [json.loads(x) for x in r.output.splitlines()]
    assert lines and all(x["event"] == "new" and x["id"] for x in lines)
    assert lines[0]["id"] == "DESYNC002" and lines[0]["rule_id"] == "DESYNC002"
