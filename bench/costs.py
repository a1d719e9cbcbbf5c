#!/usr/bin/env python3
"""What one more line of each kind costs ``analyze``, in instructions: where a log's time goes.

Wall time on a shared machine moves 20-40% within minutes (bench/HISTORY.md), so a change of a few
percent in the parse of one message is lost in it.  The instructions a process executes
(valgrind's callgrind, no cache simulation) are the same from one run to the next (~0.1%).  This
script takes a log (by default the 8,000-rank file of ``bench/targets.py``'s 8k check), sorts its
lines into kinds by the message's head (the words after ``NCCL INFO``, PyTorch's source file and
line, or "training output"), and for each of the most numerous kinds measures ``analyze --format
json --jobs 1`` on a file of its first ``n`` lines and on one of its first ``2n``: the difference
over ``n`` is what a line of that kind costs, start-up, caches and the report's fixed work taken
out.  Both files start with the first line in the log of each NCCL process (``host:pid``) that
prints one of the kind's 2n lines, so a line is counted as one of a process the analysis knows
already, as nearly every line of a job's log is (a kind printed once a process, such as ``NCCL
version``, then counts a second one).  And for a file: one-line files of the log's
first line, ``m`` against ``2m`` of them.  (``bench/floors.py``'s
section 5 times each kind's build alone, in process; this counts the whole ``analyze``, the rule
step included, which a problem line costs more than its parse, and compares builds.)

    python bench/costs.py                          the 8k job's lines (~10 min on 2 cores)
    python bench/costs.py --log my.log --top 8     another log, its 8 most numerous kinds
    python bench/costs.py --before "start=env PYTHONPATH=/tmp/base python -m ncclsleuth"
                                                   ... and another build, in the same table

Each build runs with a cache folder of its own (as the other benchmarks: ``bench/run.py``), warmed
by one run of each file first.  The estimate column multiplies a kind's cost by its lines in the
log: where the log's instructions go, as far as a line's cost does not depend on its neighbours
(a connection line in a run of its process's lines costs less than one alone: the kind's first
lines are taken as they come in the log).  Needs valgrind (its callgrind tool); the commands run
one per core at once (the counts do not depend on the load).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


sys.path.insert(0, HERE)  # bench is no package: its scripts load each other by path (floors._module)
import floors  # noqa: E402

R = floors._module("run")

#: digit runs and hex runs (a pointer, a commId) as one mark in a kind's name
_NUM = re.compile(r"0x[0-9a-fA-F]+|[0-9]+")
#: an NCCL line's level and message
_NCCL = re.compile(r" NCCL (INFO|WARN|TRACE|ABORT) (.*)")
#: a per-connection line's message (``Channel 03/24 : 5[5] -> 6[6] via P2P/IPC``)
_CONN = re.compile(r"Channel \d+/\d+ : \d+\[\d+\] -> ")
#: PyTorch's c10 log header (``[I1129 11:31:50.630429017 ProcessGroupNCCL.cpp:968]``): level, file:line
_C10 = re.compile(r"\[([IWEF])\d{4} [0-9:.]+ ([\w.]+:\d+)\]")
#: words of an NCCL message that name its kind
WORDS = 3


def kind_of(line: str) -> str:
    """The kind a line is counted under: ``NCCL INFO`` and its message's first words (numbers as
    ``N``; per-connection lines as one kind), PyTorch's level and source line, or the first words
    of any other line with ``[rank`` or ``NCCL`` in it; else training output."""
    m = _NCCL.search(line)
    if m is not None:
        msg = m.group(2)
        if _CONN.match(msg):
            return f"NCCL {m.group(1)} Channel N/N : a -> b (connection)"
        return f"NCCL {m.group(1)} " + " ".join(_NUM.sub("N", msg).split()[:WORDS])
    c = _C10.search(line)
    if c is not None:
        return f"torch {c.group(1)} {_NUM.sub('N', c.group(2))}"
    if "what():" in line or "terminate called" in line:
        return " ".join(_NUM.sub("N", line).split()[:3])
    return "training output (no NCCL, no c10 header)"


#: the NCCL process that printed a line (``host:pid:tid [dev]``)
_WHO = re.compile(r"([^\s:\[\]]+:\d+):\d+ \[\d+\]")


def who(line: str) -> str | None:
    """The NCCL process (``host:pid``) that printed ``line``, None where it names none.  Not a
    launcher rank's ``[rankN]:``: a rank's first line before its problem lines (its
    ``ProcessGroupNCCL initialization`` line) changes what the rule step makes of the job (ranks that
    said nothing else), and the count of 2n lines came out below that of n."""
    m = _WHO.match(line)
    return None if m is None else m.group(1)


def sort_lines(path: str, want: int) -> tuple[Counter[str], dict[str, list[str]], dict[str, str]]:
    """Each kind's count in the log, its first ``want`` lines (as they come, newline kept), and
    each process's or rank's first line."""
    counts: Counter[str] = Counter()
    first: dict[str, list[str]] = {}
    opened: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line if line.endswith("\n") else line + "\n"
            k = kind_of(line)
            counts[k] += 1
            got = first.setdefault(k, [])
            if len(got) < want:
                got.append(line)
            w = who(line)
            if w is not None and w not in opened:
                opened[w] = line
    return counts, first, opened


def context(lines: list[str], opened: dict[str, str]) -> list[str]:
    """The first line of each process or rank that prints one of ``lines``, in their order: put
    before a kind's lines, in both its files, so that what is counted is a line of a process the
    file knows already (as nearly every line of a job's log is), not the making of its process."""
    return [opened[w] for w in dict.fromkeys(who(line) for line in lines) if w is not None]


def warm_run(cmd: list[str]) -> None:
    """One run without valgrind: the build's caches (shapes, plans, rules) are made before counting."""
    cmd, env = R.run_env(cmd)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=R.neutral_cwd())


def write(path: str, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return path


def cases(log: str, top: int, per: int, files: int, tmp: str) -> tuple[list[dict[str, Any]], int]:
    """The kinds measured (the ``top`` most numerous with at least 2 lines, each with its n- and
    2n-line files) and the one-line-files case; and the log's line count."""
    counts, first, opened = sort_lines(log, 2 * per)
    out: list[dict[str, Any]] = []
    for i, (k, n_log) in enumerate(counts.most_common()):
        if len(out) >= top:
            break
        n = len(first[k]) // 2
        if n < 1:
            continue
        lines = first[k][:2 * n]
        before = context(lines, opened)
        out.append({"kind": k, "in_log": n_log, "n": n, "example": lines[0].rstrip("\n")[:160],
                    "context": len(before),
                    "small": write(os.path.join(tmp, f"k{i}.1.log"), before + lines[:n]),
                    "big": write(os.path.join(tmp, f"k{i}.2.log"), before + lines)})
    head = next((ls[0] for ls in first.values() if ls), "\n")
    for name, m in (("small", files), ("big", 2 * files)):
        d = os.path.join(tmp, f"files.{name}")
        os.makedirs(d)
        for j in range(m):
            write(os.path.join(d, f"rank{j}.log"), [head])
    out.append({"kind": "a file (one line of the log each)", "in_log": None, "n": files,
                "example": head.rstrip("\n")[:160], "small": os.path.join(tmp, "files.small"),
                "big": os.path.join(tmp, "files.big")})
    return out, sum(counts.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--log", help="the log whose lines are sorted (default: bench/targets.py's 8k job, made if missing)")
    ap.add_argument("--top", type=int, default=16, help="the most numerous kinds measured (default %(default)s)")
    ap.add_argument("--per", type=int, default=4000, help="lines of a kind in the smaller file, at most (default %(default)s)")
    ap.add_argument("--files", type=int, default=512, help="one-line files in the smaller folder (default %(default)s)")
    ap.add_argument("--before", action="append", metavar="[NAME=]COMMAND",
                    help="another ncclsleuth command counted the same way (repeatable)")
    ap.add_argument("--user-cache", action="store_true", help="run the builds with the user's cache folder")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    a = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("bench/costs.py counts instructions with valgrind's callgrind: install valgrind", file=sys.stderr)
        return 2
    log = a.log
    if log is None:
        log = floors._module("targets").logs("8k")
    log = os.path.abspath(log)
    m = R.machine()
    m["bytecode"] = R.ensure_bytecode()
    print(R.machine_md(m), flush=True)
    with tempfile.TemporaryDirectory(prefix="ncclsleuth-costs-") as tmp:
        rows, total = cases(log, a.top, a.per, a.files, tmp)
        tools = R.build_tools(a.before, "head", R._python_exe(R.ncclsleuth_cmd()),
                              None if a.user_cache else os.path.join(tmp, "caches"))
        jobs = [(t, r, size) for t in range(len(tools)) for r in range(len(rows)) for size in ("small", "big")]

        def cmd(t: int, r: int, size: str) -> list[str]:
            return tools[t][1] + ["analyze", "--format", "json", "--jobs", "1", rows[r][size]]

        for job in jobs:
            warm_run(cmd(*job))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            counted = dict(zip(jobs, pool.map(lambda j: R._instructions(cmd(*j)), jobs)))
    names = [n for n, _ in tools]
    for r, row in enumerate(rows):
        row["per_line"] = {}
        for t, name in enumerate(names):
            small, big = counted[(t, r, "small")], counted[(t, r, "big")]
            row["per_line"][name] = None if small is None or big is None else (big - small) / row["n"]
    print(f"\n`analyze --jobs 1`, instructions per line of each kind (one more line: the {2}n-line file "
          f"less the n-line one, over n), {os.path.basename(log)}: {total:,} lines.  Estimate: the "
          f"kind's lines in the log times the last build's cost, and its share of the estimates' sum.\n")
    print("| kind | lines in the log | n | " + " | ".join(f"{n} per line" for n in names)
          + (" | change" if len(names) > 1 else "") + " | estimate (G) | share |")
    print("|---|---:|---:|" + "---:|" * len(names) + ("---:|" if len(names) > 1 else "") + "---:|---:|")
    last = names[-1]
    est = {i: (row["in_log"] or 0) * (row["per_line"][last] or 0) for i, row in enumerate(rows)}
    whole = sum(est.values()) or 1
    for i, row in enumerate(rows):
        cells = [f"{row['per_line'][n]:,.0f}" if row["per_line"][n] is not None else "n/a" for n in names]
        first, now = row["per_line"][names[0]], row["per_line"][last]
        change = [f"{(now - first) / first:+.1%}" if first and now is not None else "n/a"] if len(names) > 1 else []
        in_log = f"{row['in_log']:,}" if row["in_log"] is not None else "-"
        share = f"{est[i] / whole:.1%}" if row["in_log"] else "-"
        kind = row["kind"].replace("|", "\\|")  # a message's own bar (``threadThresholds 8/8/64 | ...``)
        print(f"| {kind} | {in_log} | {row['n']:,} | " + " | ".join(cells + change)
              + f" | {est[i] / 1e9:.2f} | {share} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"log": log, "lines": total, "rows": [{k: v for k, v in row.items() if k not in ("small", "big")}
                                                            for row in rows], "machine": m}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
