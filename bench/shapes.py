#!/usr/bin/env python3
"""Multi-rank jobs in which one rank (or one node) breaks the whole job, in real line formats.

Each shape is a failure whose evidence is spread over the ranks: the culprit says little or
nothing, the other ranks report timeouts or lost connections.  The NCCL lines (version,
bootstrap, NET/IB, communicator init with ``busId``, rings, trees, connections, init timings)
come from :mod:`generate` (``bench/generate.py``); the PyTorch, gloo and torchrun lines are
quoted from ``/work/shared/reference/torch/EXAMPLES.md``, ``messages.tsv`` and the outputs of
PyTorch 2.13 in ``fixtures/real/``.

Shapes (``--shape``):

  silent            a rank initialised, trained and went quiet one step before the others;
                    the others' NCCL watchdogs time out (no desync report, no "last
                    enqueued" line: dump-on-timeout off)                 -> collective_desync
  out_of_data       a rank ran out of data and exited cleanly; the others' gloo all_reduce
                    fails with "Connection closed by peer"                -> collective_desync
  other_collective  a rank called another collective (--variant op) or the same with another
                    size (--variant size) at the same SeqNum; every rank's watchdog times out
                                                                          -> collective_desync
  died_first        a rank failed first: a CUDA error of its own (--variant error) or killed
                    by SIGKILL (--variant sigkill, the elastic agent's block says so); the
                    others' NCCL socket lines "Connection closed by remote peer" come seconds
                    later (NCCL 2.26 WARN timestamps)   -> cuda_error / peer_failure
  rank0_busy        rank 0 saves a checkpoint alone past the timeout; the others' gloo
                    "Timed out waiting 1800000ms for recv operation"      -> collective_timeout
  straggler_node    one node's ranks train at half speed, no error anywhere    -> straggler
  dup_gpu           two ranks of one host on the same GPU (same busId), with NCCL's
                    "Duplicate GPU detected" (--variant warn) or without it (--variant nowarn:
                    the two ranks' output stops after Init START, as NCCL fails their init)
                                                                          -> duplicate_gpu

Layouts: ``per-rank`` (one file per process, ``nccl.<host>.<pid>.log`` as NCCL_DEBUG_FILE names
them, holding the process's whole output) and ``one-file`` (all ranks interleaved in
``job.log`` in chunks of 1..32 lines, each line with ``srun --label``'s ``N: `` prefix).

A manifest (culprit ranks and hosts, the expected category) is written next to the output
folder as ``<out>.manifest.json`` and returned by :func:`make`.  Deterministic per ``--seed``.

    python bench/shapes.py --shape silent --ranks 64 --out /tmp/silent64
    python bench/shapes.py --shape other_collective --variant size --ranks 1024 --layout one-file --out /tmp/x
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SHAPES = ("silent", "out_of_data", "other_collective", "died_first", "rank0_busy", "straggler_node", "dup_gpu")
CATEGORY = {"silent": "collective_desync", "out_of_data": "collective_desync", "other_collective": "collective_desync",
            "died_first:error": "cuda_error", "died_first:sigkill": "peer_failure", "rank0_busy": "collective_timeout",
            "straggler_node": "straggler", "dup_gpu": "duplicate_gpu"}
_T0 = 1764415800  # 2025-11-29 11:30:00 UTC, as generate.py
_STEP_S = 4  # seconds per training step


def _generate_module():  # type: ignore[no-untyped-def]
    name = "ncclsleuth_bench_generate"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("generate.py"))
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


GEN = _generate_module()


def _glog(sec: float) -> str:
    """c10's glog time: MMDD HH:MM:SS.<9 digits> (the fraction is CLOCK_MONOTONIC, PFX-CPP-3)."""
    t = time.gmtime(_T0 + int(sec))
    return "%d%02d %02d:%02d:%02d.%09d" % (t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                                          int((sec % 1) * 1e9) or 104729)


def _iso(sec: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(_T0 + int(sec)))


@dataclass
class Plan:
    """What the job does: the culprit, and each rank's training and ending."""

    shape: str
    variant: str
    culprit: list[int] = field(default_factory=list)
    bad_host: str | None = None
    steps: int = 40  # steps the healthy ranks complete


class Job:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.rng = random.Random(a.seed)
        ga = GEN.build_parser().parse_args(["--ranks", str(a.ranks), "--per-host", str(a.per_host), "--channels",
                                            str(a.channels), "--nccl-version", a.nccl_version, "--seed", str(a.seed),
                                            "--inject", "dup_gpu" if a.shape == "dup_gpu" else "none",
                                            "--out", "/nonexistent"])
        self.gen = GEN.Job(ga)
        self.plan = self._plan()

    def _plan(self) -> Plan:
        a, rng, n = self.a, self.rng, self.a.ranks
        p = Plan(a.shape, a.variant)
        pick = rng.randrange(4, n) if n > 4 else n - 1  # never one of the first four in file order
        if a.shape in ("silent", "out_of_data", "other_collective", "died_first"):
            p.culprit = [pick]
        elif a.shape == "rank0_busy":
            p.culprit = [0]
        elif a.shape == "straggler_node":
            node = rng.randrange(1, self.gen.nnodes) if self.gen.nnodes > 1 else 0
            p.culprit = [r.rank for r in self.gen.ranks if r.node == node]
            p.bad_host = self.gen.ranks[p.culprit[0]].host
        elif a.shape == "dup_gpu":  # CUDA_VISIBLE_DEVICES mistake on one host: two processes on one GPU
            p.culprit = list(self.gen.culprit)
        if p.culprit and p.bad_host is None:
            p.bad_host = self.gen.ranks[p.culprit[0]].host
        return p

    # ------------------------------------------------------------------ one rank
    def lines(self, rk: object) -> list[str]:
        """Every line of one process, in the order it prints them (items may hold newlines)."""
        gen, plan = self.gen, self.plan
        r = rk.rank  # type: ignore[attr-defined]
        rl = GEN.RankLog(gen, rk)
        phases = rl.phases()
        out: list[str] = []
        for ph in phases[:-1]:  # prelude, communicator init, first collective; not the epilogue
            out.extend(ph)
        if plan.shape == "dup_gpu":
            out.extend(phases[-1])
            if plan.variant == "nowarn" and r in plan.culprit:
                # NCCL's WARN and what follows it did not reach the logs (a lower NCCL_DEBUG on these
                # ranks, stderr elsewhere): their output stops at the failed init, after Init START
                cut = next((i for i, ln in enumerate(out) if "Duplicate GPU detected" in ln), len(out))
                out = out[:cut]
            return out  # init fails on the two ranks: no training
        out.extend(self.training(r))
        out.extend(self.ending(rk, rl))
        return out

    def training(self, r: int) -> list[str]:
        plan, rng = self.plan, random.Random(self.a.seed * 7919 + r)
        last = plan.steps
        if plan.shape in ("silent", "died_first", "out_of_data") and r in plan.culprit:
            last = plan.steps - 1
        slow = 2.0 if plan.shape == "straggler_node" and r in plan.culprit else 1.0
        out = []
        for i in range(1, last + 1):
            ms = 4000.0 * slow + rng.uniform(-60, 60)
            out.append(f"[{_iso(120 + i * _STEP_S * slow)}] iter {i}: loss {1.9 - i * 0.01:.4f}, time: {ms:.2f}ms")
        return out

    def ending(self, rk: object, rl: object) -> list[str]:
        plan, r = self.plan, rk.rank  # type: ignore[attr-defined]
        t_fail = 120 + plan.steps * _STEP_S
        culprit = r in plan.culprit
        shape = plan.shape
        if shape == "silent":
            return [] if culprit else self.watchdog(r, t_fail + 600, "ALLREDUCE", 26214400)
        if shape == "other_collective":
            op, numel = ("BROADCAST", 26214400) if plan.variant == "op" else ("ALLREDUCE", 13107200)
            return self.watchdog(r, t_fail + 600, op if culprit else "ALLREDUCE", numel if culprit else 26214400,
                                 counters=True)
        if shape == "out_of_data":
            if culprit:
                return [f"epoch finished on rank {r}: data exhausted after {plan.steps - 1} batches"]
            return self.gloo_traceback(r, "pair.cc:553", f"Connection closed by peer [{rk.ip}]:{40000 + r}. This is "  # type: ignore[attr-defined]
                                       "typically caused by a remote worker crashing. Check the logs of the remote "
                                       "worker before reporting an error. GLHF! 🏖️")
        if shape == "rank0_busy":
            if culprit:
                return [f"saving checkpoint at step {plan.steps} to /ckpt/step{plan.steps}.pt"]
            return self.gloo_traceback(r, "unbound_buffer.cc:78",
                                       "Timed out waiting 1800000ms for recv operation to complete")
        if shape == "died_first":
            return self.died(rk, rl, culprit, t_fail)
        return []

    def watchdog(self, r: int, sec: float, op: str, numel: int, counters: bool = False) -> list[str]:
        pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {r}]"
        seq = 2 * self.plan.steps + 1
        wd = (f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
              f"NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.")
        out = [f"[rank{r}]:[E{_glog(sec)} ProcessGroupNCCL.cpp:632] {wd}"]
        if counters:
            out.append(f"[rank{r}]:[E{_glog(sec + 0.02)} ProcessGroupNCCL.cpp:2168] {pg}  failure detected by "
                       f"watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last completed "
                       f"work: {seq - 1}")
        out += [f"[rank{r}]:[E{_glog(sec + 0.03)} ProcessGroupNCCL.cpp:681] [Rank {r}] Some NCCL operations have failed "
                "or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
                "corrupted/incomplete data.",
                f"[rank{r}]:[E{_glog(sec + 0.03)} ProcessGroupNCCL.cpp:687] [Rank {r}] To avoid data inconsistency, we "
                "are taking the entire process down.",
                f"[rank{r}]:[E{_glog(sec + 0.04)} ProcessGroupNCCL.cpp:1895] {pg} Process group watchdog thread "
                f"terminated with exception: {wd}",
                "terminate called after throwing an instance of 'c10::DistBackendError'",
                f"  what():  {pg} Process group watchdog thread terminated with exception: {wd}"]
        return out

    def gloo_traceback(self, r: int, where: str, msg: str) -> list[str]:
        p = f"[rank{r}]:"
        return [f"{p} Traceback (most recent call last):",
                f'{p}   File "/workspace/train.py", line 388, in <module>',
                f"{p}     main()",
                f'{p}   File "/workspace/train.py", line 212, in main',
                f"{p}     dist.all_reduce(grads)",
                f'{p}   File "/opt/conda/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83, in wrapper',
                f"{p}     return func(*args, **kwargs)",
                f'{p}   File "/opt/conda/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in '
                "all_reduce",
                f"{p}     work.wait()",
                f"{p} RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/{where}] {msg}"]

    def died(self, rk: object, rl: object, culprit: bool, t: float) -> list[str]:
        r, host, pid, dev = rk.rank, rk.host, rk.pid, rk.dev  # type: ignore[attr-defined]
        if culprit:
            if self.plan.variant == "sigkill":
                return []  # SIGKILL: nothing at all; the agent's block says it (agent_lines)
            return [f"\n[{_iso(t)}] {host}:{pid}:{pid + 120} [{dev}] enqueue.cc:1556 NCCL WARN Cuda failure "
                    "'an illegal memory access was encountered'",
                    f"{host}:{pid}:{pid + 120} [{dev}] NCCL INFO group.cc:234 -> 1"]
        c = self.gen.ranks[self.plan.culprit[0]]
        port = 40000 + (r * 7) % 20000
        return [f"\n[{_iso(t + 2 + (r % 5))}] {host}:{pid}:{pid + 120} [{dev}] misc/socket.cc:49 NCCL WARN "
                f"socketProgress: Connection closed by remote peer {c.host}<{port}>",
                f"{host}:{pid}:{pid + 120} [{dev}] NCCL INFO misc/socket.cc:752 -> 6",
                f"{host}:{pid}:{pid + 120} [{dev}] NCCL INFO transport/net_socket.cc:474 -> 6"]

    def agent_lines(self) -> dict[str, list[str]]:
        """torchrun's own output per host, where the shape has it (died_first --variant sigkill)."""
        plan = self.plan
        if (plan.shape, plan.variant) != ("died_first", "sigkill"):
            return {}
        c = self.gen.ranks[plan.culprit[0]]
        t = time.strftime("%m%d %H:%M:%S", time.gmtime(_T0 + 120 + plan.steps * _STEP_S + 30))
        stamp = time.strftime("%Y-%m-%d_%H:%M:%S", time.gmtime(_T0 + 120 + plan.steps * _STEP_S + 30))
        apid = 1000 + c.node
        lines = [f"E{t}.512000 {apid} torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) "
                 f"local_rank: {c.local} (pid: {c.pid}) of binary: /opt/conda/bin/python3.11",
                 "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
                 "============================================================",
                 "train.py FAILED",
                 "------------------------------------------------------------",
                 "Failures:",
                 "  <NO_OTHER_FAILURES>",
                 "------------------------------------------------------------",
                 "Root Cause (first observed failure):",
                 "[0]:",
                 f"  time      : {stamp}",
                 f"  host      : {c.host}",
                 f"  rank      : {c.rank} (local_rank: {c.local})",
                 f"  exitcode  : -9 (pid: {c.pid})  (SIGKILL)",
                 "  error_file: <N/A>",
                 f"  traceback : Signal 9 (SIGKILL) received by PID {c.pid}",
                 "============================================================"]
        return {f"torchrun.{c.host}.log": lines}


def make(a: argparse.Namespace) -> dict:
    """Write the job under ``a.out``; return (and write) its manifest."""
    if a.shape not in SHAPES:
        raise SystemExit(f"shapes: unknown shape {a.shape!r}")
    job = Job(a)
    out = Path(a.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    streams = {rk.rank: job.lines(rk) for rk in job.gen.ranks}
    if a.layout == "per-rank":
        for rk in job.gen.ranks:
            (out / f"nccl.{rk.host}.{rk.pid}.log").write_text("\n".join(streams[rk.rank]) + "\n")
    else:
        rng = random.Random(a.seed * 31 + 7)
        pos = {r: 0 for r in streams}
        live = sorted(streams)
        buf: list[str] = []
        while live:
            k = rng.randrange(len(live))
            r = live[k]
            take = rng.randint(1, 32)
            items = streams[r][pos[r]:pos[r] + take]
            pos[r] += take
            for item in items:
                buf.extend(f"{r}: {ln}" if ln else f"{r}: " for ln in item.split("\n"))
            if pos[r] >= len(streams[r]):
                live[k] = live[-1]
                live.pop()
        (out / "job.log").write_text("\n".join(buf) + "\n")
    for name, lines in job.agent_lines().items():
        (out / name).write_text("\n".join(lines) + "\n")
    plan = job.plan
    key = f"{plan.shape}:{plan.variant}" if f"{plan.shape}:{plan.variant}" in CATEGORY else plan.shape
    man = {"shape": plan.shape, "variant": plan.variant, "layout": a.layout, "ranks": a.ranks,
           "per_host": a.per_host, "culprit_ranks": plan.culprit,
           "culprit_hosts": sorted({job.gen.ranks[r].host for r in plan.culprit}), "category": CATEGORY[key],
           "steps": plan.steps, "files": sorted(p.name for p in out.iterdir())[:3], "seed": a.seed}
    Path(str(out).rstrip("/") + ".manifest.json").write_text(json.dumps(man, indent=1))
    return man


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=SHAPES, required=True)
    ap.add_argument("--variant", default="", help="other_collective: op|size; died_first: error|sigkill; "
                                                   "dup_gpu: warn|nowarn")
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--channels", type=int, default=2)
    ap.add_argument("--nccl-version", default="2.26")
    ap.add_argument("--layout", choices=("per-rank", "one-file"), default="per-rank")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--out", required=True)
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    defaults = {"other_collective": "op", "died_first": "error", "dup_gpu": "warn"}
    a.variant = a.variant or defaults.get(a.shape, "")
    json.dump(make(a), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
