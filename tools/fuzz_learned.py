"""Fuzz the learned plans (ncclsleuth.parse.learned): the same events with and without them.

    python tools/fuzz_learned.py --seed 11 --seconds 120
    python tools/fuzz_learned.py --info --seed 11 --seconds 120   # the makers of NCCL INFO shapes

Each input is one line of the fixtures or the corpus that the prefilter keeps (one per
position-exact shape): the line itself, then ``LEARN_AT - 1`` copies with each digit run
shifted by a random amount or left alone (the learning happens at the last of them), then 12
copies with random digits in every run.  The input is parsed with plans and without; the
events, the parser's counts and the ranks it saw must be equal.  A difference or a crash is
printed with its line; the last line says how many inputs ran and how many differed.

With ``--info`` the lines are the plain NCCL INFO ones (one per ``info_key`` shape), repeated
until their shape's maker is learned (``learned.maker_at``) from shifted copies, then followed
by 12 copies with random digits and random hex digits; the makers are switched with the plans.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import pytest  # noqa: E402  - the tests' monkeypatch switches the plans off and on
import test_learned as T  # noqa: E402

from ncclsleuth.parse import learned  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--info", action="store_true", help="fuzz the makers of plain NCCL INFO shapes")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    mp = pytest.MonkeyPatch()
    lines = T._info_lines() if args.info else T._lines()

    def shifted(line: str) -> str:
        return learned._RUN.sub(lambda m: learned._shift(m.group(), rng.randrange(10))
                                if rng.random() < 0.5 else m.group(), line)

    start, n, bad = time.time(), 0, 0
    while time.time() - start < args.seconds:
        line = rng.choice(lines)
        if args.info:  # the template after a few lines, its plan, then the maker at maker_at
            copies = [line] * learned.LEARN_AT + [shifted(line) for _ in range(learned.maker_at(line))] + \
                [T._random_values(line, rng) for _ in range(12)]
        else:
            copies = [line] + [shifted(line) for _ in range(learned.LEARN_AT - 1)] + \
                [T._random_digits(line, rng) for _ in range(12)]
        text = "\n".join(copies)
        n += 1
        try:
            same = T._parse(text, True, mp) == T._parse(text, False, mp)
        except Exception as exc:  # noqa: BLE001 - a crash is a finding
            print("CRASH", repr(exc), line[:200])
            bad += 1
            continue
        if not same:
            bad += 1
            print("DIFF", line[:200])
    print(f"inputs {n:,}, differing {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
