"""--jobs N: this process and N-1 workers share the runs of files; results come back in
input order whoever parsed them."""
from __future__ import annotations

import os
import time
from pathlib import Path

from ncclsleuth import pipeline as P
from ncclsleuth.ingest import discover

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
    results = list(P._parallel_results(files, 2, True))
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
    """The progress bar counts files, also when a part is a worker's run of many files."""
    import ncclsleuth.progress as PR

    shown = []

    class FakeProgress:
        def __init__(self, *a, **k):  # type: ignore[no-untyped-def]
            pass

        def start(self):  # type: ignore[no-untyped-def]
            pass

        def stop(self):  # type: ignore[no-untyped-def]
            pass

        def add_task(self, _):  # type: ignore[no-untyped-def]
            return 1

        def update(self, _task, description):  # type: ignore[no-untyped-def]
            shown.append(description)

    import rich.progress

    monkeypatch.setattr(rich.progress, "Progress", FakeProgress)
    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 0)
    with PR.progress_for(enabled=True, delay=0) as tick:
        P.build_model([str(ROOT / "fixtures" / "examples" / "desync-16")], jobs=2, progress=tick)
    assert shown and shown[-1].startswith("16 files, ")


def test_fast_exit_only_after_analyze(tmp_path):
    """``analyze`` ends without interpreter teardown (atexit handlers do not run);
    other commands exit as usual."""
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, os\natexit.register(lambda: open(os.environ['NS_MARK'], 'w').write('torn down'))\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for args, teardown in ((["analyze", str(ROOT / "fixtures" / "examples" / "desync-16"), "--format", "json"], False),
                           (["rules", "list"], True)):
        mark = tmp_path / ("mark-" + args[0])
        res = subprocess.run([sys.executable, "-m", "ncclsleuth", *args], capture_output=True, text=True,
                             env={**env, "NS_MARK": str(mark)})
        assert res.returncode in (0, 1), res.stderr
        assert res.stdout.strip()  # the output is all there
        assert mark.exists() is teardown, args
