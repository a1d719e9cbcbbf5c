"""--jobs N: this process and N-1 workers share the runs of files; results come back in
input order whoever parsed them."""
from __future__ import annotations

import os
import time
from pathlib import Path

from ncclsleuth import api
from ncclsleuth.ingest.sources import discover
from ncclsleuth.parallel import local as P

ROOT = Path(__file__).resolve().parent.parent


def _slow_task(args):  # type: ignore[no-untyped-def]
    """_parse_task that takes a while and says which process ran it."""
    time.sleep(0.05)
    model, notices, read = _REAL(args)
    model.parsed_by = os.getpid()
    return model, notices, read


_REAL = P._parse_task


def test_runs_are_shared_and_come_back_in_order(monkeypatch):
    monkeypatch.setattr(P, "_parse_task", _slow_task)  # forked workers inherit the patch
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    assert len(files) >= 8
    runs = P._runs(files, 2)
    results = list(P.parallel_results(files, 2, True))
    assert len(results) == len(runs)
    by = [m.parsed_by for m, _, _ in results]
    assert os.getpid() in by and set(by) - {os.getpid()}, by  # both processes parsed runs
    got = [s for m, _, _ in results for s in m.sources]
    assert got == [f.display for f in files]  # input order, whoever parsed each run


def test_guided_runs_cover_every_file_once_and_shrink():
    files = list(range(1000))
    runs = P._runs(files, 2)  # type: ignore[arg-type]
    assert [f for r in runs for f in r] == files
    sizes = [len(r) for r in runs]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1 and max(sizes) <= 256


def test_progress_counts_files_of_each_run(monkeypatch):
    """The progress bar knows the files and bytes up front (ETA) and counts them done, also
    when a part is a worker's run of many files; it draws on its own console (stderr)."""
    import io
    import time

    from rich.console import Console

    import ncclsleuth.cli.progress as PR

    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 0)
    out = io.StringIO()
    job = ROOT / "fixtures" / "examples" / "desync-16"
    with PR.progress_for(enabled=True, delay=0, console=Console(file=out, force_terminal=True, width=100)) as bar:
        assert bar is not None
        api.build([str(job)], api.Options(jobs=2, progress=bar.tick, on_inputs=bar.inputs))
        for _ in range(100):  # the timer thread starts the bar
            if bar.progress is not None:
                break
            time.sleep(0.01)
        task = bar.progress.tasks[0]
        total = sum(p.stat().st_size for p in job.iterdir())
        assert (bar.total_files, bar.done_files) == (16, 16)
        assert task.total == total and task.completed == total
        assert task.fields["files"] == "16/16 files"
    assert "ETA" in out.getvalue()


def test_fast_exit_only_after_analyze(tmp_path):
    """``analyze``, ``diff``, ``topology`` and ``report`` end without interpreter teardown (atexit
    handlers do not run); other commands exit as usual."""
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, os\natexit.register(lambda: open(os.environ['NS_MARK'], 'w').write('torn down'))\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    diff = ROOT / "fixtures" / "diff"
    for args, teardown in ((["analyze", str(ROOT / "fixtures" / "examples" / "desync-16"), "--format", "json"], False),
                           (["diff", str(diff / "good"), str(diff / "bad"), "--format", "json"], False),
                           (["topology", str(ROOT / "fixtures" / "examples" / "desync-16"), "--format", "json"], False),
                           (["report", str(ROOT / "fixtures" / "examples" / "desync-16"), "--format", "markdown"], False),
                           (["rules", "list"], True)):
        mark = tmp_path / ("mark-" + args[0])
        res = subprocess.run([sys.executable, "-m", "ncclsleuth", *args], capture_output=True, text=True,
                             env={**env, "NS_MARK": str(mark)})
        assert res.returncode in (0, 1), res.stderr
        assert res.stdout.strip()  # the output is all there
        assert mark.exists() is teardown, args


def test_analyze_puts_its_objects_out_of_the_collectors_reach_before_its_fast_exit(tmp_path):
    """The collector, paused for ``analyze``, is on again as its exit unwinds: its first pass went
    over the whole job model for nothing (0.07-0.17 s on the 8,000-rank file).  The console
    script's ``analyze`` freezes what is alive (``gc.freeze``) before it ends without teardown."""
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(
        "import gc, os\n_exit = os._exit\n"
        "def _mark(code):\n    open(os.environ['NS_MARK'], 'w').write(str(gc.get_freeze_count()))\n    _exit(code)\n"
        "os._exit = _mark\n")
    mark = tmp_path / "mark"
    res = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", str(ROOT / "fixtures" / "examples" / "desync-16"),
                          "--format", "json"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path), "NS_MARK": str(mark)})
    assert res.returncode in (0, 1), res.stderr
    assert int(mark.read_text()) > 10_000  # the objects alive at the end (the model, the rules)


def test_only_the_console_scripts_analyze_freezes_and_only_before_a_fast_exit(monkeypatch):
    """A frozen object is never collected: a caller of the CLI in its own process (tests, a
    library) and an exit with teardown to do (a Dask client, child processes) keep the collector
    as it was."""
    import gc
    import sys

    from ncclsleuth import cli

    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    for name in ("distributed", "fsspec", "multiprocessing"):  # as a fresh process has them: not loaded
        monkeypatch.delitem(sys.modules, name, raising=False)
    for exits, loaded, expected in ((True, None, [True]), (False, None, []), (True, "distributed", []),
                                    (True, "fsspec", [])):
        frozen.clear()
        monkeypatch.setattr(cli, "_EXITS", [exits])
        monkeypatch.setattr(cli, "_FAST_EXIT", [False])
        if loaded:
            monkeypatch.setitem(sys.modules, loaded, sys)
        cli.allow_fast_exit()
        assert frozen == expected and cli._FAST_EXIT[0], (exits, loaded)
        if loaded:
            monkeypatch.delitem(sys.modules, loaded)


_PARENT = os.getpid()


def _failing_in_worker(args):  # type: ignore[no-untyped-def]
    """_parse_task that raises in a worker process (a bug there) and works here."""
    if os.getpid() != _PARENT:
        raise RuntimeError("worker bug")
    return _slow_task(args)


def _dying_worker(args):  # type: ignore[no-untyped-def]
    """_parse_task whose worker process dies (killed, out of memory) on its first run."""
    if os.getpid() != _PARENT:
        os._exit(9)
    return _slow_task(args)


def test_a_run_that_fails_in_a_worker_is_parsed_here(monkeypatch):
    monkeypatch.setattr(P, "_parse_task", _failing_in_worker)
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    results = list(P.parallel_results(files, 2, True))
    assert {m.parsed_by for m, _, _ in results} == {os.getpid()}
    assert [s for m, _, _ in results for s in m.sources] == [f.display for f in files]


def test_a_dead_worker_costs_time_not_results(monkeypatch):
    monkeypatch.setattr(P, "_parse_task", _dying_worker)
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    results = list(P.parallel_results(files, 2, True))
    assert [s for m, _, _ in results for s in m.sources] == [f.display for f in files]


def test_a_bug_raises_here_with_its_own_error(monkeypatch):
    """A run that fails everywhere raises in this process (not a hang, not a lost run)."""
    def broken(args):  # type: ignore[no-untyped-def]
        raise ValueError("parser bug")

    monkeypatch.setattr(P, "_parse_task", broken)
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    try:
        list(P.parallel_results(files, 2, True))
    except ValueError as exc:
        assert str(exc) == "parser bug"
    else:
        raise AssertionError("no error")


def test_claims_hand_out_each_index_once_across_processes():
    from ncclsleuth.parallel.forked import Claims

    claims = Claims(1000)
    children = []
    for _ in range(3):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.write(w, b",".join(str(i).encode() for i in _claimed(claims)))
            finally:
                os._exit(0)
        os.close(w)
        children.append((pid, r))
    mine = _claimed(claims)
    theirs = []
    for pid, r in children:
        with os.fdopen(r, "rb") as f:
            theirs += [int(x) for x in f.read().split(b",") if x]
        os.waitpid(pid, 0)
    assert sorted(mine + theirs) == list(range(1000))
    assert mine and theirs  # they really competed (each claim takes 1 ms)
    assert claims.next() is None


def test_a_lost_lock_token_is_put_back_once_no_worker_is_left():
    """A worker killed while holding the claim lock must not hang this process."""
    from ncclsleuth.parallel.forked import Claims

    claims = Claims(5)
    os.read(claims._r, 1)  # as a worker killed inside the critical section leaves it
    start = time.monotonic()
    assert claims.next(lambda: True) == 0
    assert time.monotonic() - start < 5


def _claimed(claims):  # type: ignore[no-untyped-def]
    out = []
    while (i := claims.next()) is not None:
        out.append(i)
        time.sleep(0.001)
    return out


def test_rules_load_while_workers_parse_and_before_a_serial_parse(monkeypatch):
    """``meanwhile`` (the rule pack's loading) overlaps the workers' parsing; with no
    workers it comes first, so a broken rule file is reported before a long parse."""
    job = [str(ROOT / "fixtures" / "examples" / "desync-16")]
    seen = []
    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 0)
    before = set(_children())  # other tests' servers may be running
    api.build(job, api.Options(jobs=2), meanwhile=lambda: seen.append(set(_children()) - before))
    assert len(seen) == 1 and len(seen[0]) == 1  # one worker, running while the rules load

    order = []
    real = api.parse_one
    monkeypatch.setattr(api, "parse_one", lambda *a, **k: (order.append("parse"), real(*a, **k))[1])
    api.build(job, api.Options(jobs=1), meanwhile=lambda: order.append("meanwhile"))
    assert order[0] == "meanwhile" and order.count("meanwhile") == 1 and "parse" in order


def _children() -> list[int]:
    """PIDs of this process's live children (Linux /proc)."""
    me = str(os.getpid())
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                out.append(int(pid))
    return out


def test_stopping_early_ends_the_workers_quietly(capfd):
    """A caller that stops reading (an error, a closed generator) ends the workers: no
    process is left behind and nothing is printed."""
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    before = set(_children())
    gen = P.parallel_results(files, 3, True)
    next(gen)
    gen.close()
    assert set(_children()) - before == set()
    assert capfd.readouterr().err == ""


def test_events_and_values_survive_the_trip_from_a_worker():
    """Worker results are pickled: every event kind and value record comes back with
    the same class and fields (events and values pickle as class + field values)."""
    import pickle

    from ncclsleuth import events as E

    ib = E.IbDev("mlx5_0", 1, "RoCE", 0, rail=2)
    edge = E.TreeEdge(3, (1, 2), 0, -1)
    for kind, cls in E.REGISTRY.items():
        ev = cls("f.log", 7, "the line", host="node1", pid=11, level="WARN")
        back = pickle.loads(pickle.dumps(ev, protocol=pickle.HIGHEST_PROTOCOL))
        assert type(back) is cls and back.to_dict() == ev.to_dict(), kind
    dev = E.NetIbDevices("f.log", 1, "t", devices=(ib,), oob=E.Iface("ib0", "10.0.0.1", 0))
    trees = E.Trees("f.log", 2, "t", edges=(edge,))
    for ev in (dev, trees):
        back = pickle.loads(pickle.dumps(ev))
        assert back.to_dict() == ev.to_dict()
    assert pickle.loads(pickle.dumps(ib)) == ib and hash(pickle.loads(pickle.dumps(edge))) == hash(edge)


def _count_forks(monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    """The pids of the workers forked from now on (``os.fork`` wrapped)."""
    forks: list[int] = []
    real = os.fork

    def counting_fork():  # type: ignore[no-untyped-def]
        pid = real()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counting_fork)
    return forks


def test_no_more_workers_than_runs_to_share(monkeypatch):
    """--jobs 16 on 3 files forks 2 workers, not 15."""
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files[:3]
    forks = _count_forks(monkeypatch)
    results = list(P.parallel_results(files, 16, True))
    assert [s for m, _, _ in results for s in m.sources] == [f.display for f in files]
    assert len(forks) == 2


def test_workers_stop_when_their_parent_is_killed(tmp_path):
    """A scheduler's SIGKILL of the main process must not leave workers parsing on."""
    import signal
    import subprocess
    import sys

    pids = tmp_path / "pids"
    script = f"""
import os, time
from ncclsleuth.parallel import forked as workers
def work(i):
    with open({str(pids)!r}, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    time.sleep(0.2)
    return i
for i in workers.run_in_order(40, work, 1):
    if i == 2:
        os.kill(os.getpid(), {int(signal.SIGKILL)})
"""
    subprocess.run([sys.executable, "-c", script], timeout=60)
    ran = {int(p) for p in pids.read_text().split()}  # the killed main process and its worker
    assert len(ran) == 2
    deadline = time.monotonic() + 5  # 38 runs of 0.2 s were left: parsing on would take 7.6 s
    alive = ran
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {p for p in ran if _state(p) not in ("Z", "gone")}
    assert not alive, alive


def _state(pid: int) -> str:
    """A process's state letter (Linux /proc), or "gone"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_a_failed_fork_leaves_the_work_to_the_processes_that_started(monkeypatch):
    """fork can fail (process limit, memory): the analysis goes on with fewer workers."""
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    real = os.fork
    calls = []

    def second_fails():  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) >= 2:
            raise OSError(11, "Resource temporarily unavailable")
        return real()

    monkeypatch.setattr(os, "fork", second_fails)
    results = list(P.parallel_results(files, 4, True))
    assert [s for m, _, _ in results for s in m.sources] == [f.display for f in files]
    assert len(calls) == 2
    def always_fails():  # type: ignore[no-untyped-def]
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(os, "fork", always_fails)  # no worker at all: this process parses every run
    results = list(P.parallel_results(files, 2, True))
    assert [s for m, _, _ in results for s in m.sources] == [f.display for f in files]


def test_worth_parallel_counts_sizes_only_until_there_is_enough(tmp_path, monkeypatch):
    from ncclsleuth.ingest.sources import InputFile
    from ncclsleuth.parallel import local

    small = tmp_path / "small.log"
    small.write_bytes(b"x" * 1000)
    big = tmp_path / "big.log"
    with open(big, "wb") as f:  # sparse: its size, not its bytes
        f.truncate(local.PARALLEL_MIN_BYTES)
    files = [InputFile(str(small)), InputFile(str(big))] + [InputFile(str(tmp_path / f"r{i}.log")) for i in range(500)]
    asked: list[str] = []
    real = local.os.path.getsize

    def getsize(path):
        asked.append(path)
        return real(path)

    monkeypatch.setattr(local.os.path, "getsize", getsize)
    assert local.worth_parallel(files, 2)
    assert asked == [str(small), str(big)]  # the 500 others (missing here) were never asked
    assert not local.worth_parallel(files[:1], 2)  # one file: one process
    assert not local.worth_parallel(files[:2], 1)  # --jobs 1
    assert not local.worth_parallel([InputFile(str(small)), InputFile(str(small))], 2)  # too few bytes


class _HalfSentInbox:
    """An inbox whose worker has sent the first half of result 0: the rest comes on the next
    waiting receive."""

    def __init__(self) -> None:
        self.open = {3: bytearray(b"half")}
        self.waits = 0

    def receive(self, timeout, into):  # type: ignore[no-untyped-def]
        if timeout > 0 and self.open[3]:
            self.waits += 1
            self.open[3].clear()
            into[0] = "from the worker"

    def partial(self) -> bool:
        return any(self.open.values())


class _NoClaims:
    def next(self, gone=None):  # type: ignore[no-untyped-def]
        raise AssertionError("claimed a run while a finished result was still arriving")


def test_a_result_on_its_way_is_read_before_claiming_another_run():
    """Before: the lead claimed (and parsed) the next run with a frame half read, and the
    worker's writer waited in the pipe until that run was done."""
    from ncclsleuth.parallel.forked import _collect

    inbox = _HalfSentInbox()
    got = next(_collect(1, lambda i: "parsed here", _NoClaims(), inbox))  # type: ignore[arg-type]
    assert got == "from the worker" and inbox.waits == 1


def test_worker_pipes_hold_a_megabyte_where_the_system_allows():
    import fcntl
    import sys

    from ncclsleuth.parallel.forked import PIPE_BYTES, _widen

    r, w = os.pipe()
    try:
        _widen(w)
        getsize = getattr(fcntl, "F_GETPIPE_SZ", None)
        if getsize is None:  # not Linux: nothing to ask, nothing changed
            assert not sys.platform.startswith("linux")
            return
        with open("/proc/sys/fs/pipe-max-size") as f:
            allowed = int(f.read())
        size = fcntl.fcntl(w, getsize)
        assert size == PIPE_BYTES if allowed >= PIPE_BYTES else size == 64 * 1024
    finally:
        os.close(r)
        os.close(w)


def test_results_larger_than_the_pipe_come_back_whole_and_in_order():
    """Frames of several MB (a piece of a big file) cross the pipe in many writes while both
    processes work on: each arrives whole, in input order, whoever computed it."""
    from ncclsleuth.parallel.forked import run_in_order

    def work(i: int) -> tuple[int, int, bytes]:
        time.sleep(0.01 * (i % 3))
        return i, os.getpid(), bytes([i % 251]) * (3 << 20)

    got = list(run_in_order(8, work, 1))
    assert [i for i, _, _ in got] == list(range(8))
    assert all(len(data) == 3 << 20 and data == bytes([i % 251]) * (3 << 20) for i, _, data in got)
    assert len({pid for _, pid, _ in got}) == 2  # both processes computed some


def _saving_slowly(marks: Path, seconds: float):  # type: ignore[no-untyped-def]
    """A ``ShapeCache.save`` that takes ``seconds`` and then leaves its process's mark in ``marks``."""
    def save(self) -> None:  # type: ignore[no-untyped-def]
        time.sleep(seconds)
        (marks / str(os.getpid())).write_text("saved")
    return save


def test_workers_finish_saving_what_they_learned_once_every_result_is_in(tmp_path, monkeypatch):
    """A worker saves what it learned (``worker_done``) after its last run.  The callers took
    exactly their results and closed the generator, which stopped the workers still saving: their
    templates were lost, and a save stopped between its write and its rename left a temporary file
    in the user's cache folder (seen: ``code-....bin.25689.tmp``).  Now every result in, the
    workers finish (per-rank runs and a big file's pieces alike)."""
    from ncclsleuth.ingest import blocks
    from ncclsleuth.ingest.sources import InputFile
    from ncclsleuth.parallel import split
    from ncclsleuth.parse.grammar import ShapeCache

    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(ShapeCache, "save", _saving_slowly(marks, 0.3))
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    assert len(list(P.parallel_results(files, 2, True))) >= 1
    assert [p.read_text() for p in marks.iterdir()] == ["saved"]  # the one worker's
    for p in marks.iterdir():
        p.unlink()
    big = tmp_path / "big.log"
    big.write_text("".join(Path(f.path).read_text() for f in files))
    monkeypatch.setattr(blocks, "BLOCK", 1024)  # pieces at block starts: a few KB each
    monkeypatch.setattr(split, "PIECES_PER_JOB", 100)
    items = split.plan([InputFile(str(big))], 2, piece_bytes=4096)
    assert items is not None and len(items) > 2
    assert len(list(split.split_results(items, 2, True))) == 1
    assert [p.read_text() for p in marks.iterdir()] == ["saved"]


def test_a_worker_that_does_not_finish_saving_is_stopped(tmp_path, monkeypatch):
    """The wait for the workers is bounded (``REAP_WAIT_S``): this process must never hang."""
    from ncclsleuth.parallel import forked
    from ncclsleuth.parse.grammar import ShapeCache

    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(ShapeCache, "save", _saving_slowly(marks, 60))
    monkeypatch.setattr(forked, "REAP_WAIT_S", 0.3)
    forks = _count_forks(monkeypatch)
    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    started = time.monotonic()
    assert len(list(P.parallel_results(files, 2, True))) >= 1
    assert time.monotonic() - started < 20
    assert forks and all(_state(pid) == "gone" for pid in forks)  # stopped and reaped
    assert not list(marks.iterdir())


def test_a_run_parsed_here_leaves_the_collector_as_it_was():
    """The lead parses runs too: the collector is paused around a run, not turned off for good (it
    stayed off after ``parallel_results``, and a later test that asserted it on failed)."""
    import gc

    files = discover([str(ROOT / "fixtures" / "examples" / "desync-16")]).files
    assert gc.isenabled()
    P._parse_task((files[:2], False, frozenset()))
    assert gc.isenabled()
    gc.disable()
    try:
        P._parse_task((files[:1], False, frozenset()))
        assert not gc.isenabled()
    finally:
        gc.enable()


class _NoClaimsAfter:
    """Claims that hand out the indices up to ``last`` and then none."""

    def __init__(self, last: int) -> None:
        self.left = list(range(last + 1))

    def next(self, workers_gone=None):  # type: ignore[no-untyped-def]
        return self.left.pop(0) if self.left else None


def test_a_handed_result_is_not_held_while_the_next_is_computed():
    """The results generator keeps no reference to what it handed on: the caller's replay of a piece
    frees it (a local of ``_collect`` held each piece through the parse of the next)."""
    import weakref

    from ncclsleuth.parallel.forked import _collect, _Inbox

    class Result:
        pass

    made: list[weakref.ref] = []
    alive_when_computing: list[int] = []

    def work(i: int) -> Result:
        alive_when_computing.append(sum(r() is not None for r in made))
        got = Result()
        made.append(weakref.ref(got))
        return got

    for got in _collect(3, work, _NoClaimsAfter(2), _Inbox([])):  # type: ignore[arg-type]
        del got  # what the caller does once it has replayed a piece
    assert alive_when_computing == [0, 0, 0]
