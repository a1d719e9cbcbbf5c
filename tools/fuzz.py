"""Fuzz ncclsleuth: mutate real log lines, feed every stage, report crashes, hangs and slow inputs.

    python tools/fuzz.py --count 1000000 [--workers N] [--seed 1] [--out fuzz-crashes/]
    python tools/fuzz.py --seconds 600

Inputs are built from the real lines of fixtures/ and the shared corpus: byte flips,
insertions, deletions, cuts, duplications, lines spliced into each other mid-line, whole
records glued in, random bytes, odd line ends, and small logs.  Every input goes through
``envelope.peel``, ``FileParser.parse_lines`` and ``parse_block``; one in
``--analyze-every`` also through the whole ``analyze`` path (in memory) and the JSON
renderer.

In-process and forked: the parent loads the grammar, catalog, rules and corpus once and
warms them up (the first parse of a process costs seconds: not an input's fault), then
forks ``--workers`` processes that share them copy-on-write and each run their part with
their own random stream (``seed``, worker).  A worker stops an input that runs past
``--hang`` seconds (an interval timer raises in it) and has an address-space cap
(``--memory``), so an endless loop or a blow-up is a finding, not a stuck fuzzer.  Any
exception, hang, memory error, input slower than ``--slow`` seconds, or a worker that dies
is a finding: its input is written to ``--out`` and a one-line summary printed.  Progress
(count, rate, the projected time for 1,000,000 inputs) is printed every ``--every``
seconds.  Exit 1 when anything was found.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "robustness"))
# A private cache folder: mutated lines would otherwise fill the user's template and code
# stores with thousands of shapes no real log has (one session left 21,000 behind).
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ncclsleuth-fuzz-cache-")
_PARENT = os.getpid()
atexit.register(lambda: os.getpid() == _PARENT and shutil.rmtree(os.environ["XDG_CACHE_HOME"], ignore_errors=True))

from _corpus import lines as corpus_lines  # noqa: E402

from ncclsleuth import api  # noqa: E402
from ncclsleuth.model.job import JobModel  # noqa: E402
from ncclsleuth.parse.envelope import peel  # noqa: E402
from ncclsleuth.parse.grammar import ShapeCache  # noqa: E402
from ncclsleuth.parse.lines import FileParser  # noqa: E402
from ncclsleuth.renderers import render  # noqa: E402
from ncclsleuth.rules.loader import load_rules  # noqa: E402

TOKENS = [b"NCCL ", b"WARN ", b"INFO ", b"[1,2]<stdout>:", b"[rank3]:", b"Traceback (most recent call last):",
          b'  File "x.py", line 1, in barrier', b"RuntimeError: ", b"](http://a)", b"  x.py:12", b"[E",
          b"ERROR:", b"node1:12:34 [0] ", b"misc/socket.cc:1 ", b"\r", b"\x1b[31m", b"\x00", b"\xff", b"\t",
          b"[PG ID 0 PG GUID 0(default_pg) Rank 3] ", b"Watchdog caught collective operation timeout: ",
          b"WorkNCCL(SeqNum=1, OpType=ALLREDUCE", b"ncclSystemError: ", b"=" * 40,
          b"(VllmWorker rank=0 pid=12) ", b"srun: error: ", b"terminate called after throwing an instance of '",
          b"node1.cm.cluster<40031>", b"ip-10-1-2-9.ec2.internal", b"fe80::1", b"0x1p3", b"\"", b"(", b"]"]
#: a million inputs is the target the progress lines project to
TARGET = 1_000_000


class Hang(BaseException):
    """Raised by the interval timer in an input past ``--hang`` (a BaseException: the code's own
    ``except Exception`` cannot swallow it)."""


def mutate(rng: random.Random, real: tuple[bytes, ...]) -> bytes:
    b = bytearray(rng.choice(real))
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(8)
        i = rng.randint(0, max(0, len(b) - 1))
        if op == 0 and b:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif op == 2 and b:
            del b[i:i + rng.randint(1, 12)]
        elif op == 3:
            del b[i:]
        elif op == 4:
            b[i:i] = b[i:i + rng.randint(1, 30)] * rng.randint(1, 50)
        elif op == 5:
            other = rng.choice(real)
            b[i:] = other[rng.randint(0, len(other)):]  # spliced mid-line
        elif op == 6:
            b[i:i] = rng.choice(real)  # a whole record glued in
        else:
            b[i:i] = rng.choice(TOKENS)
    return bytes(b)


def make_input(rng: random.Random, real: tuple[bytes, ...]) -> bytes:
    """One input: random bytes (1 in 20), a small log of up to 40 lines (1 in 10), else 1-3
    lines (the mutations act within a line: most of the search is there, at the rate that
    makes a million inputs an hour's work)."""
    kind = rng.randrange(20)
    if kind == 0:
        return rng.randbytes(rng.randint(0, 2048))
    n = rng.randint(1, 40) if kind < 3 else rng.randint(1, 3)
    lines = [mutate(rng, real) if rng.random() < 0.7 else rng.choice(real) for _ in range(n)]
    eol = rng.choice([b"\n", b"\n", b"\n", b"\r\n", b"\r"])
    return eol.join(lines) + (eol if rng.random() < 0.8 else b"")


def run_one(data: bytes, cache: ShapeCache, rules, full: bool) -> None:  # type: ignore[no-untyped-def]
    text = data.decode("utf-8", "replace").replace("\x00", "")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for ln in lines:
        peel(ln)
    fp = FileParser("fuzz.log", cache)
    for _ in fp.parse_lines((i + 1, s) for i, s in enumerate(lines)):
        pass
    fp = FileParser("fuzz.log", cache, keep_text=False, use_catalog=False, sink=JobModel())
    for _ in fp.parse_block(1, "\n".join(lines)):
        pass
    if full:
        report = api.analyze(api.memory_sources({"rank0.log": data}), api.Options(rules=rules, jobs=1))
        json.loads(render("json", report))


def _problem(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
    return f"{type(exc).__name__} at {where}: {str(exc)[:120]}"


def _on_alarm(signum, frame) -> None:  # type: ignore[no-untyped-def]
    raise Hang()


def worker(w: int, count: int, t_end: float, a: argparse.Namespace, real: tuple[bytes, ...], rules,  # type: ignore[no-untyped-def]
           out) -> None:
    """One forked worker: ``count`` inputs (or until ``t_end``); progress and findings as JSON
    lines on ``out``."""
    if a.memory:
        resource.setrlimit(resource.RLIMIT_AS, (a.memory << 20, a.memory << 20))
    signal.signal(signal.SIGALRM, _on_alarm)
    rng = random.Random(f"{a.seed}/{w}")
    cache = ShapeCache()
    found: set[str] = set()
    tried = full_runs = 0
    last = time.monotonic()

    def send(**msg: object) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    while tried < count and time.monotonic() < t_end:
        data = make_input(rng, real)
        full = tried % a.analyze_every == 0
        problem = None
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, a.hang)
        try:
            run_one(data, cache, rules, full)
        except Hang:
            problem = f"hang: past {a.hang:.0f} s ({len(data)} bytes)"
        except MemoryError:
            problem = f"MemoryError past {a.memory} MiB ({len(data)} bytes)"
        except Exception as exc:  # noqa: BLE001 - that is what we are looking for
            problem = _problem(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        dt = time.monotonic() - t0
        if problem is None and dt > a.slow:
            problem = f"slow input: {dt:.1f} s ({len(data)} bytes)"
        tried += 1
        full_runs += full
        if problem is not None:
            key = problem.split(":")[0]
            path = None
            if key not in found:
                found.add(key)
                os.makedirs(a.out, exist_ok=True)
                path = os.path.join(a.out, f"crash-w{w}-{len(found):03d}.log")
                Path(path).write_bytes(data)
            send(problem=problem, key=key, path=path)
        if time.monotonic() - last > 1.0:
            send(tried=tried, full=full_runs)
            last = time.monotonic()
    send(tried=tried, full=full_runs, done=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=None, help="stop after this many inputs (all workers)")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long (default 600 without --count)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="forked worker processes")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="fuzz-crashes")
    ap.add_argument("--slow", type=float, default=2.0, help="an input slower than this is a finding")
    ap.add_argument("--hang", type=float, default=20.0, help="an input running past this is stopped: a finding")
    ap.add_argument("--memory", type=int, default=2048, help="address-space cap per worker, MiB (0: none)")
    ap.add_argument("--analyze-every", type=int, default=50, help="run the whole analyze path on 1 input in N")
    ap.add_argument("--every", type=float, default=30.0, help="seconds between progress lines")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else int(time.time())
    a.seed = seed
    seconds = a.seconds if a.seconds is not None else (float("inf") if a.count else 600.0)
    count = a.count if a.count is not None else sys.maxsize
    real = corpus_lines()
    if not real:
        print("no corpus lines found", file=sys.stderr)
        return 2
    rules, _ = load_rules()
    # warm up what every process would pay once (grammar, catalog, rules, templates) before the
    # fork: the workers share it, and no input is timed with the start-up in it
    warm = ShapeCache()
    for data in real[:200]:
        run_one(data, warm, rules, False)
    run_one(b"\n".join(real[:50]), warm, rules, True)
    workers = max(1, min(a.workers, count))
    print(f"fuzz: seed {seed}, {len(real)} corpus lines, {workers} worker(s), "
          + (f"{count:,} inputs" if a.count else "") + (f" {seconds:.0f} s" if seconds != float("inf") else ""),
          flush=True)
    t0 = time.monotonic()
    t_end = t0 + seconds
    pipes: dict[int, tuple[int, object]] = {}
    for w in range(workers):
        share = count // workers + (1 if w < count % workers else 0) if a.count else sys.maxsize
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(r)
            code = 0
            try:
                with os.fdopen(wfd, "w") as out:
                    worker(w, share, t_end, a, real, rules, out)
            except BaseException:  # noqa: BLE001 - a worker never returns into the parent's code
                traceback.print_exc()
                code = 3
            os._exit(code)
        os.close(wfd)
        pipes[r] = (pid, os.fdopen(r))
    tried: dict[int, int] = {}
    full: dict[int, int] = {}
    found: dict[str, int] = {}
    next_print = t0 + a.every
    open_fds = set(pipes)
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], 1.0)
        for fd in ready:
            line = pipes[fd][1].readline()  # type: ignore[attr-defined]
            if not line:
                open_fds.discard(fd)
                continue
            msg = json.loads(line)
            if "problem" in msg:
                found[msg["key"]] = found.get(msg["key"], 0) + 1
                if msg["path"]:
                    print(f"FOUND {msg['problem']} -> {msg['path']}", flush=True)
            else:
                tried[fd], full[fd] = msg["tried"], msg["full"]
        now = time.monotonic()
        if now >= next_print:
            n = sum(tried.values())
            rate = n / (now - t0)
            print(f"  {n:,} inputs in {now - t0:.0f} s: {rate:.0f}/s, 1,000,000 in {TARGET / max(rate, 1e-9) / 60:.0f} "
                  f"min, {len(found)} distinct problem(s)", flush=True)
            next_print = now + a.every
    for pid, _f in pipes.values():
        _, status = os.waitpid(pid, 0)
        if status != 0:
            key = f"worker {pid} died (status {status})"
            found[key] = found.get(key, 0) + 1
            print(f"FOUND {key}", flush=True)
    took = time.monotonic() - t0
    n = sum(tried.values())
    rate = n / took if took else 0.0
    print(f"fuzz: {n:,} inputs ({sum(full.values()):,} through analyze) in {took:.0f} s with {workers} worker(s), "
          f"{rate:.0f}/s, 1,000,000 in {TARGET / max(rate, 1e-9) / 60:.1f} min; seed {seed}, "
          f"{len(found)} distinct problem(s)" + "".join(f"\n  {c}x {k}" for k, c in found.items()), flush=True)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
