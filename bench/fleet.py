#!/usr/bin/env python3
"""Fleet scale: the local process pool vs a Dask LocalCluster on one generated big job.

Generates (once) a per-rank-file job with bench/generate.py (desync injected), then
measures, each in a fresh client process so that its peak RSS (``ru_maxrss``) is its own:

  pool     ``api.build(paths, Options(jobs=W))`` (this process and W-1 forked workers)
  dask     the Dask engine on a LocalCluster of W worker processes (started outside
           the timing; its workers are not the client)

and checks both give the same report.  Then the merge cost: every per-file model is
pickled (what a worker ships), and merging the first N of them in input order into one
JobModel is timed for growing N (unpickling timed apart).  Finally the per-file and
per-merge costs are extrapolated to 100,000 ranks.  Prints a Markdown table.

  python bench/fleet.py                       # 16,384 ranks under bench/out/fleet16k
  python bench/fleet.py --ranks 8192 --workers 2 --out /tmp/fleet8k
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def _gen(a: argparse.Namespace) -> dict:
    man_path = Path(a.out.rstrip("/") + ".manifest.json")
    if man_path.exists() and Path(a.out).is_dir():
        man = json.loads(man_path.read_text())
        if man.get("ranks") == a.ranks and man.get("noise_per_rank") == a.noise:
            return man
    import importlib.util

    spec = importlib.util.spec_from_file_location("ncclsleuth_bench_generate", HERE / "generate.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen
    spec.loader.exec_module(gen)
    args = gen.build_parser().parse_args(["--ranks", str(a.ranks), "--per-host", "8", "--channels", "8",
                                          "--noise-per-rank", str(a.noise), "--inject", "desync",
                                          "--seed", "11", "--out", a.out, "--force"])
    return gen.generate(args)


# --------------------------------------------------------------------------- one measurement (child)


def _measure(mode: str, folder: str, workers: int, scheduler: str | None) -> dict:
    from ncclsleuth import api
    from ncclsleuth.renderers import render

    rules = api.load_rules(api.Options())
    files = [0]

    def tick(part) -> None:  # type: ignore[no-untyped-def]
        files[0] += 1

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if mode == "pool":
        import ncclsleuth.parallel.local as P

        P.PARALLEL_MIN_BYTES = 0
        built = api.build([folder], api.Options(jobs=workers, progress=tick))
    else:
        built = api.build([folder], api.Options(scheduler=scheduler, progress=tick))
    model, notices, read = built.model, built.notices, built.files_read
    t_model = time.perf_counter() - t0
    report = api.diagnose(model, rules, [n.to_dict() for n in notices])
    text = render("json", report)
    wall = time.perf_counter() - t0
    return {"mode": mode, "files": read, "lines": model.lines, "model_s": t_model, "wall_s": wall,
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_before_mb": rss0 / 1024,
            "report_sha": hashlib.sha256(text.encode()).hexdigest()[:16],
            "top": report.findings[0].message[:120] if report.findings else ""}


def _child(mode: str, folder: str, workers: int, scheduler: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--_measure", mode, "--out", folder, "--workers", str(workers)]
    if scheduler:
        cmd += ["--_scheduler", scheduler]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# --------------------------------------------------------------------------- merge cost


def _merge_costs(folder: str, workers: int, steps: list[int]) -> tuple[list[dict], float]:
    import concurrent.futures as cf

    from ncclsleuth.ingest.sources import discover
    from ncclsleuth.model import JobModel
    from ncclsleuth.model.merge import merge

    files = discover([folder]).files
    with cf.ProcessPoolExecutor(workers) as pool:
        blobs = list(pool.map(_parse_pickled, files, chunksize=64))
    per_file_bytes = sum(len(b) for b in blobs) / len(blobs)
    rows = []
    for n in steps:
        if n > len(blobs):
            break
        t0 = time.perf_counter()
        parts = [pickle.loads(b)[0] for b in blobs[:n]]
        t_unpickle = time.perf_counter() - t0
        model = JobModel()
        t0 = time.perf_counter()
        for p in parts:
            merge(model, p)
        t_merge = time.perf_counter() - t0
        rows.append({"n": n, "merge_s": t_merge, "unpickle_s": t_unpickle})
        del parts, model
    return rows, per_file_bytes


def _parse_pickled(f) -> bytes:  # type: ignore[no-untyped-def]
    from ncclsleuth.model.build import parse_one

    return pickle.dumps(parse_one(f), protocol=pickle.HIGHEST_PROTOCOL)


def _fit(rows: list[dict], key: str) -> tuple[float, float]:
    """Least squares t = a*n + b*n^2 (a: per-file cost, b: the part that grows with the model)."""
    s11 = sum(r["n"] ** 2 for r in rows)
    s12 = sum(r["n"] ** 3 for r in rows)
    s22 = sum(r["n"] ** 4 for r in rows)
    y1 = sum(r["n"] * r[key] for r in rows)
    y2 = sum(r["n"] ** 2 * r[key] for r in rows)
    det = s11 * s22 - s12 * s12
    if not det:
        return rows[-1][key] / rows[-1]["n"], 0.0
    a = (y1 * s22 - y2 * s12) / det
    b = (s11 * y2 - s12 * y1) / det
    return a, max(b, 0.0)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--noise", type=int, default=200, help="training-noise lines per rank")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--target", type=int, default=100_000, help="extrapolate to this many ranks")
    ap.add_argument("--out", default=str(HERE / "out" / "fleet16k"))
    ap.add_argument("--_measure", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_scheduler", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a._measure:
        print(json.dumps(_measure(a._measure, a.out, a.workers, a._scheduler)))
        return 0

    t0 = time.perf_counter()
    man = _gen(a)
    t_gen = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in Path(a.out).iterdir())
    print(f"job: {man['ranks']:,} ranks, {man['files']:,} files, {man['lines']:,} lines, {size / 1e6:,.0f} MB "
          f"(generated in {t_gen:.0f} s; culprit rank {man['culprit_ranks']})", file=sys.stderr)

    pool = _child("pool", a.out, a.workers)
    print(f"pool: {pool}", file=sys.stderr)
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=a.workers, processes=True, threads_per_worker=1, dashboard_address=":0",
                      host="127.0.0.1") as cluster:
        dask = _child("dask", a.out, a.workers, cluster.scheduler_address)
    print(f"dask: {dask}", file=sys.stderr)
    same = pool["report_sha"] == dask["report_sha"]

    steps = sorted({s for s in (1000, 2000, 4000, 8000, 16000, man["files"]) if s <= man["files"]})
    merges, per_file_bytes = _merge_costs(a.out, a.workers, steps)
    a_m, b_m = _fit(merges, "merge_s")
    u_per = merges[-1]["unpickle_s"] / merges[-1]["n"]

    n, target, w = pool["files"], a.target, a.workers
    rows = []
    for r in (pool, dask):
        per_file = r["model_s"] / n  # wall per file with w workers (parse + ship + merge)
        rows.append((r, per_file))
    print(f"\n## ncclsleuth at fleet scale ({man['ranks']:,} ranks, {size / 1e6:,.0f} MB, "
          f"{man['lines']:,} lines, {w} workers on {os.cpu_count()} cores)\n")
    print("| engine | files | wall (model) s | wall (report) s | lines/s | client peak RSS MB | report |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r, _ in rows:
        print(f"| {'process pool (build_model jobs=%d)' % w if r['mode'] == 'pool' else 'Dask LocalCluster (%d workers)' % w}"
              f" | {r['files']:,} | {r['model_s']:.1f} | {r['wall_s']:.1f} | {r['lines'] / r['model_s']:,.0f} | "
              f"{r['maxrss_mb']:,.0f} | {r['report_sha']}{'' if same else ' DIFFERS'} |")
    print("\n| merged per-file models N | merge s | per 1,000 ranks s | unpickle s |")
    print("|---:|---:|---:|---:|")
    for m in merges:
        print(f"| {m['n']:,} | {m['merge_s']:.2f} | {m['merge_s'] / m['n'] * 1000:.3f} | {m['unpickle_s']:.2f} |")
    print(f"\nper-file model shipped: {per_file_bytes / 1024:.1f} KiB pickled; merge fit t(N) = "
          f"{a_m * 1e3:.3f} ms*N + {b_m * 1e9:.3f} ns*N^2")

    merge_t = a_m * target + b_m * target ** 2
    print(f"\n| extrapolated to {target:,} ranks | estimate |")
    print("|---|---:|")
    for r, per_file in rows:
        name = "process pool" if r["mode"] == "pool" else "Dask LocalCluster"
        cpu_per_file = per_file * w
        print(f"| {name}, {w} workers: wall | {per_file * target / 60:,.1f} min |")
        print(f"| {name}: CPU per file (wall x workers) | {cpu_per_file * 1e3:.2f} ms |")
        rss_per_rank = (r["maxrss_mb"] - r["rss_before_mb"]) / n
        print(f"| {name}: client peak RSS | {r['rss_before_mb'] + rss_per_rank * target:,.0f} MB |")
    for cores in (64, 256, 1024):
        parse = rows[1][1] * w * target / cores
        print(f"| Dask, {cores} worker cores: parse {parse / 60:,.1f} min + client merge/unpickle "
              f"{(merge_t + u_per * target) / 60:,.1f} min | >= {max(parse, merge_t + u_per * target) / 60:,.1f} min |")
    print(f"| client merge of {target:,} models (fit) | {merge_t:,.0f} s |")
    print(f"| client unpickle of {target:,} models | {u_per * target:,.0f} s |")
    print(f"| bytes shipped to the client | {per_file_bytes * target / 1e6:,.0f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
