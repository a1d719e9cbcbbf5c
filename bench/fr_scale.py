"""Flight Recorder dumps at scale: N ranks x E entries, one rank missing a collective.

    python bench/fr_scale.py --ranks 16384 --entries 2000 --out /tmp/fr16k     # writes the dumps
    /usr/bin/time -v ncclsleuth analyze /tmp/fr16k --format json > /dev/null

Each dump is a protocol-2 pickle shaped like PyTorch 2.13's (frames, sizes, dtypes,
pg_status), ~190 bytes an entry.  Every rank issues E all_reduces of group 0; rank
``--culprit`` stops one short, so the others wait in #E: ncclsleuth must name it (FR003).
``--run`` also times the analysis in this process (build + rules) and prints peak RSS.
"""
from __future__ import annotations

import argparse
import os
import pickle
import resource
import sys
import time


def dump(rank: int, entries: int, culprit: int) -> bytes:
    frames = [{"name": "all_reduce", "filename": "/opt/venv/lib/python3.11/site-packages/torch/distributed/"
               "distributed_c10d.py", "line": 3245},
              {"name": "wrapper", "filename": "/opt/venv/lib/python3.11/site-packages/torch/distributed/"
               "c10d_logger.py", "line": 83},
              {"name": "main", "filename": "/workspace/train.py", "line": 183}]
    n = entries - 1 if rank == culprit else entries
    es = []
    for i in range(n):
        last = i == n - 1 and rank != culprit
        es.append({"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": i + 1,
                   "p2p_seq_id": 0, "op_id": i + 1, "profiling_name": "nccl:all_reduce", "time_created_ns":
                   1_700_000_000_000_000_000 + i * 1000, "input_sizes": [[1 << 22]], "input_dtypes": ["BFloat16"],
                   "output_sizes": [[1 << 22]], "output_dtypes": ["BFloat16"], "state": "scheduled" if last else
                   "completed", "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
                   "retired": not last, "timeout_ms": 600000, "is_p2p": False, "frames": frames,
                   "thread_id": "1", "thread_name": "pt_main"})
    d = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[]"}},
         "comm_lib_version": "2.27.3", "pg_status": {"0": {"last_enqueued_collective": n, "last_started_collective":
                                                            -1, "last_completed_collective": n - (rank != culprit)}},
         "entries": es}
    return pickle.dumps(d, protocol=2)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--culprit", type=int, default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--run", action="store_true", help="analyse in this process and print time and peak RSS")
    a = ap.parse_args()
    culprit = a.culprit if a.culprit is not None else a.ranks * 2 // 3
    os.makedirs(a.out, exist_ok=True)
    t = time.perf_counter()
    size = 0
    for r in range(a.ranks):
        data = dump(r, a.entries, culprit)
        size += len(data)
        with open(os.path.join(a.out, f"nccl_trace_rank_{r}"), "wb") as f:
            f.write(data)
    print(f"wrote {a.ranks} dumps x {a.entries} entries, {size / 1e6:.0f} MB, in {time.perf_counter() - t:.1f} s;"
          f" culprit rank {culprit}")
    if a.run:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        from ncclsleuth import api

        t = time.perf_counter()
        report = api.analyze([a.out])
        took = time.perf_counter() - t
        top = report.verdict
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"analyze: {took:.1f} s, peak RSS {rss:.0f} MiB; verdict {top.rule_id if top else None} "
              f"ranks {top.ranks if top else None}: {top.title if top else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
