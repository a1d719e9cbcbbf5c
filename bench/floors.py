#!/usr/bin/env python3
"""Where the time of issue 16's 8k one-file job goes, and what that leaves of its targets.

  python bench/floors.py                   the 8k job of bench/targets.py (generated there if missing)
  python bench/floors.py --repeat 5        more rounds
  python bench/floors.py --log PATH        another one-file log

``bench/targets.py`` says whether a target is met; this script says what stands between the
8k job and its targets (``--jobs 1`` >= 0.35x the baseline, ``--jobs 2`` >= 1.6x ``--jobs 1``),
measured in one run, so that the next change can be sized before it is written:

1. **Line classes.**  The baseline and ``analyze --jobs 1`` round-robin on the log and on three
   logs made from it: without its per-connection lines (``Channel NN/M : a[x] -> b[y] ...``),
   without any NCCL INFO line, and its NCCL INFO lines alone.
2. **Phases** of one ``--jobs 1`` analysis in a fresh process, the collector paused as the
   CLI does: import, rules, build (read, parse, model), diagnose (facts, rules, report), render.
   And the **per-line floor**: the least a Python loop does to dispatch a plain NCCL INFO line by
   its shape (find it, cut it out, mask its digits, look the shape up in a dict), with nothing
   done for it: what any parser that touches each line in Python pays, whatever it does next.
3. **What the model holds**: after one ``--jobs 1`` build, the RSS, the objects by type, the ints
   and strings they refer to, and what the rule step allocates on top; and by kind of line, the
   lines the model was handed and the events of them it keeps (:func:`census`).
4. **What ``--jobs 2`` pays to share one file.**  Each piece of the file's split (as ``--jobs 2``
   cuts it) parsed here with its recorder, its result pickled and unpickled (a worker's piece
   crosses a pipe), replayed into the file's model in order, and the file's end read again for
   the tail; from these and the phases, the least ``--jobs 2`` can take on two cores (every
   piece's parse and replay shared evenly, half the pieces shipped) and the ratio that allows;
   and the least ``--jobs N`` can take on machines of more cores (:func:`least_with`): every
   piece is replayed and every shipped piece unpickled by the lead process, in order, which
   bounds what more cores give one file.

5. **By kind of line**: each kind of line that is at least ``KIND_SHARE`` of the log (an NCCL INFO
   message by its first words, the per-connection lines, the lines that are not NCCL INFO) in a log
   of its own, built in process (``api.build``, ``--jobs 1``, the best of ``--repeat`` builds in one
   fresh process): what a line of each kind costs the build, so that a change aimed at one kind can
   be sized (every kind alone: lines whose meaning depends on lines of another kind, such as a
   communicator's lines before its Init line, cost what they cost without them).

Wall times are medians of ``--repeat`` rounds; MB is 10^6 bytes.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
#: the derived logs are written here (each with the source's size and mtime, made again when they change)
OUT = os.path.join(HERE, "out", "floors")
#: the plain NCCL INFO marker (``host:pid:tid [dev] NCCL INFO message``)
INFO = b" NCCL INFO "
#: what starts a per-connection line's message (then ``a[x] -> b[y]``)
CHANNEL = b" NCCL INFO Channel "


def _module(name: str) -> Any:
    """A script of bench/ (no package), loaded by path."""
    spec = importlib.util.spec_from_file_location(f"ncclsleuth_bench_{name}", os.path.join(HERE, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def is_conn(line: bytes) -> bool:
    """A per-connection line: ``Channel NN/M : <digits>[`` after the INFO marker."""
    at = line.find(CHANNEL)
    if at < 0:
        return False
    rest = line[at + len(CHANNEL):]
    colon = rest.find(b" : ")
    if colon < 0:
        return False
    peer = rest[colon + 3:]
    digits = len(peer) - len(peer.lstrip(b"0123456789"))
    return digits > 0 and peer[digits:digits + 1] == b"["


#: derived log name -> which lines it keeps
VARIANTS = {
    "no-connection-lines": lambda line: not is_conn(line),
    "no-nccl-info-lines": lambda line: INFO not in line,
    "nccl-info-lines-only": lambda line: INFO in line,
}


def derived(log: str, out: str | None = None) -> dict[str, str]:
    """The derived logs of ``log`` in folder ``out`` (default :data:`OUT`; name -> path), written
    unless up to date."""
    out = out or OUT
    os.makedirs(out, exist_ok=True)
    st = os.stat(log)
    stamp = f"{os.path.abspath(log)} {st.st_size} {st.st_mtime_ns}"
    paths = {name: os.path.join(out, f"{name}.log") for name in VARIANTS}
    mark = os.path.join(out, "source.txt")
    try:
        with open(mark) as f:
            if f.read() == stamp and all(os.path.exists(p) for p in paths.values()):
                return paths
    except OSError:
        pass
    outs = {name: open(paths[name], "wb") for name in VARIANTS}  # noqa: SIM115 - closed below
    try:
        with open(log, "rb") as f:
            for line in f:
                for name, keep in VARIANTS.items():
                    if keep(line):
                        outs[name].write(line)
    finally:
        for o in outs.values():
            o.close()
    with open(mark, "w") as f:
        f.write(stamp)
    return paths


#: the least share of a log's lines a kind of line needs to be measured on its own (section 5)
KIND_SHARE = 0.005
#: an NCCL INFO message's first two words, what names its kind (digits and signs made ``_``)
_WORDS = re.compile(rb"[^ \n]+(?: [^ \n]+)?")
_NOT_LETTERS = re.compile(rb"[^A-Za-z]+")


def kind_of(line: bytes) -> str:
    """The kind of a line for section 5: ``connection`` (a per-connection line), ``not NCCL INFO``,
    or an NCCL INFO message's first two words with every run of other characters than letters as
    ``_`` (``Init timings - ...`` -> ``Init_timings``, ``Channel 03/24 : 0 1 2`` -> ``Channel_``)."""
    at = line.find(INFO)
    if at < 0:
        return "not NCCL INFO"
    if is_conn(line):
        return "connection"
    m = _WORDS.match(line, at + len(INFO))
    words = m.group(0) if m else b""
    return _NOT_LETTERS.sub(b"_", words).decode("ascii")[:32] or "_"


def by_kind(log: str, out: str, share: float = KIND_SHARE) -> dict[str, tuple[str, int]]:
    """The kinds of line (:func:`kind_of`) that are at least ``share`` of ``log``'s lines, each in a
    log of its own in folder ``out``: kind -> (path, lines), most lines first."""
    from collections import Counter

    with open(log, "rb") as f:  # first the counts (the log is not held: the 8k one is 105 MB)
        counts = Counter(kind_of(line) for line in f)
    total = sum(counts.values())
    kept = [(k, n) for k, n in counts.most_common() if n >= share * total]
    os.makedirs(out, exist_ok=True)
    paths = {kind: (os.path.join(out, f"kind-{i:02d}.log"), n) for i, (kind, n) in enumerate(kept)}
    outs = {kind: open(path, "wb") for kind, (path, _) in paths.items()}  # noqa: SIM115 - closed below
    try:
        with open(log, "rb") as f:
            for line in f:
                o = outs.get(kind_of(line))
                if o is not None:
                    o.write(line)
    finally:
        for o in outs.values():
            o.close()
    return paths


def child_kinds(folder: str, repeat: str = "3") -> dict[str, Any]:
    """Seconds of the fastest of ``repeat`` ``--jobs 1`` builds of each ``kind-NN.log`` of ``folder``
    (run in a fresh process: imports, the rule pack and the caches made once, before)."""
    from ncclsleuth import api
    from ncclsleuth.api import Options
    from ncclsleuth.util.gcpause import paused

    out: dict[str, Any] = {}
    with paused():  # as ``analyze`` builds (a caller's collector is turned on again after)
        for name in sorted(n for n in os.listdir(folder) if n.startswith("kind-") and n.endswith(".log")):
            best = float("inf")
            for _ in range(int(repeat)):
                t0 = time.perf_counter()
                api.build([os.path.join(folder, name)], Options(jobs=1))
                best = min(best, time.perf_counter() - t0)
            out[name] = best
    return out


def count_lines(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            n += chunk.count(b"\n")
    return n


# --------------------------------------------------------------------------- children


def child_phases(log: str) -> dict[str, float]:
    """One ``--jobs 1`` analysis, phase by phase, and the per-line floor (run in a fresh process)."""
    import gc

    t0 = time.perf_counter()
    gc.disable()  # as the console script and ``analyze`` do
    from ncclsleuth import api
    from ncclsleuth.api import Options
    from ncclsleuth.renderers import render

    t1 = time.perf_counter()
    options = Options(jobs=1)
    rules = api.load_rules(options)
    t2 = time.perf_counter()
    built = api.build([log], options)
    t3 = time.perf_counter()
    report = api.diagnose(built.model, rules, [n.to_dict() for n in built.notices])
    t4 = time.perf_counter()
    render("json", report)
    t5 = time.perf_counter()
    return {"import": t1 - t0, "rules": t2 - t1, "build": t3 - t2, "diagnose": t4 - t3, "render": t5 - t4,
            "floor": per_line_floor(log)}


def per_line_floor(log: str) -> float:
    """Seconds of the least per-line work on the NCCL INFO lines of ``log``: each found with
    ``str.find``, cut out, its digits masked (the shape key ``fastpath`` looks plans up by) and
    its shape looked up in a dict; blocks of 64 KB as the reader makes them, decoding not counted."""
    from ncclsleuth.ingest.blocks import BLOCK
    from ncclsleuth.parse.grammar import DIGITS_MASK

    with open(log, "rb") as f:
        data = f.read()
    blocks = []
    pos = 0
    while pos < len(data):
        end = data.rfind(b"\n", pos, pos + BLOCK)
        end = len(data) if end <= pos else end
        blocks.append(data[pos:end].decode("utf-8", "replace"))
        pos = end + 1
    shapes: dict[bytes, int] = {}
    t0 = time.perf_counter()
    for text in blocks:
        find, at = text.find, 0
        while (nxt := find(" NCCL INFO ", at)) >= 0:
            start = text.rfind("\n", 0, nxt) + 1
            end = find("\n", nxt)
            end = len(text) if end < 0 else end
            shapes.get(text[start:end].encode().translate(DIGITS_MASK))
            at = end + 1
    return time.perf_counter() - t0


def child_pieces(log: str, piece_bytes: int | None = None) -> dict[str, Any]:
    """``--jobs 2``'s pieces of ``log`` taken here one after another: parse (recorded), pickle,
    unpickle, replay; the tail; and the split's own first pass (run in a fresh process;
    ``piece_bytes``: the split's piece size, its own by default)."""
    from ncclsleuth.util.gcpause import paused

    with paused():  # as in ``analyze`` (a caller's collector is turned on again after)
        return _pieces(log, piece_bytes)


def _pieces(log: str, piece_bytes: int | None) -> dict[str, Any]:
    import pickle

    from ncclsleuth import api
    from ncclsleuth.api import Options
    from ncclsleuth.model.build import worker_cache
    from ncclsleuth.parallel import split
    from ncclsleuth.parse.pieces import OpChunks

    found = api._discover([log])
    api._register_for_reading_again(found.files)
    drop = api._unread(Options())
    t0 = time.perf_counter()
    items = split.plan(found.files, 2) if piece_bytes is None else split.plan(found.files, 2, piece_bytes)
    t1 = time.perf_counter()
    assert items is not None, "the log is too small to be split"
    pieces = [it for it in items if it[0] == "piece"]
    out: dict[str, Any] = {"pieces": len(pieces), "split_pass": t1 - t0, "parse": 0.0, "pickle": 0.0,
                           "unpickle": 0.0, "replay": 0.0, "bytes": 0}
    into = None
    for item in pieces:
        _, f, sp, firsts, k = item
        a = time.perf_counter()
        got = split._work(item, True, drop)
        b = time.perf_counter()
        data = pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL)
        c = time.perf_counter()
        got = pickle.loads(data)
        if type(got.ops) is OpChunks:  # read back here: the lead reads a chunk at a time as it replays
            got.ops = [op for part in got.ops.lists() for op in part]
        d = time.perf_counter()
        if k == 0:
            into = split.Assembler(f, sp, firsts, worker_cache(True), drop)
        assert into is not None
        into.feed(got)
        e = time.perf_counter()
        out["parse"] += b - a
        out["pickle"] += c - b
        out["unpickle"] += d - c
        out["replay"] += e - d
        out["bytes"] += len(data)
    assert into is not None
    a = time.perf_counter()
    model, _, _ = into.done()
    out["tail"] = time.perf_counter() - a
    out["lines"] = model.lines  # the whole file was taken
    return out


def child_memory(log: str) -> dict[str, Any]:
    """What the ``--jobs 1`` model of ``log`` holds (run in a fresh process, collector paused as in
    ``analyze``): the process's RSS after the build, and what the build added to the objects the
    collector tracks, by type (``sys.getsizeof``, headers included), with the ints and strings they
    refer to (untracked: counted once each); then what the rule step allocates on top
    (``tracemalloc`` around it alone)."""
    import tracemalloc

    from ncclsleuth import api
    from ncclsleuth.api import Options
    from ncclsleuth.util.gcpause import paused

    with paused():
        options = Options(jobs=1)
        rules = api.load_rules(options)
        before = _heap()
        built = api.build([log], options)
        rss = _rss_mb()
        after = _heap()
        lines = built.model.kind_counts
        ranks = max((c.nranks or 0 for c in built.model.comms.values()), default=0)
        tracemalloc.start()
        api.diagnose(built.model, rules, [n.to_dict() for n in built.notices])
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    grown = {k: after[0][k] - before[0].get(k, 0) for k in after[0]}
    top = sorted(((k, v / 1e6) for k, v in grown.items() if v > 0), key=lambda kv: -kv[1])[:8]
    return {"rss_build": rss, "objects": sum(grown.values()) / 1e6, "events": (after[1] - before[1]) / 1e6,
            "ints": (after[2] - before[2]) / 1e6, "strs": (after[3] - before[3]) / 1e6, "top": top,
            "ranks": ranks, "rule_step_peak": peak / 1e6, "rule_step_kept": kept / 1e6,
            "by_kind": census(lines, after[4], before[4])}


def census(lines: Mapping[str, int], alive: Mapping[str, tuple[int, int]],
           before: Mapping[str, tuple[int, int]]) -> list[tuple[str, int, int, float]]:
    """(kind, lines the model was handed, events of it the build left alive, their MB), the kinds of
    the most lines first: what "decide once per shape what the model needs" has to work with (a kind
    whose lines leave no event is read and dropped; one that leaves an event a line is kept whole)."""
    out = []
    for kind in set(lines) | set(alive):
        n, size = alive.get(kind, (0, 0))
        n0, size0 = before.get(kind, (0, 0))
        out.append((kind, lines.get(kind, 0), n - n0, (size - size0) / 1e6))
    return sorted(out, key=lambda t: (-t[1], -t[2], t[0]))[:CENSUS_ROWS]


#: kinds of line the census lists
CENSUS_ROWS = 16


def _heap() -> tuple[dict[str, int], int, int, int, dict[str, tuple[int, int]]]:
    """Bytes of the objects the collector tracks, by type name; of the events among them; of
    the ints and strings they refer to (each counted once); and the events by kind (count, bytes)."""
    import gc
    from collections import Counter

    from ncclsleuth.events import Event

    objects = gc.get_objects()
    # made after the snapshot, so that they are not in it: the ids seen are ints of their own
    sizes: Counter[str] = Counter()
    kinds: dict[str, tuple[int, int]] = {}
    events = ints = strs = 0
    seen: set[int] = set()
    for o in objects:
        n = sys.getsizeof(o)
        sizes[type(o).__name__] += n
        if isinstance(o, Event):
            events += n
            k, sz = kinds.get(o.kind, (0, 0))
            kinds[o.kind] = (k + 1, sz + n)
        for r in gc.get_referents(o):
            t = type(r)
            if (t is int or t is str) and id(r) not in seen:
                seen.add(id(r))
                if t is int:
                    ints += sys.getsizeof(r)
                else:
                    strs += sys.getsizeof(r)
    return dict(sizes), events, ints, strs, kinds


def _rss_mb() -> float:
    """This process's resident set, MB (Linux; 0 where /proc is not there)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return 0.0


def _child(mode: str, log: str, env: dict[str, str] | None = None, *more: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, os.path.abspath(__file__), mode, log, *more], capture_output=True,
                       text=True, env=env, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.median(r[k] for r in runs) if isinstance(runs[0][k], float) else runs[0][k]
            for k in runs[0]}


# --------------------------------------------------------------------------- the report


def _print_kinds(kinds: dict[str, tuple[str, int]], seconds: dict[str, float], repeat: int, build: float) -> None:
    """Section 5: each kind's build, slowest first."""
    print(f"\n## 5. By kind of line (each kind of at least {KIND_SHARE:.1%} of the lines in a log of its own; "
          f"`--jobs 1` builds in process, the best of {repeat})\n")
    print("| kind | lines | build s | us a line |")
    print("|---|---:|---:|---:|")
    timed = [(kind, n, seconds[os.path.basename(path)]) for kind, (path, n) in kinds.items()]
    for kind, n, sec in sorted(timed, key=lambda t: -t[2]):
        print(f"| {kind} | {n:,} | {sec:.3f} | {sec / n * 1e6:.1f} |")
    print(f"\n{sum(t[2] for t in timed):.2f} s in all, against the whole log's build of {build:.2f} s.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", help="a one-file log (default: bench/targets.py's 8k job)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    R = _module("run")
    if a.log:
        log = os.path.abspath(a.log)
        if not os.path.isfile(log):
            ap.error(f"{a.log}: not a file (this script reads one file holding every rank)")
    else:
        log = _module("targets").logs("8k")
    from ncclsleuth.parallel.split import PIECE_BYTES

    split = os.path.getsize(log) >= 2 * PIECE_BYTES  # else ``--jobs 2`` parses it whole
    variants = {"the log": log, **derived(log)}
    exe = R.ncclsleuth_cmd()
    R.ensure_bytecode()
    R.warm(list(variants.values()))
    walls: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": os.path.join(tmp, "cache")}
        R.measure(exe + ["analyze", "--format", "json", "--jobs", "1", log], env=env)  # caches warmed once
        for _ in range(a.repeat):
            for name, path in variants.items():
                walls.setdefault((name, "baseline"), []).append(
                    R.measure([sys.executable, os.path.join(HERE, "run.py"), "--_baseline", path])["wall"])
                walls.setdefault((name, "analyze"), []).append(
                    R.measure(exe + ["analyze", "--format", "json", "--jobs", "1", path], env=env)["wall"])
        j2 = statistics.median(R.measure(exe + ["analyze", "--format", "json", "--jobs", "2", log], env=env)["wall"]
                               for _ in range(a.repeat))
        phases = _median_of([_child("--_phases", log, env) for _ in range(a.repeat)])
        pieces = _median_of([_child("--_pieces", log, env) for _ in range(a.repeat)]) if split else None
        memory = _child("--_memory", log, env)
        kinds = by_kind(log, os.path.join(tmp, "kinds"))
        kind_s = _child("--_kinds", os.path.join(tmp, "kinds"), env, str(a.repeat))
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"# Floors of {os.path.relpath(log)} (medians of {a.repeat})\n")
    print("## 1. Line classes (`analyze --jobs 1` against the baseline, same rounds)\n")
    print("| log | lines | baseline s | analyze s | x baseline |")
    print("|---|---:|---:|---:|---:|")
    for name, path in variants.items():
        b, t = med[(name, "baseline")], med[(name, "analyze")]
        print(f"| {name} | {count_lines(path):,} | {b:.2f} | {t:.2f} | {b / t:.2f}x |")
    base, j1 = med[("the log", "baseline")], med[("the log", "analyze")]
    print(f"\nAt 0.35x the whole analysis may take {base / 0.35:.2f} s (it takes {j1:.2f} s).\n")
    print("## 2. Phases of `--jobs 1` (a fresh process, collector paused) and the per-line floor\n")
    print("| import | rules | build | diagnose | render | per-line floor of the NCCL INFO lines |")
    print("|---:|---:|---:|---:|---:|---:|")
    print("| " + " | ".join(f"{phases[k]:.3f} s" for k in ("import", "rules", "build", "diagnose", "render",
                                                          "floor")) + " |")
    print("\n## 3. What the model holds (one `--jobs 1` build in a fresh process)\n")
    held = memory["objects"] + memory["ints"] + memory["strs"]
    per = f" ({held * 1e6 / memory['ranks'] / 1024:.1f} KiB a rank of {memory['ranks']:,})" if memory["ranks"] else ""
    print(f"RSS after the build {memory['rss_build']:.0f} MB. The build added {held:.1f} MB of objects{per}: "
          f"{memory['objects']:.1f} MB the collector tracks (events {memory['events']:.1f} MB), ints "
          f"{memory['ints']:.1f} MB and strings {memory['strs']:.1f} MB they refer to. The rule step "
          f"allocates {memory['rule_step_peak']:.1f} MB more at its peak and keeps {memory['rule_step_kept']:.1f} MB.\n")
    print("| type (tracked objects the build added) | MB |")
    print("|---|---:|")
    for name, mb in memory["top"]:
        print(f"| {name} | {mb:.1f} |")
    print("\n| kind (the most lines first) | lines | events kept after the build | their MB |")
    print("|---|---:|---:|---:|")
    for kind, n, kept_n, mb in memory["by_kind"]:
        print(f"| {kind} | {n:,} | {kept_n:,} | {mb:.1f} |")
    print("\n## 4. What `--jobs 2` pays to share the file\n")
    if pieces is None:
        print(f"The log is under {2 * PIECE_BYTES / 1e6:.0f} MB: `--jobs 2` parses it whole "
              f"({j2:.2f} s against `--jobs 1`'s {j1:.2f} s).")
        _print_kinds(kinds, kind_s, a.repeat, phases["build"])
        return 0
    print(f"{pieces['pieces']} pieces; the split's first pass {pieces['split_pass']:.3f} s.\n")
    print("| parse (recorded) | pickle | unpickle | replay | tail | pickled |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {pieces['parse']:.2f} s | {pieces['pickle']:.2f} s | {pieces['unpickle']:.2f} s | "
          f"{pieces['replay']:.2f} s | {pieces['tail']:.2f} s | {pieces['bytes'] / 1e6:.0f} MB |")
    serial = _serial(phases)
    least = least_with(2, phases, pieces)
    one = serial + phases["build"]
    free = _once(phases, pieces) + (pieces["parse"] + pieces["replay"]) / 2
    print(f"\nOn two cores, with every piece's parse and replay shared evenly and half the pieces shipped, "
          f"`--jobs 2` takes at least {least:.2f} s (measured: {j2:.2f} s) against `--jobs 1`'s "
          f"{one:.2f} s in process ({j1:.2f} s measured): at most {one / least:.2f}x (target 1.6x).  "
          f"Were shipping free (no pickle, no unpickle), at least {free:.2f} s: {one / free:.2f}x; what runs once "
          f"(start-up, rules, the rule step, rendering: {serial:.2f} s; the split's first pass; the tail) bounds it.")
    _print_cores(phases, pieces, one)
    _print_kinds(kinds, kind_s, a.repeat, phases["build"])
    return 0


#: the machines ``_print_cores`` projects ``--jobs N`` on (a GPU node has 16 to 128 cores)
CORES = (2, 4, 8, 16, 64)


def _serial(phases: dict[str, float]) -> float:
    """What an analysis runs once besides the build: start-up, rules, the rule step, rendering."""
    return phases["import"] + phases["rules"] + phases["diagnose"] + phases["render"]


def _once(phases: dict[str, float], pieces: dict[str, Any]) -> float:
    """What a ``--jobs N`` analysis of a file in pieces runs once: :func:`_serial`, the split's
    first pass and the file's tail."""
    return _serial(phases) + pieces["split_pass"] + pieces["tail"]


def _lead(k: int, pieces: dict[str, Any]) -> float:
    """The lead's own share of the pieces among ``k`` processes: it replays every piece and reads
    back the ``(k - 1) / k`` of them the workers parsed."""
    return pieces["replay"] + pieces["unpickle"] * (k - 1) / k


def least_with(n: int, phases: dict[str, float], pieces: dict[str, Any]) -> float:
    """The least ``--jobs n`` can take on ``n`` cores, from the measured parts: what runs once
    (:func:`_once`) and the pieces, shared among the ``k <= n`` processes that take least
    (:func:`_pieces_with`)."""
    return _once(phases, pieces) + min(_pieces_with(k, pieces) for k in range(2, max(n, 2) + 1))


def _pieces_with(k: int, pieces: dict[str, Any]) -> float:
    """The least the pieces take among ``k`` processes (the lead and ``k - 1`` workers).

    Every piece is replayed into the file's model by the lead process, in order
    (``parallel.split.Assembler``), and the pieces the workers parsed (``(k - 1) / k`` of them,
    shared evenly) are unpickled there: that much is the lead's alone.  The rest (parsing every
    piece, pickling the shipped ones) is shared; the lead takes pieces to parse when it is free.
    So the pieces take at least the longer of the lead's own share and an even share of all of
    it; more processes ship more pieces to the lead, so past some ``k`` they take longer.  At
    ``k`` = 2 this is the even share: (parse + replay + (pickle + unpickle) / 2) / 2."""
    even = (pieces["parse"] + pieces["replay"] + (pieces["pickle"] + pieces["unpickle"]) * (k - 1) / k) / k
    return max(_lead(k, pieces), even)


def _print_cores(phases: dict[str, float], pieces: dict[str, Any], one: float) -> None:
    """``least_with`` on machines of more cores: how far ``--jobs`` (the cores, by default) can take one file."""
    print("\nOn more cores (`--jobs` is the machine's cores by default), from the same parts:\n")
    print("| cores | least `--jobs N` s | at most x `--jobs 1` | the lead's replay and unpickling s (all N used) |")
    print("|---:|---:|---:|---:|")
    for n in CORES:
        t = least_with(n, phases, pieces)
        print(f"| {n} | {t:.2f} | {one / t:.2f}x | {_lead(n, pieces):.2f} |")
    best = least_with(CORES[-1], phases, pieces)
    print(f"\nHowever many cores: at least {best:.2f} s, {one / best:.2f}x: the lead replays every piece into the "
          f"model ({pieces['replay']:.2f} s) and reads back what the workers parsed (up to "
          f"{pieces['unpickle']:.2f} s), one piece after another, and runs the rule step.  Past that, the workers "
          f"must build the model (per-piece models merged, not every line's work replayed in one process).")


#: the measurements run in a fresh process each (``python bench/floors.py MODE LOG`` prints their JSON)
CHILDREN: dict[str, Any] = {"--_phases": child_phases, "--_pieces": child_pieces, "--_memory": child_memory,
                            "--_kinds": child_kinds}


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] in CHILDREN:
        fn = CHILDREN[sys.argv[1]]
        print(json.dumps(fn(*sys.argv[2:])))
        sys.exit(0)
    sys.exit(main())
