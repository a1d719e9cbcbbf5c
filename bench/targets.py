"""The speed and memory targets of issue 16, each measured the way the issue states it, in one run.

  python bench/targets.py                     every check (~6 min on 2 cores once the logs exist;
                                              generating them takes ~1.5 min the first time)
  python bench/targets.py --only 8k,noise     some checks (8k, 16k, per-rank, noise, cold; 100k, 8k-5m on demand)
  python bench/targets.py --before "start=env PYTHONPATH=/tmp/base python -m ncclsleuth"
                                              ... and another build in the same run, alternating

The checks and their targets:

  8k        one file holding every rank of an 8,000-rank job, ~1M lines, ~70% NCCL:
            ``analyze --jobs 1`` >= 0.35x the baseline; ``--jobs 2`` >= 1.6x ``--jobs 1``;
            peak RSS <= 80 MB (each build's largest process)
  16k       16,384 ranks in per-rank files, ~10M lines: ``--jobs 2`` <= 15 s, peak RSS <= 400 MB
            (and ``--jobs 2`` against the baseline in the same rounds: the machine's speed taken out)
  per-rank  memory per rank: peak RSS of ``--jobs 1`` on 2,048 and 4,096 per-rank files (the 16k
            job's mix), each build's cache folder warmed by one run first; (RSS(4,096) - RSS(2,048))
            / 2,048 a rank; a 100,000-rank job projected from it (RSS(4,096) + 95,904 ranks x that)
            <= 1 GB
  100k      (only when asked for: ~5.5 GB of logs, ~5 min to generate, ~6 min to run) the
            100,000-rank job itself, the 16k job's mix: peak RSS of ``--jobs 1`` and ``--jobs 2``
            measured, against the same 1 GB, and their wall times
  8k-5m     (only when asked for: 460 MB of log, ~15 s to generate) the 8k job's 8,000 ranks in
            one file of 5M lines, ~51% NCCL (64 channels, 3 communicators): no target of its own;
            ``--jobs 1`` against the baseline, ``--jobs 2`` against ``--jobs 1``, and the peak RSS,
            which beside the 8k job's says what the lines (not the ranks) cost
  noise     the issue's noise-dominated job: 1M lines, 64 per-rank files, 1.2% NCCL (``bench/run.py``'s
            default job): ``--jobs 1`` >= 0.6x the baseline
  cold      a 200-line paste (the end of a 16-rank desync): ``analyze`` <= 4x ``python -c pass``,
            both run by the interpreter that runs this script; the same paste on a fresh cache
            folder each run (a first run: what a new container pays without ``cache warm``); and,
            for what a chat-ops bot that keeps ``ncclsleuth serve`` running pays per question, the
            paste's ``POST /analyze``

Every build runs with a cache folder of its own, new for the run (``--user-cache``: the user's
own): caches an earlier history grew would make one build's starts slower than another's.  A
leading ``env VAR=VALUE`` of a ``--before`` command is set by this script, not run (env(1) would
add an exec to every start of that build only).

The baseline is ``bench/run.py``'s (a binary ``readline`` of every line, UTF-8 decode, one anchored
prefix regex), measured in the same round-robin as the tools, so the load of the machine falls on
every command alike.  Every ``analyze`` output is kept per command and compared: ``--jobs 1`` and
``--jobs 2`` (and the builds of ``--before``) must write the same report byte for byte.

The logs are generated under ``bench/out/targets/`` and kept (each with its manifest: a log whose
manifest does not match the check's options is generated again).  MB here is 10^6 bytes.
"""
from __future__ import annotations

import argparse
import filecmp
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
#: where the logs are generated and kept (``--out``)
ROOT = os.path.join(HERE, "out", "targets")


def _run_module() -> Any:
    """``bench/run.py`` (measuring, generating, the baseline), loaded by path: bench is no package."""
    spec = importlib.util.spec_from_file_location("ncclsleuth_bench_run", os.path.join(HERE, "run.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


R = _run_module()
MB = 1e6

#: name -> generator options of each check's logs (``--target-lines`` as ``lines``)
LOGS: dict[str, dict[str, Any]] = {
    "8k": {"ranks": 8000, "comms": 2, "channels": 24, "lines": 1_000_000, "layout": "one-file"},
    "16k": {"ranks": 16384, "comms": 3, "channels": 32, "lines": 10_000_000, "layout": "per-rank-files"},
    "r2048": {"ranks": 2048, "comms": 3, "channels": 32, "lines": 2048 * 610, "layout": "per-rank-files"},
    "r4096": {"ranks": 4096, "comms": 3, "channels": 32, "lines": 4096 * 610, "layout": "per-rank-files"},
    # the first row: bench/run.py's default job (64 ranks, 3 communicators, 1.2% NCCL lines)
    "100k": {"ranks": 100_000, "comms": 3, "channels": 32, "lines": 100_000 * 610, "layout": "per-rank-files"},
    "noise": {"ranks": 64, "comms": 3, "channels": 32, "lines": 1_000_000, "layout": "per-rank-files"},
    # the third row (5M lines of an 8,000-rank one-file job, 396 MiB then): the same ranks as
    # the 8k job with 64 channels and 3 communicators, ~51% NCCL lines; against the 8k job, what
    # four million more lines cost (the memory is to stay the ranks')
    "8k-5m": {"ranks": 8000, "comms": 3, "channels": 64, "lines": 5_000_000, "layout": "one-file"},
}
CHECKS = ("8k", "16k", "per-rank", "noise", "cold")
#: checks run only when ``--only`` names them
ON_DEMAND = ("100k", "8k-5m")
#: ranks of the projected job
PROJECTED_RANKS = 100_000


def projected(rss_small: float, rss_big: float, n_small: int, n_big: int, n: int) -> tuple[float, float]:
    """(memory a rank, memory at ``n`` ranks) from the peak RSS of two jobs of ``n_small`` and
    ``n_big`` ranks: a straight line through the two, extended from the bigger one."""
    per = (rss_big - rss_small) / (n_big - n_small)
    return per, rss_big + per * (n - n_big)


def generate(out: str, lines: int, **opts: Any) -> None:
    """``bench/generate.py`` into ``out`` (it writes ``<out>.manifest.json`` beside it), with
    ``bench/run.py``'s defaults where ``opts`` says nothing."""
    defaults = argparse.Namespace(ranks=64, per_host=8, comms=3, channels=32, layout="per-rank-files",
                                  inject="desync", nccl_version="2.23", seed=1, gzip=False)
    R.gen(out, lines, defaults, **opts)


def logs(name: str) -> str:
    """The check's logs, generated unless a matching set is there (the 10M-line job takes ~1 min)."""
    opts = dict(LOGS[name])
    lines = opts.pop("lines")
    out = os.path.join(ROOT, name)
    path = os.path.join(out, "job.log") if opts["layout"] == "one-file" else out
    try:
        with open(out + ".manifest.json") as f:
            man = json.load(f)
        if all(man.get(k) == v for k, v in opts.items()) and os.path.isdir(out):
            return path
    except (OSError, ValueError):
        pass
    generate(out, lines, **opts)
    return path


class Round:
    """Commands measured round-robin on one input; each ``analyze`` output kept for comparison."""

    def __init__(self, path: str, tmp: str) -> None:
        self.path, self.tmp = path, tmp
        self.runs: dict[str, list[dict[str, Any]]] = {}
        self.outputs: dict[str, str] = {}

    def measure(self, name: str, cmd: list[str], keep: bool = True) -> None:
        out = os.path.join(self.tmp, f"{len(self.outputs)}-{name.replace(' ', '_').replace('/', '_')}.out")
        m = R.measure(cmd + [self.path], stdout_path=out if keep else None)
        self.runs.setdefault(name, []).append(m)
        if keep:
            self.outputs.setdefault(name, out)

    def median(self, name: str) -> dict[str, Any]:
        return R._median(self.runs[name])

    def walls(self, name: str) -> str:
        return "-".join(f"{w:.2f}" for w in sorted(r["wall"] for r in self.runs[name]))

    def rss_mb(self, name: str, warm: bool = False) -> float:
        """The peak RSS of ``name``'s runs; ``warm``: of those after its first (a build's first run
        starts with its cache folder empty: Lark's grammar compiled and kept, shapes learned)."""
        runs = self.runs[name][1:] if warm and len(self.runs[name]) > 1 else self.runs[name]
        return max(r["rss_kb"] for r in runs) * 1024 / MB

    def same(self, names: list[str]) -> bool:
        """Whether the given commands wrote the same report (their first runs)."""
        first = self.outputs[names[0]]
        return all(filecmp.cmp(first, self.outputs[n], shallow=False) for n in names[1:])


def analyze(exe: list[str], jobs: int) -> list[str]:
    return exe + ["analyze", "--format", "json", "--jobs", str(jobs)]


def baseline_cmd() -> list[str]:
    return [sys.executable, os.path.join(HERE, "run.py"), "--_baseline"]


def _met(ok: bool) -> str:
    return "**met**" if ok else "not met"


def against_baseline(name: str, tools: list[tuple[str, list[str]]], repeat: int, tmp: str) -> Round:
    """Rounds of the baseline and every build's ``--jobs 1`` and ``--jobs 2`` on check ``name``'s logs."""
    path = logs(name)
    R.warm([path])
    rd = Round(path, tmp)
    for _ in range(repeat):
        rd.measure("baseline", baseline_cmd(), keep=False)
        for tool, exe in tools:
            for j in (1, 2):
                rd.measure(f"{tool} --jobs {j}", analyze(exe, j))
    return rd


def baseline_row(check: str, tool: str, rd: Round, least: float | None) -> list[str]:
    """The row of ``tool``'s ``--jobs 1`` against the baseline: at least ``least`` times its speed
    (None: no target, the ratio only)."""
    base, j1 = rd.median("baseline")["wall"], rd.median(f"{tool} --jobs 1")["wall"]
    return [f"{check} {tool}", "`--jobs 1` / baseline", "" if least is None else f">= {least}x",
            f"{base / j1:.2f}x ({rd.walls(tool + ' --jobs 1')} s; baseline {rd.walls('baseline')} s)",
            "" if least is None else _met(base / j1 >= least)]


def jobs2_row(check: str, tool: str, rd: Round, least: float | None) -> list[str]:
    """The row of ``tool``'s ``--jobs 2`` against its ``--jobs 1``: at least ``least`` times faster
    (None: no target)."""
    j1, j2 = rd.median(f"{tool} --jobs 1")["wall"], rd.median(f"{tool} --jobs 2")["wall"]
    return [f"{check} {tool}", "`--jobs 2` / `--jobs 1`", "" if least is None else f">= {least}x",
            f"{j1 / j2:.2f}x ({rd.walls(tool + ' --jobs 2')} s)", "" if least is None else _met(j1 / j2 >= least)]


def same_row(check: str, tools: list[tuple[str, list[str]]], rd: Round) -> list[str]:
    """The row saying whether every build's ``--jobs 1`` and ``--jobs 2`` wrote the same report."""
    same = rd.same([f"{n} --jobs {j}" for n, _ in tools for j in (1, 2)])
    return [check, "reports identical (`--jobs 1`, `--jobs 2`, every build)", "same bytes",
            "same" if same else "DIFFERENT", _met(same)]


def check_8k(tools: list[tuple[str, list[str]]], repeat: int, tmp: str) -> list[list[str]]:
    rd = against_baseline("8k", tools, repeat, tmp)
    rows = []
    for name, _ in tools:
        rss = max(rd.rss_mb(f"{name} --jobs 1"), rd.rss_mb(f"{name} --jobs 2"))
        rows += [
            baseline_row("8k", name, rd, 0.35),
            jobs2_row("8k", name, rd, 1.6),
            [f"8k {name}", "peak RSS", "<= 80 MB", f"{rss:.0f} MB ({rss * MB / 2**20:.0f} MiB)", _met(rss <= 80)],
            [f"8k {name}", "peak RSS of the runs after the first (caches warm): `--jobs 1` / `--jobs 2`", "",
             " / ".join(f"{rd.rss_mb(f'{name} --jobs {j}', warm=True):.0f} MB" for j in (1, 2)), ""],
        ]
    return rows + [same_row("8k", tools, rd)]


def check_16k(tools: list[tuple[str, list[str]]], repeat: int, tmp: str) -> list[list[str]]:
    path = logs("16k")
    R.warm([path])
    rd = Round(path, tmp)
    for _ in range(repeat):
        # the target is in seconds, and the VM's speed moves 1.5-2x within a day (10.86 s at stop 44,
        # 18.75 s at stop 48 for the same work): the baseline in the same rounds says which moved
        rd.measure("baseline", baseline_cmd(), keep=False)
        for name, exe in tools:
            rd.measure(f"{name} --jobs 2", analyze(exe, 2))
    base = rd.median("baseline")["wall"]
    rows = []
    for name, _ in tools:
        j2 = rd.median(f"{name} --jobs 2")
        rss = rd.rss_mb(f"{name} --jobs 2")
        rows += [
            [f"16k {name}", "`--jobs 2` wall", "<= 15 s", f"{j2['wall']:.2f} s ({rd.walls(name + ' --jobs 2')}; "
             f"CPU {j2['cpu']:.1f} s)", _met(j2["wall"] <= 15)],
            [f"16k {name}", "`--jobs 2` / baseline (the machine's speed taken out)", "",
             f"{base / j2['wall']:.2f}x (baseline {rd.walls('baseline')} s)", ""],
            [f"16k {name}", "peak RSS", "<= 400 MB", f"{rss:.0f} MB", _met(rss <= 400)],
        ]
    if len(tools) > 1:
        same = rd.same([f"{n} --jobs 2" for n, _ in tools])
        rows.append(["16k", "reports identical (every build)", "same bytes", "same" if same else "DIFFERENT",
                     _met(same)])
    return rows


def check_lines(tools: list[tuple[str, list[str]]], repeat: int, tmp: str) -> list[list[str]]:
    """The 8,000 ranks of the 8k job in a file of five times its lines: no target of its own; its
    peak beside the 8k job's says whether memory grows with lines rather than ranks."""
    rd = against_baseline("8k-5m", tools, repeat, tmp)
    rows = []
    for name, _ in tools:
        rows += [
            baseline_row("8k-5m", name, rd, None),
            jobs2_row("8k-5m", name, rd, None),
            [f"8k-5m {name}", "peak RSS: every run / after the first, `--jobs 1` / `--jobs 2`", "",
             f"{max(rd.rss_mb(f'{name} --jobs 1'), rd.rss_mb(f'{name} --jobs 2')):.0f} MB / "
             + " / ".join(f"{rd.rss_mb(f'{name} --jobs {j}', warm=True):.0f} MB" for j in (1, 2)), ""],
        ]
    return rows + [same_row("8k-5m", tools, rd)]


def check_per_rank(tools: list[tuple[str, list[str]]], repeat: int, tmp: str) -> list[list[str]]:
    small, big = logs("r2048"), logs("r4096")
    n_small, n_big = LOGS["r2048"]["ranks"], LOGS["r4096"]["ranks"]
    rds = {p: Round(p, tmp) for p in (small, big)}
    # the slope is one of warm runs: a build's first run with its new, empty cache folder (Lark's
    # grammar built, every shape learned) peaks ~20 MB higher, which on whichever job ran first
    # (``--only per-rank``: the smaller) bent the projection (0.95 GB against 1.93 GB warm).  Each
    # job is run once: the 4,096-rank job's ``Trees`` lines have digit widths the 2,048-rank
    # job's have not (shapes are learned by the places of their values), so its first run after
    # the smaller one's still loaded Lark and learned (116 MB against 106 MB warm: 23.5 KiB a
    # rank against 18.6)
    for _, exe in tools:
        for p in (small, big):
            R.measure(analyze(exe, 1) + [p])
    for _ in range(repeat):
        for p, rd in rds.items():
            R.warm([p])
            for name, exe in tools:
                rd.measure(f"{name} --jobs 1", analyze(exe, 1), keep=False)
    rows = []
    for name, _ in tools:
        a, b = rds[small].rss_mb(f"{name} --jobs 1"), rds[big].rss_mb(f"{name} --jobs 1")
        per, at_n = projected(a, b, n_small, n_big, PROJECTED_RANKS)  # MB
        rows += [
            [f"per-rank {name}", f"peak RSS at {n_small:,} / {n_big:,} ranks (`--jobs 1`)", "",
             f"{a:.0f} / {b:.0f} MB: {per * MB / 1024:.1f} KiB a rank", ""],
            [f"per-rank {name}", f"projected at {PROJECTED_RANKS:,} ranks", "<= 1 GB", f"{at_n / 1000:.2f} GB",
             _met(at_n <= 1000)],
        ]
    return rows


def check_100k(tools: list[tuple[str, list[str]]], tmp: str) -> list[list[str]]:
    """The projected job measured: one round of ``--jobs 1`` and ``--jobs 2`` a build."""
    path = logs("100k")
    rd = Round(path, tmp)
    for name, exe in tools:
        for j in (1, 2):
            rd.measure(f"{name} --jobs {j}", analyze(exe, j))
    rows = []
    for name, _ in tools:
        for j in (1, 2):
            run = rd.median(f"{name} --jobs {j}")
            rss = rd.rss_mb(f"{name} --jobs {j}")
            rows.append([f"100k {name}", f"peak RSS, `--jobs {j}` (measured)", "<= 1 GB",
                         f"{rss / 1000:.2f} GB (wall {run['wall']:.0f} s, CPU {run['cpu']:.0f} s)", _met(rss <= 1000)])
    return rows + [same_row("100k", tools, rd)]


def check_noise(tools: list[tuple[str, list[str]]], repeat: int, tmp: str) -> list[list[str]]:
    rd = against_baseline("noise", tools, repeat, tmp)
    return [baseline_row("noise", name, rd, 0.6) for name, _ in tools] + [same_row("noise", tools, rd)]


def paste() -> str:
    """The last 200 lines of a 16-rank desync job, as ``run.py --cold-start`` makes them."""
    path = os.path.join(ROOT, "paste-200.log")
    if not os.path.exists(path):
        d = os.path.join(ROOT, "paste-job")
        generate(d, 4000, ranks=16, comms=1, channels=2, layout="one-file")
        with open(os.path.join(d, "job.log"), encoding="utf-8") as f:
            lines = f.readlines()
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(lines[-200:])
    return path


def check_cold(tools: list[tuple[str, list[str]]], runs: int, tmp: str) -> list[list[str]]:
    p = paste()
    walls: dict[str, list[float]] = {"pass": []}
    for _ in range(runs):
        walls["pass"].append(R.measure([sys.executable, "-c", "pass"])["wall"])
        for name, exe in tools:
            walls.setdefault(name, []).append(R.measure(exe + ["analyze", "--format", "json", p])["wall"])
    bare = statistics.median(walls["pass"])
    rows = []
    for name, exe in tools:
        t = statistics.median(walls[name])
        rows.append([f"cold {name}", "200-line paste / `python -c pass`", "<= 4x",
                     f"{t / bare:.2f}x ({t * 1000:.0f} ms / {bare * 1000:.0f} ms, median of {runs})",
                     _met(t / bare <= 4)])
        first = first_runs(exe, p, runs, tmp)
        rows.append([f"cold {name}", "the same paste on a fresh cache folder (a first run: a new container "
                     "without `cache warm`) / `python -c pass`", "",
                     f"{first['wall'] / bare:.1f}x ({first['wall'] * 1000:.0f} ms, peak {first['rss_kb'] / 1000:.0f} MB; "
                     f"median of {runs})", ""])
        served = serve_latency(exe, p, runs)
        if served is not None:  # what a chat-ops bot pays per question when it keeps a server
            rows.append([f"cold {name}", "the same paste to `ncclsleuth serve` (per request)", "",
                         f"{served * 1000:.1f} ms (median of {runs})", ""])
    return rows


def first_runs(exe: list[str], path: str, runs: int, tmp: str) -> dict:
    """``analyze`` of ``path`` on a new, empty cache folder each run (what a first run makes: the rule
    pack, the knowledge table, Lark's grammar, the line shapes' templates): median wall, largest peak."""
    out = []
    for _ in range(runs):
        fresh = tempfile.mkdtemp(prefix="first-", dir=tmp)
        words = [w for w in exe if not w.startswith("XDG_CACHE_HOME=")]
        cmd = ["env", f"XDG_CACHE_HOME={fresh}", *(words[1:] if words[:1] == ["env"] else words)]
        out.append(R.measure(cmd + ["analyze", "--format", "json", path]))
        shutil.rmtree(fresh, ignore_errors=True)
    return R._median(out)


def serve_latency(exe: list[str], path: str, runs: int) -> float | None:
    """Median seconds of ``POST /analyze`` of ``path`` to a ``serve`` started here (None where it
    does not start): the start-up is paid once per server, not once per question."""
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd, env = R.run_env(exe + ["serve", "--port", str(port), "--no-access-log"])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=R.neutral_cwd())
    base = f"http://127.0.0.1:{port}"
    with open(path, "rb") as f:
        body = f.read()
    try:
        for _ in range(100):  # up to ~10 s for the server to listen
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None:
                    return None
                time.sleep(0.1)
        else:
            return None
        walls = []
        for i in range(runs + 2):  # two first answers warm the server's caches
            t0 = time.perf_counter()
            urllib.request.urlopen(urllib.request.Request(base + "/analyze?redact=0", data=body, method="POST"),
                                   timeout=60).read()
            if i >= 2:
                walls.append(time.perf_counter() - t0)
        return statistics.median(walls)
    except OSError:
        return None
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--only", default=",".join(CHECKS), help=f"comma list of checks ({', '.join(CHECKS)})")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per check (16k, per-rank: at most 2)")
    ap.add_argument("--cold-runs", type=int, default=20)
    ap.add_argument("--before", action="append", metavar="[NAME=]COMMAND",
                    help="another ncclsleuth command measured in the same rounds (repeatable)")
    ap.add_argument("--user-cache", action="store_true",
                    help="run the builds with the user's cache folder, not one of their own each (new for the run)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--out", default=ROOT, help="where the logs are generated and kept (default: %(default)s)")
    a = ap.parse_args(argv)
    ROOT = os.path.abspath(a.out)  # the commands run elsewhere (run.NEUTRAL_CWD)
    only = [c.strip() for c in a.only.split(",") if c.strip()]
    unknown = [c for c in only if c not in CHECKS + ON_DEMAND]
    if unknown:
        ap.error(f"unknown check(s): {', '.join(unknown)} (known: {', '.join(CHECKS + ON_DEMAND)})")
    os.makedirs(ROOT, exist_ok=True)
    m = R.machine()
    m["bytecode"] = R.ensure_bytecode()
    print(R.machine_md(m), flush=True)
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="ncclsleuth-targets-") as tmp:
        tools = R.build_tools(a.before, "head", R.ncclsleuth_cmd(),
                              None if a.user_cache else os.path.join(tmp, "caches"))
        for check in only:
            print(f"... {check}", flush=True)
            if check == "8k":
                rows += check_8k(tools, a.repeat, tmp)
            elif check == "16k":
                rows += check_16k(tools, min(a.repeat, 2), tmp)
            elif check == "per-rank":
                rows += check_per_rank(tools, min(a.repeat, 2), tmp)
            elif check == "noise":
                rows += check_noise(tools, a.repeat, tmp)
            elif check == "100k":
                rows += check_100k(tools, tmp)
            elif check == "8k-5m":
                rows += check_lines(tools, a.repeat, tmp)
            else:
                rows += check_cold(tools, a.cold_runs, tmp)
    load = os.getloadavg()
    print(f"\nIssue 16's targets, {a.repeat} round(s) a check (16k and per-rank: {min(a.repeat, 2)}), commands "
          f"alternating; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end.\n")
    print("| check | what | target | measured | |\n|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print("\n" + R.machine_md(m))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "machine": m, "load": load}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
