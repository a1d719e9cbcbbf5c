"""Fuzz ncclsleuth for a fixed time budget: mutate real log lines, feed every stage, report crashes.

    python tools/fuzz.py --seconds 600 [--seed 1] [--out fuzz-crashes/] [--slow 2.0]

Inputs are built from the real lines of fixtures/ and the shared corpus: byte flips,
insertions, deletions, cuts, duplications, lines spliced into each other mid-line, random
bytes, odd line ends, and whole small logs.  Every input goes through ``envelope.peel``,
``FileParser.parse_lines`` and ``parse_block``; one in ``--analyze-every`` also through
the whole ``analyze`` path on a temp file and the JSON renderer.  Any exception, and
any input slower than ``--slow`` seconds, is a finding: its input is written to
``--out`` and a one-line summary printed.  Exit 1 when anything was found.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import shutil
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
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)

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
          b"WorkNCCL(SeqNum=1, OpType=ALLREDUCE", b"ncclSystemError: ", b"=" * 40]


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
    kind = rng.randrange(10)
    if kind == 0:
        return os.urandom(rng.randint(0, 2048))
    n = rng.randint(1, 40)
    lines = [mutate(rng, real) if rng.random() < 0.7 else rng.choice(real) for _ in range(n)]
    eol = rng.choice([b"\n", b"\n", b"\n", b"\r\n", b"\r"])
    return eol.join(lines) + (eol if rng.random() < 0.8 else b"")


def run_one(data: bytes, cache: ShapeCache, rules, full: bool, tmp: str) -> None:  # type: ignore[no-untyped-def]
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
        p = os.path.join(tmp, "rank0.log")
        with open(p, "wb") as fh:
            fh.write(data)
        report = api.analyze([p], api.Options(rules=rules))
        json.loads(render("json", report))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="fuzz-crashes")
    ap.add_argument("--slow", type=float, default=2.0, help="an input slower than this is a finding")
    ap.add_argument("--analyze-every", type=int, default=4, help="run the whole analyze path on 1 input in N")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    real = corpus_lines()
    if not real:
        print("no corpus lines found", file=sys.stderr)
        return 2
    rules, _ = load_rules()
    cache = ShapeCache()
    found: dict[str, int] = {}
    tried = full_runs = 0
    t_end = time.monotonic() + a.seconds
    print(f"fuzz: seed {seed}, {len(real)} corpus lines, {a.seconds:.0f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        while time.monotonic() < t_end:
            data = make_input(rng, real)
            full = tried % a.analyze_every == 0
            t0 = time.monotonic()
            problem = None
            try:
                run_one(data, cache, rules, full, tmp)
            except Exception as exc:  # noqa: BLE001 - that is what we are looking for
                tb = traceback.extract_tb(exc.__traceback__)
                where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
                problem = f"{type(exc).__name__} at {where}: {str(exc)[:120]}"
            dt = time.monotonic() - t0
            if problem is None and dt > a.slow:
                problem = f"slow input: {dt:.1f} s ({len(data)} bytes)"
            tried += 1
            full_runs += full
            if problem is not None:
                key = problem.split(":")[0] if problem.startswith("slow") else problem.split(": ")[0]
                if key not in found:
                    os.makedirs(a.out, exist_ok=True)
                    path = os.path.join(a.out, f"crash-{len(found):03d}.log")
                    Path(path).write_bytes(data)
                    print(f"FOUND {problem} -> {path}", flush=True)
                found[key] = found.get(key, 0) + 1
            if tried % 2000 == 0:
                print(f"  {tried} inputs, {len(found)} distinct problem(s)", flush=True)
    print(f"fuzz: {tried} inputs ({full_runs} through analyze) in {a.seconds:.0f} s, seed {seed}, "
          f"{len(found)} distinct problem(s)" + "".join(f"\n  {n}x {k}" for k, n in found.items()))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
