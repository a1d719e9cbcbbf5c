#!/usr/bin/env python3
"""What the whole-job reasoning costs at scale: one generated shape (``bench/shapes.py``) at
16,384 ranks by default, timed in three steps.

  build      parse every file and merge the per-file models (``api.build``, ``--jobs``)
  wholejob   the members (``model/members.py``) and the facts that reason across the ranks
             (``model/facts/wholejob.py``, ``rendezvous.py``), from the compact per-file
             results: each rank's track, no event list across files (the knowledge base's
             lookup table, loaded once per run whatever the job's size, is timed apart)
  diagnose   every rule on the model, findings ranked, the report (includes ``wholejob``'s
             facts again only if the model changed: they are memoised)

and checks that the first finding names the culprit the generator injected.  Prints a
Markdown table row.

  python bench/wholejob.py                                   # silent rank, 16,384 per-rank files
  python bench/wholejob.py --shape other_collective --variant size --layout one-file --ranks 4096
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

#: the facts that reason across the members
WHOLE_JOB_FACTS = ("rank_named", "odd_one_out", "first_failure", "quiet_rank", "busy_past_timeout",
                   "store_wait", "straggler_hosts", "duplicate_busid")


def _shapes():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_shapes", HERE / "shapes.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["bench_shapes"] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="silent")
    ap.add_argument("--variant", default="")
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--layout", choices=("per-rank", "one-file"), default="per-rank")
    ap.add_argument("--jobs", type=int, default=None, help="analyze --jobs (default: the CPUs)")
    ap.add_argument("--out", default=None, help="job folder (default /tmp/ncclsleuth-wholejob-<shape>-<ranks>-<layout>)")
    a = ap.parse_args(argv)
    from ncclsleuth import api
    from ncclsleuth.util.gcpause import paused

    out = Path(a.out or f"/tmp/ncclsleuth-wholejob-{a.shape}{a.variant}-{a.ranks}-{a.layout}")
    man_path = Path(str(out) + ".manifest.json")
    t = time.perf_counter()
    if man_path.exists() and out.is_dir():
        man = json.loads(man_path.read_text())
        gen_s = 0.0
    else:
        gen = _shapes()
        args = gen.build_parser().parse_args(["--shape", a.shape, "--ranks", str(a.ranks), "--layout", a.layout,
                                              "--out", str(out)] + (["--variant", a.variant] if a.variant else []))
        man = gen.make(args)
        gen_s = time.perf_counter() - t
    options = api.Options(jobs=a.jobs)
    rules = api.load_rules(options)

    with paused():  # as analyze runs: no gc pass over the model between the steps
        return _timed(a, man, gen_s, out, options, rules)


def _timed(a: argparse.Namespace, man: dict, gen_s: float, out: Path, options: object, rules: list) -> int:
    from ncclsleuth import api
    from ncclsleuth.knowledge import identifier
    from ncclsleuth.model.facts import FACTS
    from ncclsleuth.model.members import members

    size = sum(p.stat().st_size for p in out.iterdir())
    t = time.perf_counter()
    identifier()  # the knowledge base's lookup table: once per run, whatever the job's size
    kb_s = time.perf_counter() - t
    t = time.perf_counter()
    built = api.build([str(out)], options)  # type: ignore[arg-type]
    build_s = time.perf_counter() - t
    model = built.model

    t = time.perf_counter()
    n_members = len(members(model))
    for name in WHOLE_JOB_FACTS:
        FACTS[name](model)
    whole_s = time.perf_counter() - t

    t = time.perf_counter()
    report = api.diagnose(model, rules, built.notices)
    diag_s = time.perf_counter() - t

    probs = [f for f in report.findings if f.severity in ("warning", "error")]
    top = probs[0] if probs else None
    named = top is not None and (sorted(top.ranks) == sorted(man["culprit_ranks"]) or
                                 (man["shape"] == "straggler_node" and top.hosts == man["culprit_hosts"]))
    print("| shape | ranks | layout | size | members | generate | knowledge load | build | whole-job facts | diagnose | first finding | culprit named |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {man['shape']}{':' + man['variant'] if man['variant'] else ''} | {a.ranks:,} | {a.layout} | "
          f"{size / 2**20:.0f} MiB | {n_members:,} | {gen_s:.1f} s | {kb_s:.2f} s | {build_s:.1f} s | {whole_s:.2f} s | "
          f"{diag_s:.2f} s | {top.rule_id if top else '-'} {top.ranks[:4] if top else ''} | "
          f"{'yes' if named else 'NO'} (want {man['culprit_ranks'][:4]}) |")
    return 0 if named else 1


if __name__ == "__main__":
    sys.exit(main())
