"""A first run (no knowledge table kept: a fresh cache folder, a new container) makes its rule
pack and knowledge table in a forked child and reads them back kept, as a warm run does: the
memory that reading 4.5 MB of YAML takes and frees is the child's, not the run's to keep.  The run
waits for the rule pack only; the child makes the knowledge table while the run parses
(ncclsleuth.api._first_run_beside; the child by ncclsleuth.parallel.forked.run_beside)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ncclsleuth.parallel import forked

ROOT = Path(__file__).resolve().parent.parent
PASTE = ROOT / "fixtures" / "examples" / "desync-16"

pytestmark = pytest.mark.skipif(not forked.available(), reason="the child is a forked process")

#: a first run's rules and knowledge, in a process of its own; the knowledge base's YAML must not
#: be read in that process (only in a child of it), and the table must be kept afterwards
_PROBE = """
import os, sys
from ncclsleuth import api, knowledge
from ncclsleuth.parallel import forked
if sys.argv[1] == "nofork":
    forked.available = lambda: False
me = os.getpid()
read_here = []
real = knowledge._docs
def docs(folder):
    if os.getpid() == me:
        read_here.append(folder)
    return real(folder)
knowledge._docs = docs
kept_before = knowledge.table_kept()
rules, child = api._rules_and_knowledge(api.Options())
api._knowledge_ready(child)
print(kept_before, knowledge.table_kept(), len(read_here), len(rules))
"""


def _run(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a process of its own (the test process has threads and children of other
    tests), with ``cache`` as its cache folder (a first run where it is new)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)} if cache is not None else None
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, env=env)


def _probe(tmp_path: Path, mode: str) -> list[str]:
    done = _run("-c", _PROBE, mode, cache=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_first_run_makes_its_tables_in_a_child_and_reads_them_kept(tmp_path: Path) -> None:
    before, after, read_here, rules = _probe(tmp_path, "fork")
    assert (before, after, read_here) == ("False", "True", "0")
    assert int(rules) > 100
    kept = {p.name.split("-")[0] for p in (tmp_path / "ncclsleuth").iterdir()}
    assert {"knowledge", "rulepack", "rules"} <= kept  # the table, the validated pack, its parsed YAML


def test_without_fork_a_first_run_makes_its_tables_itself(tmp_path: Path) -> None:
    before, after, read_here, rules = _probe(tmp_path, "nofork")
    assert (before, after, read_here) == ("False", "True", "1")
    assert int(rules) > 100


def test_a_first_run_reports_what_a_warm_run_reports(tmp_path: Path) -> None:
    cmd = ["-m", "ncclsleuth", "analyze", str(PASTE), "--format", "json", "--jobs", "1"]
    first = _run(*cmd, cache=tmp_path)
    second = _run(*cmd, cache=tmp_path)
    assert first.returncode == second.returncode == 1, first.stderr  # the example's findings
    assert first.stderr == second.stderr == ""  # the child says nothing
    assert json.loads(first.stdout)["findings"] and first.stdout == second.stdout


#: the run does not wait for the knowledge table: the child makes it while the run goes on (its
#: making slowed down here by 3 s), and the run waits for it where it asks for it
_BESIDE_RUN = """
import time
from ncclsleuth import api, knowledge
real = knowledge.prepare
def slow(*a, **k):
    time.sleep(3)
    return real(*a, **k)
knowledge.prepare = slow  # the child is forked with it
started = time.monotonic()
rules, child = api._rules_and_knowledge(api.Options())
back = time.monotonic() - started
kept_then = knowledge.table_kept()
api._knowledge_ready(child)
print(back < 2.5, kept_then, knowledge.table_kept(), time.monotonic() - started >= 3, len(rules) > 100)
"""


def test_a_first_run_parses_while_its_child_makes_the_knowledge_table(tmp_path: Path) -> None:
    done = _run("-c", _BESIDE_RUN, cache=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "True", "True", "True"]


#: run_beside in a process of its own
_BESIDE = """
import os, sys, time
from ncclsleuth.parallel import forked
mark = sys.argv[1]
said = forked.run_beside(lambda: print("from the child"))
said = said is not None and said.join()
failed = forked.run_beside(lambda: 1 / 0)
started = time.monotonic()
waited = forked.run_beside(lambda: time.sleep(30), wait_s=0.2)
took = time.monotonic() - started
# the second step runs while this process goes on: its file is not there yet, then it is
slow = forked.run_beside(lambda: None, lambda: (time.sleep(1), open(mark, "w").close()))
there_before = os.path.exists(mark)
joined = slow is not None and slow.join()
second_failed = forked.run_beside(lambda: None, lambda: 1 / 0)
second_failed = second_failed is not None and second_failed.join()
stopped = forked.run_beside(lambda: None, lambda: time.sleep(30), wait_s=0.5)
stopped = stopped is not None and stopped.join()
started = time.monotonic()
now = forked.run_beside(lambda: None, lambda: time.sleep(30))
now = now is not None and now.join(stop=True)
now = now or time.monotonic() - started > 10
try:
    os.waitpid(-1, os.WNOHANG)
    left = "a child left"
except ChildProcessError:
    left = "none left"
print(said, failed, waited, took < 10, there_before, joined, os.path.exists(mark), second_failed, stopped, now, left)
"""


def test_run_beside_says_whether_each_step_returned_and_stops_a_child_past_its_wait(tmp_path: Path) -> None:
    done = _run("-c", _BESIDE, str(tmp_path / "mark"))
    assert done.returncode == 0, done.stderr
    # the first step returned: a child to join (True); raised: None, its traceback nowhere; past its
    # wait: stopped, None; the second step: beside this process, joined; raised, past the wait or
    # stopped at once: False
    assert done.stdout == "True None None True False True True False False False none left\n"
    assert done.stderr == ""


def test_run_beside_does_not_fork_beside_other_threads() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        ran: list[int] = []
        assert forked.run_beside(lambda: ran.append(1)) is None
        assert ran == []  # not run here either: the caller does the work
    finally:
        stop.set()
        other.join()
