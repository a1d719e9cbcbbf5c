#!/usr/bin/env python3
"""Throughput, memory and start-up benchmark of ncclsleuth on synthetic multi-node logs.

One invocation measures, on the SAME files:

  baseline   a plain Python pass: binary ``readline`` of every line of every file
             (gzip-aware), UTF-8 decode, one anchored prefix regex
             ``^(\\S+):(\\d+):(\\d+) \\[(\\d+)\\] NCCL (INFO|WARN)``.  The floor of any
             Python parser of these files;
  parse      ``ncclsleuth parse DIR --format jsonl > /dev/null``;
  analyze    ``ncclsleuth analyze DIR --format json [--jobs N] > /dev/null``, only if
             ``ncclsleuth analyze --help`` exits 0 (``--jobs`` only if the help lists it).

Every measured command is a child process started with ``subprocess.Popen`` and reaped
with ``os.wait4``, which returns that child's own ``rusage``: wall time is taken around
it with ``time.perf_counter``, CPU time is ``ru_utime + ru_stime``, and peak RSS is
``ru_maxrss`` (the largest resident set of the child and of any descendant it waited
for; with ``--jobs N`` that is the largest single process, not the sum).  This avoids
``RUSAGE_CHILDREN`` deltas (a max over all children ever, useless after the first
large one) and does not depend on ``/usr/bin/time`` being installed.

Files are read once before timing so that every command sees a warm page cache.
MB/s counts uncompressed bytes (1 MB = 10^6 bytes).

Modes:
  python bench/run.py                         1M lines, 64 ranks, per-rank files
  python bench/run.py --lines 5000000 --ranks 256 --comms 3 --layout one-file --gzip
  python bench/run.py --logs DIR              measure existing logs, generate nothing
  python bench/run.py --sizes 1000000,2000000 scaling check (one job per size)
  python bench/run.py --cold-start            median of 10 starts on a 200-line paste
  python bench/run.py --profile 200000        cProfile of ``ncclsleuth parse`` (top 25)
  python bench/run.py --density               the density sweep: ~1%, ~30%, ~75% NCCL lines, per-rank
                                              folders and one file, noise and NCCL lines/s separately
  python bench/run.py --density --before /path/to/other/ncclsleuth   ... and another build, same run
  python bench/run.py --prefixes --sweep-lines 200000   the ~75% one-file job as srun --label, kubectl
                                              --timestamps, torchrun under kubectl, mpirun --tag-output
                                              and NCCL's own times print it
  python bench/run.py --density --before "main=env PYTHONPATH=/tmp/main python -m ncclsleuth"  (repeatable)
  python bench/run.py --sizes 1000000,2000000 --before "re=env NCCLSLEUTH_NO_RE2=1 python -m ncclsleuth"
                                              the sizes table with another build in the same rounds
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
PREFIX = r"^(\S+):(\d+):(\d+) \[(\d+)\] NCCL (INFO|WARN)"


# --------------------------------------------------------------------------- the baseline (runs as a child)


def _files(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        if os.path.isdir(p):
            for dp, dn, fn in os.walk(p):
                dn.sort()
                out.extend(os.path.join(dp, f) for f in sorted(fn) if not f.startswith("."))
        else:
            out.append(p)
    return out


def baseline(paths: list[str]) -> dict:
    match = re.compile(PREFIX).match
    lines = nbytes = hits = 0
    files = _files(paths)
    for path in files:
        with open(path, "rb") as raw:
            f = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == b"\x1f\x8b" else raw
            readline = f.readline
            while True:
                b = readline(1 << 20)
                if not b:
                    break
                lines += 1
                nbytes += len(b)
                if match(b.decode("utf-8", "replace")):
                    hits += 1
    return {"files": len(files), "lines": lines, "bytes": nbytes, "prefix_matches": hits}


# --------------------------------------------------------------------------- measuring a child


#: the folder measured commands run in: an empty one of the benchmark's, not the checkout (nor
#: a shared folder such as /tmp, where a stray ``ncclsleuth`` folder would be imported).
#: ``python -m ncclsleuth`` puts the current folder first on ``sys.path``, before ``PYTHONPATH``:
#: a build compared with ``--before "start=env PYTHONPATH=/tmp/base python -m ncclsleuth"`` from
#: the repository's root ran this checkout, not /tmp/base (every path handed to a command here
#: is absolute)
NEUTRAL_CWD = os.path.join(OUT, "cwd")


def neutral_cwd() -> str:
    """:data:`NEUTRAL_CWD`, made where it is not there yet."""
    os.makedirs(NEUTRAL_CWD, exist_ok=True)
    return NEUTRAL_CWD


def run_env(cmd: list[str], env: dict | None = None) -> tuple[list[str], dict | None]:
    """``cmd`` without its leading ``env VAR=VALUE ...`` words, and the environment that sets them.

    Measured through env(1) a build paid an extra exec (~1 ms) on every start that the build it
    was compared with did not: a ``--before "start=env PYTHONPATH=... python -m ncclsleuth"``
    start-up looked slower than it was."""
    extra: dict[str, str] = {}
    while cmd and os.path.basename(cmd[0]) == "env":
        i = 1
        while i < len(cmd) and "=" in cmd[i] and not cmd[i].startswith("-"):
            key, _, value = cmd[i].partition("=")
            extra[key] = value
            i += 1
        cmd = cmd[i:]
    if not extra:
        return cmd, env
    return cmd, {**(env if env is not None else os.environ), **extra}


def build_tools(before: list[str] | None, name: str, exe: list[str],
                caches: str | None) -> list[tuple[str, list[str]]]:
    """The builds measured: each ``--before [NAME=]COMMAND`` and this checkout's ``exe`` as ``name``.

    Each runs with a cache folder of its own under ``caches``, new for the run (None: the user's
    own): a start reads the caches, and one that earlier runs had grown (the template store
    before it was read by offset: 20 ms a start when full) made a build look slower than the one
    it was compared with.  A command's own ``env XDG_CACHE_HOME=...`` wins."""
    tools: list[tuple[str, list[str]]] = []
    for spec in before or ():  # NAME=COMMAND, or a bare command named "before"
        tname, eq, cmd = spec.partition("=")
        tools.append((tname, cmd.split()) if eq and " " not in tname else ("before", spec.split()))
    tools.append((name, exe))
    if caches is None:
        return tools
    return [(n, ["env", f"XDG_CACHE_HOME={os.path.join(caches, n)}", *c]) for n, c in tools]


def measure(cmd: list[str], stdout_path: str | None = None, env: dict | None = None) -> dict:
    """Run ``cmd`` (stdout to /dev/null or a file) in :data:`NEUTRAL_CWD`; wall, CPU, peak RSS
    from its own rusage (a leading ``env VAR=VALUE`` is set here, not run: :func:`run_env`)."""
    cmd, env = run_env(cmd, env)
    with tempfile.TemporaryFile() as err, open(stdout_path or os.devnull, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=neutral_cwd())
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen from waiting again
        err.seek(0)
        tail = err.read()[-2000:].decode("utf-8", "replace")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_kb": ru.ru_maxrss, "rc": p.returncode,
            "stderr": tail}


def measure_n(cmd: list[str], n: int, **kw) -> dict:
    return _median([measure(cmd, **kw) for _ in range(max(1, n))])


def _median(runs: list[dict]) -> dict:
    """One result for several runs: median wall and CPU, largest peak RSS."""
    best = dict(runs[0])
    best["wall"] = statistics.median(r["wall"] for r in runs)
    best["cpu"] = statistics.median(r["cpu"] for r in runs)
    best["rss_kb"] = max(r["rss_kb"] for r in runs)
    best["runs"] = len(runs)
    return best


# --------------------------------------------------------------------------- the tools


def ncclsleuth_cmd() -> list[str]:
    """The installed console script next to this interpreter (not a pyenv shim: a shim adds ~50 ms)."""
    here = os.path.join(os.path.dirname(sys.executable), "ncclsleuth")
    if os.access(here, os.X_OK):
        return [here]
    found = shutil.which("ncclsleuth")
    return [found] if found else [sys.executable, "-m", "ncclsleuth"]


def analyze_support(exe: list[str]) -> tuple[bool, bool]:
    try:
        r = subprocess.run(exe + ["analyze", "--help"], capture_output=True, text=True, timeout=60,
                           cwd=neutral_cwd())
    except (OSError, subprocess.TimeoutExpired):
        return False, False
    return r.returncode == 0, r.returncode == 0 and "--jobs" in r.stdout


def machine() -> dict:
    model = "?"
    mem = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    model = ln.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for ln in f:
                if ln.startswith("MemTotal"):
                    mem = "%.1f GiB" % (int(ln.split()[1]) / 2**20)
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "ncclsleuth"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        rev += " (ncclsleuth/ has local changes)" if dirty else ""
    except OSError:
        rev = "?"
    try:
        from importlib.metadata import version
        ver = version("ncclsleuth")
        lark_ver = version("lark")
    except Exception:  # noqa: BLE001
        ver = lark_ver = "?"
    try:  # the prefilter's RE2 scans (ncclsleuth/parse/bytescan.py) run where it is installed
        from importlib.metadata import version
        re2_ver = "google-re2 " + version("google-re2")
    except Exception:  # noqa: BLE001
        re2_ver = "no google-re2"
    return {"nproc": os.cpu_count(), "usable_cpus": usable, "cpu_model": model, "memory": mem,
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "os": f"{platform.system()} {platform.release()}", "ncclsleuth": ver, "lark": lark_ver, "git": rev,
            "re2": re2_ver}


def machine_md(m: dict) -> str:
    return (f"Machine: {m['nproc']} CPUs ({m['usable_cpus']} usable), {m['cpu_model']}, {m['memory']} RAM, "
            f"{m['os']}; {m['implementation']} {m['python']}; ncclsleuth {m['ncclsleuth']} (git {m['git']}), "
            f"lark {m['lark']}, {m.get('re2', 'google-re2 ?')}." + (f" {m['bytecode']}" if m.get("bytecode") else ""))


def ensure_bytecode() -> str:
    """Compile ncclsleuth's modules to .pyc first, as ``pip install`` does.

    With PYTHONDONTWRITEBYTECODE set (some sandboxes and CI images set it) and an
    editable install, no .pyc is ever written and every measured start compiles ~40
    modules again (~50 ms here): a cost no installed user pays.  Compiling once here
    writes the .pyc files Python then reads, whatever the variable says.
    """
    code = ("import compileall, os, ncclsleuth; "
            "compileall.compile_dir(os.path.dirname(ncclsleuth.__file__), quiet=1)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode:
        return "(could not pre-compile ncclsleuth's .pyc files)"
    return "ncclsleuth's .pyc files compiled before timing (as pip install does)."


# --------------------------------------------------------------------------- generation


def gen(out: str, lines: int, a: argparse.Namespace, **over) -> dict:
    gz = over.pop("gzip", a.gzip)
    opts = {"ranks": a.ranks, "per_host": a.per_host, "comms": a.comms, "channels": a.channels,
            "layout": a.layout, "inject": a.inject, "nccl_version": a.nccl_version, "seed": a.seed}
    opts.update(over)
    cmd = [sys.executable, os.path.join(HERE, "generate.py"), "--out", out, "--force",
           "--target-lines", str(lines)]
    for k, v in opts.items():
        cmd += ["--" + k.replace("_", "-"), str(v)]
    if gz:
        cmd.append("--gzip")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"run: generate failed:\n{r.stderr}")
    man = json.loads(r.stdout)
    print(f"generated {man['lines']:,} lines in {man['files']} file(s), "
          f"{man['bytes_uncompressed'] / 1e6:.1f} MB, in {time.perf_counter() - t0:.1f} s -> {out}", flush=True)
    return man


def warm(paths: list[str]) -> int:
    n = 0
    for f in _files(paths):
        with open(f, "rb") as fh:
            while True:
                b = fh.read(1 << 20)
                if not b:
                    break
                n += len(b)
    return n


# --------------------------------------------------------------------------- one throughput run


def throughput(logs: str, a: argparse.Namespace, exe: list[str]) -> dict:
    disk = warm([logs])
    res: dict = {"logs": logs, "disk_bytes": disk, "rows": []}
    tmp = tempfile.NamedTemporaryFile(delete=False, suffix=".json")
    tmp.close()
    try:
        b = measure_n([sys.executable, os.path.abspath(__file__), "--_baseline", logs], a.repeat,
                      stdout_path=tmp.name)
        with open(tmp.name) as f:
            info = json.load(f)
    finally:
        os.unlink(tmp.name)
    res.update(info)
    lines, nbytes = info["lines"], info["bytes"]
    base = b["wall"]

    def row(name: str, cmd_text: str, m: dict) -> None:
        res["rows"].append({"name": name, "cmd": cmd_text, "wall": m["wall"], "cpu": m["cpu"],
                            "rss_mib": m["rss_kb"] / 1024, "rc": m["rc"], "lines_s": lines / m["wall"],
                            "mb_s": nbytes / 1e6 / m["wall"], "x_base": m["wall"] / base,
                            "stderr": m["stderr"][-300:] if m["rc"] not in (0, 1) else ""})
        print(f"  {name:<22} {m['wall']:8.2f} s  rss {m['rss_kb'] / 1024:7.1f} MiB  rc {m['rc']}", flush=True)

    row("baseline (readline+regex)", "python bench/run.py --_baseline DIR", b)
    if not a.skip_parse:
        m = measure_n(exe + ["parse", logs, "--format", "jsonl"], a.repeat)
        row("ncclsleuth parse", "ncclsleuth parse DIR --format jsonl > /dev/null", m)
    has, jobs_ok = analyze_support(exe)
    res["analyze"] = has
    if has:
        cmds = []
        # with --before, every build in the same rounds (each with the user's cache folder, as
        # this checkout's runs here), named "NAME --jobs J"; without, this checkout alone
        tools = build_tools(a.before, "after", exe, None) if a.before else [("ncclsleuth", exe)]
        for tool, texe in tools:
            for j in (a.jobs if jobs_ok else [None]):
                cmd = texe + ["analyze", logs, "--format", "json"] + (["--jobs", str(j)] if j else [])
                name = f"{tool} analyze --jobs {j}" if j else f"{tool} analyze"
                text = " ".join([f"{' '.join(texe)} analyze DIR --format json"] + ([f"--jobs {j}"] if j else [])) \
                    + " > /dev/null"
                cmds.append((name, text, cmd))
        # round-robin: the --jobs variants alternate, so a slow spell of the machine
        # falls on all of them alike and their ratio is not skewed by drift
        runs: dict[str, list[dict]] = {name: [] for name, _, _ in cmds}
        for _ in range(max(1, a.repeat)):
            for name, _, cmd in cmds:
                runs[name].append(measure(cmd))
        for name, text, _ in cmds:
            row(name, text, _median(runs[name]))
    return res


def table_md(res: dict) -> str:
    hdr = ("| step | wall s | lines/s | MB/s | × baseline | CPU s | peak RSS MiB | exit |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = [f"| {r['name']} | {r['wall']:.2f} | {r['lines_s']:,.0f} | {r['mb_s']:.1f} | {r['x_base']:.1f} | "
            f"{r['cpu']:.2f} | {r['rss_mib']:.0f} | {r['rc']} |" for r in res["rows"]]
    return "\n".join([hdr, *rows])


# --------------------------------------------------------------------------- modes


def mode_single(a: argparse.Namespace, exe: list[str]) -> dict:
    logs = a.logs
    man = None
    if not logs:
        logs = os.path.join(OUT, f"job-{a.lines}")
        man = gen(logs, a.lines, a)
    res = throughput(logs, a, exe)
    res["manifest"] = man
    print()
    desc = (f"{res['lines']:,} lines, {res['bytes'] / 1e6:.1f} MB uncompressed ({res['disk_bytes'] / 1e6:.1f} MB on "
            f"disk) in {res['files']} file(s)")
    if man:
        desc += (f"; {man['ranks']} ranks on {man['hosts']} hosts, {man['comms']} communicator(s), "
                 f"{man['channels']} channels, NCCL {man['nccl_version']} wording, layout {man['layout']}"
                 f"{', gzip' if man['gzip'] else ''}, inject {man['inject']}; "
                 f"{man['nccl_lines']:,} NCCL/PyTorch lines in all + {man['noise_per_rank']:,} noise lines per rank")
    print(desc + "\n")
    print(table_md(res))
    if not res.get("analyze"):
        print("\n(`ncclsleuth analyze` is not available in this checkout: row skipped)")
    for r in res["rows"]:
        if r["stderr"]:
            print(f"\n{r['name']} stderr: {r['stderr']}")
    res["description"] = desc
    if man and not a.keep:
        shutil.rmtree(logs, ignore_errors=True)
    return res


def mode_sizes(a: argparse.Namespace, exe: list[str]) -> dict:
    sizes = [int(s) for s in a.sizes.split(",")]
    out = []
    for n in sizes:
        logs = os.path.join(OUT, f"job-{n}")
        man = gen(logs, n, a)
        res = throughput(logs, a, exe)
        res["manifest"] = man
        out.append(res)
        if not a.keep:
            shutil.rmtree(logs, ignore_errors=True)
    names = [r["name"] for r in out[0]["rows"]]
    # the scaling column: parse where it was run, else this checkout's first analyze (named as
    # :func:`throughput` names it)
    mine = "after analyze" if a.before else "ncclsleuth analyze"
    scaled = "ncclsleuth parse" if "ncclsleuth parse" in names else next(n for n in names if n.startswith(mine))
    print(f"\nEach cell: wall s / lines per s / peak RSS MiB.  Last column: `{scaled}` wall ratio to the previous "
          "size (line-count ratio); equal numbers mean linear scaling.\n")
    print("| lines | MB | " + " | ".join(names) + " | scaling (size ratio) |")
    print("|---:|---:|" + "---:|" * len(names) + "---|")
    prev = None
    for res in out:
        rows = {r["name"]: r for r in res["rows"]}
        p = rows[scaled]
        ratio = "" if prev is None else f"{p['wall'] / prev[0]:.2f} ({res['lines'] / prev[1]:.2f})"
        cells = [f"{rows[n]['wall']:.2f} / {rows[n]['lines_s']:,.0f} / {rows[n]['rss_mib']:.0f}" if n in rows else ""
                 for n in names]
        print(f"| {res['lines']:,} | {res['bytes'] / 1e6:.0f} | " + " | ".join(cells) + f" | {ratio} |")
        prev = (p["wall"], res["lines"])
    return {"sizes": out}


def mode_cold(a: argparse.Namespace, exe: list[str]) -> dict:
    d = os.path.join(OUT, "paste")
    gen(d, 4000, a, ranks=16, comms=1, channels=2, layout="one-file", inject="desync", gzip=False)
    with open(os.path.join(d, "job.log"), encoding="utf-8") as f:
        lines = f.readlines()
    paste = os.path.join(OUT, "paste-200.log")
    with open(paste, "w", encoding="utf-8") as f:
        f.writelines(lines[-200:])  # the end of the job: the watchdog/desync lines
    shutil.rmtree(d, ignore_errors=True)
    n = a.cold_runs
    rows = []

    def one(name: str, cmd: list[str], env: dict | None = None) -> None:
        walls = []
        for _ in range(n):
            m = measure(cmd, env=env)
            walls.append(m["wall"])
        rows.append({"name": name, "median": statistics.median(walls), "min": min(walls), "max": max(walls),
                     "rc": m["rc"], "rss_mib": m["rss_kb"] / 1024})
        print(f"  {name:<50} median {statistics.median(walls) * 1000:7.1f} ms", flush=True)

    one("python3 -c pass", [sys.executable, "-c", "pass"])
    one("python3 -c 'import ncclsleuth.cli'", [sys.executable, "-c", "import ncclsleuth.cli"])
    one("ncclsleuth parse paste-200.log", exe + ["parse", paste, "--format", "jsonl"])
    has, _ = analyze_support(exe)
    if has:
        one("ncclsleuth analyze paste-200.log --format json", exe + ["analyze", paste, "--format", "json"])
    # the very first run on a machine: empty caches (Lark's grammar, templates, parsed rules)
    for name, args in (("parse", ["parse", paste, "--format", "jsonl"]),
                       ("analyze", ["analyze", paste, "--format", "json"])):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, XDG_CACHE_HOME=cache)
            m = measure(exe + args, env=env)
            rows.append({"name": f"ncclsleuth {name} paste-200.log (empty caches, first run)", "median": m["wall"],
                         "min": m["wall"], "max": m["wall"], "rc": m["rc"], "rss_mib": m["rss_kb"] / 1024})
    os.unlink(paste)
    base = rows[0]["median"]
    print(f"\nCold start, 200-line paste, median of {n} runs (min..max):\n")
    print("| command | median ms | min..max ms | minus `python3 -c pass` ms | peak RSS MiB | exit |\n"
          "|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['median'] * 1000:.0f} | {r['min'] * 1000:.0f}..{r['max'] * 1000:.0f} | "
              f"{(r['median'] - base) * 1000:.0f} | {r['rss_mib']:.0f} | {r['rc']} |")
    return {"cold": rows}


def mode_profile(a: argparse.Namespace, exe: list[str]) -> dict:
    logs = a.logs or os.path.join(OUT, f"prof-{a.profile}")
    if not a.logs:
        gen(logs, a.profile, a)
    plain = measure(exe + ["parse", logs, "--format", "jsonl"])
    prof = os.path.join(OUT, "parse.prof")
    m = measure([sys.executable, "-m", "cProfile", "-o", prof, "-m", "ncclsleuth", "parse", logs,
                 "--format", "jsonl"])
    import pstats
    print(f"\nncclsleuth parse: {plain['wall']:.2f} s plain, {m['wall']:.2f} s under cProfile\n")
    for key in ("cumulative", "tottime"):
        print(f"--- top {a.top} by {key} ---")
        pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats(key).print_stats(a.top)
    print(f"(profile data kept in {prof}: python -m pstats {prof})")
    if not a.logs and not a.keep:
        shutil.rmtree(logs, ignore_errors=True)
    return {"plain_wall": plain["wall"], "profiled_wall": m["wall"], "prof": prof}


# --------------------------------------------------------------------------- the density sweep

#: (name, NCCL share it gives, generator options): what a job leaves at three densities.  ~1%: a
#: long run of 64 ranks (training output); ~30%: a 16,384-rank job's mix (every rank's init of 3
#: communicators, 32 channels, with a few hundred lines of training output each); ~75%: an
#: 8,000-rank job with little output besides NCCL's (2 communicators, 24 channels)
DENSITIES = (
    ("~1%", {"ranks": 64, "comms": 3, "channels": 32}),
    ("~30%", {"ranks": 1600, "comms": 3, "channels": 32}),
    ("~75%", {"ranks": 8000, "comms": 2, "channels": 24}),
)
LAYOUTS = ("per-rank-files", "one-file")


def _per_line_costs(points: list[tuple[int, int, float]]) -> tuple[float | None, float | None]:
    """Seconds per noise line and per NCCL line: least squares of ``t = a*noise + b*nccl`` over
    the densities of one layout (``t`` already less the tool's start-up, measured apart)."""
    sxx = sum(n * n for n, _, _ in points)
    syy = sum(c * c for _, c, _ in points)
    sxy = sum(n * c for n, c, _ in points)
    sxt = sum(n * t for n, _, t in points)
    syt = sum(c * t for _, c, t in points)
    det = sxx * syy - sxy * sxy
    if len(points) < 2 or det == 0:
        return None, None
    return (sxt * syy - syt * sxy) / det, (syt * sxx - sxt * sxy) / det


def _rate(per_line: float | None) -> str:
    """Lines per second from seconds per line ("n/a" where the fit gives none)."""
    return f"{1 / per_line:,.0f}" if per_line and per_line > 0 else "n/a"


def _instructions(cmd: list[str]) -> int | None:
    """Instructions executed by ``cmd`` (valgrind callgrind, no cache simulation): a count that
    other processes on the machine do not change.  Children are not followed (use --jobs 1).  A
    leading ``env VAR=VALUE`` is set here, not run: valgrind does not follow ``env``'s exec into the
    interpreter, and counted nothing for every build that runs with a cache folder of its own."""
    if shutil.which("valgrind") is None:
        return None
    cmd, env = run_env(cmd)
    r = subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=no", "--callgrind-out-file=/dev/null",
                        *cmd], capture_output=True, text=True, env=env, cwd=neutral_cwd())
    m = re.search(r"I\s+refs:\s+([\d,]+)", r.stderr)
    return int(m.group(1).replace(",", "")) if m else None


def _python_exe(cmd: list[str]) -> list[str]:
    """The command with its console script replaced by ``python -m ncclsleuth`` run by the script's own
    interpreter (valgrind must start the interpreter itself, not a shebang)."""
    if len(cmd) == 1:
        with open(cmd[0], "rb") as f:
            first = f.readline().decode("utf-8", "replace")
        if first.startswith("#!"):
            return [first[2:].strip(), "-m", "ncclsleuth"]
    return cmd


def mode_density(a: argparse.Namespace, exe: list[str]) -> dict:
    """Every density in both layouts; baseline and each build's ``analyze --jobs N`` alternating."""
    tools = build_tools(a.before, "after", exe, None if a.user_cache else a.caches)
    cases = []
    root = os.path.join(OUT, f"density-{a.sweep_lines}")
    for dname, opts in DENSITIES:
        for layout in LAYOUTS:
            out = os.path.join(root, f"{dname.strip('~%')}-{layout}")
            man_path = out + ".manifest.json"
            # ranks scale with the size, so that a smaller sweep keeps each density's mix
            sized = dict(opts, ranks=max(8, round(opts["ranks"] * a.sweep_lines / 1_000_000)))
            want = dict(sized, layout=layout, inject="desync", gzip=False)
            man = None
            if os.path.exists(man_path):
                with open(man_path) as f:
                    man = json.load(f)
                if any(man.get(k) != v for k, v in sized.items()) \
                        or man.get("layout") != layout:
                    man = None
            if man is None:
                man = gen(out, a.sweep_lines, a, **want)
            cases.append((dname, layout, out, man))
    paste = os.path.join(root, "paste-200.log")
    if not os.path.exists(paste):
        with open(os.path.join(cases[0][2], sorted(os.listdir(cases[0][2]))[0]), encoding="utf-8") as f:
            head = [next(f) for _ in range(200)]
        with open(paste, "w", encoding="utf-8") as f:
            f.writelines(head)
    cmds: list[tuple[str, list[str]]] = [("baseline", [sys.executable, os.path.abspath(__file__), "--_baseline"])]
    for tname, texe in tools:
        for j in a.jobs:
            cmds.append((f"{tname} --jobs {j}", texe + ["analyze", "--format", "json", "--jobs", str(j)]))
    results = []
    for dname, layout, logs, man in cases:
        warm([logs])
        info_path = os.path.join(root, "baseline.json")
        runs: dict[str, list[dict]] = {name: [] for name, _ in cmds}
        for _ in range(max(1, a.repeat)):  # round-robin: load on the machine falls on every tool alike
            for name, cmd in cmds:
                runs[name].append(measure(cmd + [logs], stdout_path=info_path if name == "baseline" else None))
        with open(info_path) as f:
            info = json.load(f)
        row = {"density": dname, "layout": layout, "logs": logs, "lines": info["lines"], "bytes": info["bytes"],
               "nccl": info["prefix_matches"], "files": info["files"], "ranks": man.get("ranks"),
               "tools": {name: _median(rs) for name, rs in runs.items()}}
        results.append(row)
        print(f"  {dname:>5} {layout:<15} {row['lines']:>10,} lines  " + "  ".join(
            f"{n} {m['wall']:.2f}s" for n, m in row["tools"].items()), flush=True)
    start = {}
    for name, cmd in cmds:  # start-up, subtracted before the per-line fit
        start[name] = _median([measure(cmd + [paste]) for _ in range(max(3, a.repeat))])["wall"]
    instr: dict[tuple[str, str, str], int | None] = {}
    if a.instructions:
        for row in results:
            for name, cmd in cmds:
                if name == "baseline" or name.endswith("--jobs 1"):
                    c = cmd if name == "baseline" else _python_exe(cmd[:-4]) + cmd[-4:]
                    instr[(row["density"], row["layout"], name)] = _instructions(c + [row["logs"]])
    load = os.getloadavg()
    print(f"\nDensity sweep, {a.repeat} run(s) per cell (median wall s; the tools alternate), load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end. Each cell: wall s (CPU s) / x baseline (wall) / peak RSS MiB"
          + (" / G instructions" if instr else "") + ".\n")
    names = [n for n, _ in cmds if n != "baseline"]
    print("| NCCL share | layout | lines | ranks | baseline wall s (CPU s) | " + " | ".join(names) + " |")
    print("|---|---|---:|---:|---:|" + "---:|" * len(names))
    for row in results:
        b = row["tools"]["baseline"]
        cells = []
        for n in names:
            m = row["tools"][n]
            cell = (f"{m['wall']:.2f} ({m['cpu']:.2f}) / {b['wall'] / m['wall']:.2f}x / "
                    f"{m['rss_kb'] / 1024:.0f}")
            if (row["density"], row["layout"], n) in instr and instr[(row["density"], row["layout"], n)]:
                cell += f" / {instr[(row['density'], row['layout'], n)] / 1e9:.1f}"
            cells.append(cell)
        bi = instr.get((row["density"], row["layout"], "baseline"))
        share = row["nccl"] / row["lines"] if row["lines"] else 0
        print(f"| {row['density']} ({share:.1%}) | {row['layout']} | {row['lines']:,} | {row['ranks']:,} | "
              f"{b['wall']:.2f} ({b['cpu']:.2f})" + (f" / {bi / 1e9:.1f} G" if bi else "") + " | "
              + " | ".join(cells) + " |")
    print("\nNoise and NCCL lines per second, from a least-squares fit of wall time (less start-up on a "
          "200-line file) over the three densities of each layout:\n")
    print("| layout | " + " | ".join(f"{n} noise / NCCL lines/s" for n, _ in cmds) + " |")
    print("|---|" + "---:|" * len(cmds))
    fits = {}
    for layout in LAYOUTS:
        cells = []
        for name, _ in cmds:
            pts = [(r["lines"] - r["nccl"], r["nccl"], r["tools"][name]["wall"] - start[name])
                   for r in results if r["layout"] == layout]
            per_noise, per_nccl = _per_line_costs(pts)
            fits[(layout, name)] = (per_noise, per_nccl)
            cells.append(f"{_rate(per_noise)} / {_rate(per_nccl)}")
        print(f"| {layout} | " + " | ".join(cells) + " |")
    print("\nStart-up on a 200-line file (median ms): " + ", ".join(f"{n} {t * 1000:.0f}" for n, t in start.items()))
    return {"density": results, "startup": start, "instructions": {"|".join(k): v for k, v in instr.items()},
            "load": load, "fits": {"|".join(k): v for k, v in fits.items()}}


#: launcher and log-collector prefixes (``--prefixes``): how each prints every line of a job
PREFIXES = ("plain", "srun --label", "kubectl --timestamps", "kubectl + torchrun", "mpirun --tag-output",
            "NCCL_DEBUG_TIMESTAMP_LEVELS=ALL")
_HOST_PID = re.compile(r"([\w.-]+:\d+):\d+ \[")
_RANK_TAG = re.compile(r"\[rank(\d+)\]:")


def prefixed_copy(src: str, dst: str, how: str) -> None:
    """``src`` with each line as ``how`` prints it: ``srun --label``'s task number (a process's
    lines one number, in the order the processes' first lines come; a PyTorch line's ``[rankN]:``
    rank), ``kubectl logs --timestamps``' RFC 3339 time, that time before torchrun's
    ``[defaultN]:``, Open MPI's ``[1,N]<stdout>:``, or NCCL's own time before its lines (2.26+,
    ``NCCL_DEBUG_TIMESTAMP_LEVELS=ALL``, format ``[%F %T.%6f] ``)."""
    tasks: dict[str, int] = {}
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for i, line in enumerate(f):
            m = _HOST_PID.match(line)
            r = _RANK_TAG.match(line)
            task = tasks.setdefault(m.group(1), len(tasks)) if m else int(r.group(1)) if r else 0
            ts = f"2025-11-29T11:{30 + i // 3_600_000 % 30:02d}:{i // 60_000 % 60:02d}.{i % 60_000:09d}Z"
            nccl_ts = f"[2025-11-29 11:{30 + i // 3_600_000 % 30:02d}:{i // 60_000 % 60:02d}.{i % 60_000:06d}] "
            out.write({"plain": line, "srun --label": f"{task}: {line}", "kubectl --timestamps": f"{ts} {line}",
                       "kubectl + torchrun": f"{ts} [default{task}]:{line}",
                       "mpirun --tag-output": f"[1,{task}]<stdout>:{line}",
                       "NCCL_DEBUG_TIMESTAMP_LEVELS=ALL": f"{nccl_ts}{line}" if m else line}[how])


def mode_prefixes(a: argparse.Namespace, exe: list[str]) -> dict:
    """The ~75% NCCL one-file job of the density sweep, each line behind each launcher's or log
    collector's prefix (:data:`PREFIXES`); baseline and each build's ``analyze --jobs N`` alternating.
    The baseline's anchored prefix regex matches no prefixed NCCL line: it reads and tries every
    line alike, so its time is the floor of each copy as of the plain one."""
    tools = build_tools(a.before, "after", exe, None if a.user_cache else a.caches)
    root = os.path.join(OUT, f"prefixes-{a.sweep_lines}")
    opts = dict(DENSITIES[-1][1])
    opts["ranks"] = max(8, round(opts["ranks"] * a.sweep_lines / 1_000_000))
    job = os.path.join(root, "job")
    if not os.path.exists(os.path.join(job, "job.log")):
        gen(job, a.sweep_lines, a, **opts, layout="one-file", inject="desync", gzip=False)
    cases = []
    for how in PREFIXES:
        path = os.path.join(root, re.sub(r"[^\w]+", "-", how).strip("-") + ".log")
        if not os.path.exists(path):
            prefixed_copy(os.path.join(job, "job.log"), path, how)
        cases.append((how, path))
    cmds: list[tuple[str, list[str]]] = [("baseline", [sys.executable, os.path.abspath(__file__), "--_baseline"])]
    for tname, texe in tools:
        for j in a.jobs:
            cmds.append((f"{tname} --jobs {j}", texe + ["analyze", "--format", "json", "--jobs", str(j)]))
    for _, cmd in cmds[1:]:  # each build's cache folder made (the density sweep's median hides it)
        measure(cmd + [cases[0][1]])
    results = []
    for how, path in cases:
        warm([path])
        runs: dict[str, list[dict]] = {name: [] for name, _ in cmds}
        for _ in range(max(1, a.repeat)):  # round-robin: load on the machine falls on every tool alike
            for name, cmd in cmds:
                runs[name].append(measure(cmd + [path]))
        row = {"prefix": how, "logs": path, "tools": {name: _median(rs) for name, rs in runs.items()}}
        results.append(row)
        print(f"  {how:<22} " + "  ".join(f"{n} {m['wall']:.2f}s" for n, m in row["tools"].items()), flush=True)
    names = [n for n, _ in cmds if n != "baseline"]
    print(f"\nPrefixed lines, {a.repeat} run(s) per cell (median wall s; the tools alternate). Each cell: "
          "wall s / x baseline / peak RSS MiB.\n")
    print("| prefix | baseline wall s | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for row in results:
        b = row["tools"]["baseline"]
        print(f"| {row['prefix']} | {b['wall']:.2f} | " + " | ".join(
            f"{m['wall']:.2f} / {b['wall'] / m['wall']:.2f}x / {m['rss_kb'] / 1024:.0f}"
            for m in (row["tools"][n] for n in names)) + " |")
    return {"prefixes": results}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_baseline"]:
        json.dump(baseline(argv[1:]), sys.stdout)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--lines", type=int, default=1_000_000, help="lines of the generated job (default 1M)")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--comms", type=int, default=3)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--layout", choices=("per-rank-files", "one-file"), default="per-rank-files")
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--inject", default="desync")
    ap.add_argument("--nccl-version", default="2.23")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--logs", type=os.path.abspath, help="measure this existing file/folder instead of generating")
    ap.add_argument("--jobs", default=None, help="analyze --jobs values, comma list (default: 1,nproc)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per command; the median wall is reported")
    ap.add_argument("--sizes", help="comma list of line counts: one generated job per size (scaling check)")
    ap.add_argument("--cold-start", action="store_true", help="start-up time on a 200-line paste")
    ap.add_argument("--cold-runs", type=int, default=10)
    ap.add_argument("--skip-parse", action="store_true",
                    help="time analyze only (ncclsleuth parse writes every line as JSON: minutes at 2M lines)")
    ap.add_argument("--density", action="store_true", help="the density sweep (see the module doc)")
    ap.add_argument("--sweep-lines", type=int, default=1_000_000, help="lines of each density-sweep job")
    ap.add_argument("--prefixes", action="store_true",
                    help="the ~75%% NCCL one-file job behind each launcher's and log collector's line prefix")
    ap.add_argument("--before", action="append", metavar="[NAME=]COMMAND",
                    help="another ncclsleuth command measured in the same run (density sweep; repeatable)")
    ap.add_argument("--user-cache", action="store_true",
                    help="density sweep: run the builds with the user's cache folder, not one of their own each")
    ap.add_argument("--instructions", action="store_true",
                    help="density sweep: also count the instructions of each --jobs 1 run (valgrind)")
    ap.add_argument("--profile", type=int, metavar="LINES", help="cProfile ncclsleuth parse on a job this big")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--keep", action="store_true", help="keep the generated logs under bench/out/")
    ap.add_argument("--json", help="also write all results to this JSON file")
    a = ap.parse_args(argv)
    ncpu = os.cpu_count() or 1
    a.jobs = [int(x) for x in a.jobs.split(",")] if a.jobs else sorted({1, ncpu})
    os.makedirs(OUT, exist_ok=True)
    exe = ncclsleuth_cmd()
    m = machine()
    m["bytecode"] = ensure_bytecode()
    print(machine_md(m))
    print(f"ncclsleuth command: {' '.join(exe)}\n", flush=True)
    if a.cold_start:
        res = mode_cold(a, exe)
    elif a.density:
        with tempfile.TemporaryDirectory(prefix="ncclsleuth-caches-") as a.caches:
            res = mode_density(a, exe)
    elif a.prefixes:
        with tempfile.TemporaryDirectory(prefix="ncclsleuth-caches-") as a.caches:
            res = mode_prefixes(a, exe)
    elif a.profile:
        res = mode_profile(a, exe)
    elif a.sizes:
        res = mode_sizes(a, exe)
    else:
        res = mode_single(a, exe)
    print("\n" + machine_md(m))
    if a.json:
        res["machine"] = m
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
