#!/usr/bin/env python3
"""Synthetic multi-node GPU job logs in real NCCL / PyTorch formats, for benchmarks.

Every NCCL and PyTorch line is built from a format quoted in
``/work/shared/reference/nccl/FORMAT.md`` (NCCL prefix, WARN with ``file:line`` and the
blank line before it, 2.26+ ``[YYYY-mm-dd HH:MM:SS] `` WARN timestamps, version banner,
bootstrap / NET/IB / ``Using network`` lines, comm Init START/COMPLETE in the wording of
the chosen version, ring dumps by rank 0 only, ``Trees``, per-connection lines,
``Init timings``, ``Bootstrap timings``) and ``/work/shared/reference/torch/EXAMPLES.md``
(watchdog timeout, ``failure detected by watchdog``, dump-signal lines of the laggard,
desync report).  Values (hosts, pids, pointers, busIds, commIds) are invented but
consistent across ranks: every rank of a communicator prints the same commId, ring
neighbours on another host connect over ``NET/IB``, neighbours on the same host over
``P2P/IPC``.

Training noise (``iter N: loss ..., time: ...ms``, HF-trainer dicts, ``logging`` lines,
tqdm bars, some with ``\\r`` redraws) is interleaved with the NCCL lines of each rank.

Layouts:
  per-rank-files  one file per process, named like ``NCCL_DEBUG_FILE=nccl.%h.%p.log``
                  (here it holds the process's whole stdout: NCCL lines *and* the
                  training noise, so the parser sees mixed input);
  one-file        all processes interleaved in one ``job.log`` in blocks of 1..32
                  lines, as a shared stdout would (a WARN stays glued to its blank line).

Deterministic: the same arguments and ``--seed`` give byte-identical files.  A manifest
(line/byte counts, culprit ranks of the injected failure) is written next to the
output folder as ``<out>.manifest.json`` so that the folder holds only logs.

Examples:
  python bench/generate.py --ranks 64 --target-lines 1000000 --out bench/out/job1m
  python bench/generate.py --ranks 16 --inject desync --layout one-file --out bench/out/desync
  python bench/generate.py --ranks 1024 --comms 3 --target-lines 10000000 --gzip --out bench/out/big
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

INJECTIONS = ("none", "missing_rank", "socket_fallback", "wrong_iface", "desync", "ib_error", "dup_gpu")
_BUSIDS = ("18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000")
_CHUNK_LINES = 16384
_T0 = 1764415800  # 2025-11-29 11:30:00 UTC: the job starts (times below are seconds after it)


# --------------------------------------------------------------------------- the job


@dataclass
class Rank:
    rank: int
    node: int
    local: int
    host: str
    pid: int
    dev: int
    busid: str
    ip: str


@dataclass
class Comm:
    index: int
    kind: str  # world | tp | dp
    members: list[list[int]]  # groups of global ranks (one communicator each)
    comm_ids: list[str]
    color_of: dict[int, int] = field(default_factory=dict)


class Style:
    """What a NCCL version prints (see FORMAT.md, section 3)."""

    def __init__(self, version: str) -> None:
        parts = version.split(".")
        if len(parts) == 2:
            version = {"2.18": "2.18.6", "2.23": "2.23.4", "2.26": "2.26.2"}.get(version, version + ".1")
            parts = version.split(".")
        self.version = version
        self.mm = (int(parts[0]), int(parts[1]))
        self.code = int(parts[0]) * 10000 + int(parts[1]) * 100 + int(parts[2])
        self.cuda = "12.2" if self.mm < (2, 23) else "12.4"
        v = self.mm
        self.banner_every_process = v >= (2, 22)          # INFO banner on every process, else bare on rank 0
        self.bootstrap_word = "Bootstrap: Using" if v >= (2, 24) else "Bootstrap : Using"
        self.named_init = v >= (2, 23)                     # "%s comm %p ..." with the init function name
        self.split_parent = v >= (2, 24)                   # "... parent %p splitCount %d color %d key %d- Init START"
        self.nranks_line = v >= (2, 20)                    # "comm %p rank %d nRanks %d nNodes %d ... MNNVL %d"
        self.timings = v >= (2, 23)                        # Init timings / Bootstrap timings
        self.runtime_connect = v >= (2, 22)                # connection lines at the first collective
        self.ring_cap128 = v >= (2, 23)                    # ring dump: width by digits, 128-char cap
        self.channels_line = v >= (2, 20)
        self.pxn_rings = v >= (2, 24)                      # "Connected all rings, use ring PXN 0 GDR 1"
        self.warn_ts = v >= (2, 26)                        # "[%F %T] " before WARN lines
        self.progress_thread = "[Progress Thread]" if v >= (2, 19) else "[Proxy Thread]"
        self.world_fn = "ncclCommInitRankConfig" if v >= (2, 26) else "ncclCommInitRank"


class Job:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.st = Style(a.nccl_version)
        rng = random.Random(a.seed)
        self.rng = rng
        n, ph = a.ranks, a.per_host
        self.nnodes = (n + ph - 1) // ph
        self.ranks: list[Rank] = []
        for node in range(self.nnodes):
            local_count = min(ph, n - node * ph)
            pids = sorted(rng.sample(range(12000, 98000), local_count))
            host = f"node{node:03d}"
            ip = f"10.1.{node // 250}.{node % 250 + 1}"
            for local in range(local_count):
                r = node * ph + local
                self.ranks.append(Rank(r, node, local, host, pids[local], local,
                                       _BUSIDS[local] if local < len(_BUSIDS) else f"{0x1a000 + 0x11000 * local:x}", ip))
        self.inject = a.inject
        self.culprit: list[int] = []
        self.bad_node: int | None = None
        if self.inject in ("missing_rank", "desync", "ib_error"):
            if n < 2:
                raise SystemExit("generate: --inject %s needs at least 2 ranks" % self.inject)
            if self.inject == "ib_error":  # a rank whose ring successor sits on another host
                cands = [r.rank for r in self.ranks if r.local == ph - 1 and r.rank + 1 < n] or [n - 1]
                self.culprit = [rng.choice(cands)]
            else:
                self.culprit = [rng.randrange(1, n)]
        elif self.inject in ("socket_fallback", "wrong_iface"):
            if self.nnodes < 2:
                raise SystemExit("generate: --inject %s needs at least 2 hosts" % self.inject)
            self.bad_node = rng.randrange(1, self.nnodes)
            self.culprit = [r.rank for r in self.ranks if r.node == self.bad_node]
        elif self.inject == "dup_gpu":
            node = rng.randrange(self.nnodes)
            locs = [r for r in self.ranks if r.node == node]
            if len(locs) < 2:
                raise SystemExit("generate: --inject dup_gpu needs 2 ranks on a host")
            a0, b0 = locs[0], locs[1]
            b0.dev, b0.busid = a0.dev, a0.busid  # CUDA_VISIBLE_DEVICES mistake: both on GPU 0
            self.culprit = [a0.rank, b0.rank]
        self.comms = self._comms(rng)
        # per (comm index, group index, global rank) communicator pointer
        self.ptr: dict[tuple[int, int], str] = {}
        for c in self.comms:
            for g in c.members:
                for r in g:
                    self.ptr[(c.index, r)] = "0x55%010x" % rng.getrandbits(40)
        self.world_ptr = {r.rank: self.ptr[(0, r.rank)] for r in self.ranks}
        # where each rank sits in each communicator, and each group's hosts, once: asked of every
        # rank, a scan of the group (100,000 ranks in the world communicator) made the job quadratic
        #: (comm index, global rank) -> (group index, rank in the group)
        self.where: dict[tuple[int, int], tuple[int, int]] = {}
        #: (comm index, group index) -> host -> the group's global ranks on it, in order
        self.on_node: dict[tuple[int, int], dict[int, list[int]]] = {}
        for c in self.comms:
            for gi, g in enumerate(c.members):
                by_node = self.on_node[(c.index, gi)] = {}
                for pos, r in enumerate(g):
                    self.where.setdefault((c.index, r), (gi, pos))
                    by_node.setdefault(self.ranks[r].node, []).append(r)

    def _comms(self, rng: random.Random) -> list[Comm]:
        n, ph = self.a.ranks, self.a.per_host
        out = [Comm(0, "world", [list(range(n))], ["0x%016x" % rng.getrandbits(64)])]
        for k in range(1, self.a.comms):
            if k % 2 == 1:  # tensor parallel: one communicator per host
                groups = [[r.rank for r in self.ranks if r.node == node] for node in range(self.nnodes)]
                color = {r.rank: r.node for r in self.ranks}
                kind = "tp"
            else:  # data/pipeline parallel: same local rank across hosts
                groups = [[r.rank for r in self.ranks if r.local == loc] for loc in range(min(ph, n))]
                color = {r.rank: r.local for r in self.ranks}
                kind = "dp"
            out.append(Comm(k, kind, groups, ["0x%016x" % rng.getrandbits(64) for _ in groups], color))
        return out


# --------------------------------------------------------------------------- one rank's NCCL/PyTorch lines


def _ts(sec: int, frac: int | None = None) -> str:
    t = time.gmtime(_T0 + sec)
    return time.strftime("%Y-%m-%d %H:%M:%S", t)


def _glog(sec: int, ns: int) -> str:
    t = time.gmtime(_T0 + sec)
    return "%d%02d %02d:%02d:%02d.%09d" % (t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ns)


class RankLog:
    """The NCCL / PyTorch lines of one process, as a list of phases (lists of items).

    An item is one line, or several lines that one process writes at once (a WARN with
    its leading blank line, a multi-line PyTorch report); the one-file layout never
    splits an item.
    """

    def __init__(self, job: Job, rk: Rank) -> None:
        self.job, self.rk, self.st = job, rk, job.st
        self.rng = random.Random(job.a.seed * 1_000_003 + rk.rank * 7919 + 17)
        self.P = f"{rk.host}:{rk.pid}:{rk.pid} [{rk.dev}] NCCL INFO "

    # prefixes ---------------------------------------------------------------
    def p(self, tid_off: int = 0, dev: int | None = None) -> str:
        rk = self.rk
        return f"{rk.host}:{rk.pid}:{rk.pid + tid_off} [{rk.dev if dev is None else dev}] NCCL INFO "

    def warn(self, where: str, msg: str, tid_off: int = 0, sec: int = 0) -> str:
        rk = self.rk
        ts = f"[{_ts(sec)}] " if self.st.warn_ts else ""
        return f"\n{ts}{rk.host}:{rk.pid}:{rk.pid + tid_off} [{rk.dev}] {where} NCCL WARN {msg}"

    def torch(self, lvl: str, sec: int, src: str, msg: str) -> str:
        ns = self.rng.randrange(10**9)
        return f"[rank{self.rk.rank}]:[{lvl}{_glog(sec, ns)} {src}] {msg}"

    # phases -------------------------------------------------------------------
    def phases(self) -> list[list[str]]:
        """[prelude, comm0 init, comm1 init, ..., first collective, epilogue]."""
        job, rk, st, inj = self.job, self.rk, self.st, self.job.inject
        if inj == "missing_rank" and rk.rank in job.culprit:
            return []  # this process never started: no file, no line
        out: list[list[str]] = [self.prelude()]
        fails_at_init = inj in ("missing_rank", "wrong_iface", "dup_gpu")
        for c in job.comms:
            gi = job.where[(c.index, rk.rank)][0]
            out.append(self.comm_init(c, gi))
            if fails_at_init:
                break
        if fails_at_init:
            out.append(self.epilogue())
            return out
        first: list[str] = []
        if st.runtime_connect:
            for c in job.comms:
                gi = job.where[(c.index, rk.rank)][0]
                first.extend(self.connections(c, gi))
        out.append(first)
        out.append(self.epilogue())
        return out

    def prelude(self) -> list[str]:
        rk, st, job = self.rk, self.st, self.job
        P = self.P
        L: list[str] = []
        if st.banner_every_process:
            L.append(f"{P}NCCL version {st.version}+cuda{st.cuda}")
        elif rk.rank == 0:
            L.append(f"NCCL version {st.version}+cuda{st.cuda}")
        L.append(f"{P}cudaDriverVersion 12040")
        iface, ip = "ib0", rk.ip
        if job.inject == "wrong_iface" and rk.node == job.bad_node:
            iface, ip = "docker0", "172.17.0.1"
            L.append(f"{P}NCCL_SOCKET_IFNAME set by environment to ^lo")
        else:
            L.append(f"{P}NCCL_SOCKET_IFNAME set by environment to ib0")
        L.append(f"{P}{st.bootstrap_word} {iface}:{ip}<0>")
        if st.mm >= (2, 26):
            L.append(f"{P}NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.")
        elif st.mm >= (2, 22):
            L.append(f"{P}NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
        L.append(f"{P}NCCL_IB_TIMEOUT set by environment to 22.")
        if job.inject == "socket_fallback" and rk.node == job.bad_node:
            L.append(f"{P}NET/IB : No device found.")
            L.append(f"{P}NET/Socket : Using [0]eth0:10.0.{rk.node // 250}.{rk.node % 250 + 1}<0>")
            L.append(f"{P}Using network Socket")
        else:
            nics = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(8))
            L.append(f"{P}NET/IB : Using {nics} ; OOB {iface}:{ip}<0>")
            L.append(f"{P}Using network IB")
        L.append(self.torch("I", 110, "ProcessGroupNCCL.cpp:968",
                            f"[PG ID 0 PG GUID 0(default_pg) Rank {rk.rank}] ProcessGroupNCCL initialization "
                            f"options: size: {job.a.ranks}, global rank: {rk.rank}, TIMEOUT(ms): 600000, "
                            "USE_HIGH_PRIORITY_STREAM: 0, SPLIT_FROM: 0, SPLIT_COLOR: -2, PG Name: 0"))
        return L

    def _init_line(self, c: Comm, gi: int, me: int, n: int, ptr: str, what: str) -> str:
        st, rk = self.st, self.rk
        base = f"comm {ptr} rank {me} nranks {n} cudaDev {rk.dev} nvmlDev {rk.dev} busId {rk.busid}"
        if c.kind == "world" or not st.split_parent:
            body = f"{base} commId {c.comm_ids[gi]} - Init {what}"
        else:
            parent = self.job.world_ptr[rk.rank]
            sep = "-" if what == "START" else " -"  # no space before '-' in the START format
            body = f"{base} parent {parent} splitCount {c.index} color {c.color_of[rk.rank]} key {me}{sep} Init {what}"
        if st.named_init:
            fn = st.world_fn if c.kind == "world" else "ncclCommSplit"
            body = f"{fn} {body}"
        return self.p(40 + c.index) + body

    def comm_init(self, c: Comm, gi: int) -> list[str]:
        job, rk, st, rng = self.job, self.rk, self.st, self.rng
        group = c.members[gi]
        n, me = len(group), job.where[(c.index, rk.rank)][1]
        ptr = job.ptr[(c.index, rk.rank)]
        tid = 40 + c.index
        P = self.p(tid)
        by_node = job.on_node[(c.index, gi)]
        nodes = by_node  # one key a host of the group
        mates = by_node[rk.node]
        local_ranks = len(mates)
        local_rank = sum(1 for r in mates if r < rk.rank)  # a host's few, not the group's
        L = [self._init_line(c, gi, me, n, ptr, "START")]
        boot_recv = rng.uniform(0.002, 0.05) if c.kind != "world" else rng.uniform(0.5, 2.5)
        if st.timings:
            L.append(f"{P}Bootstrap timings total {boot_recv + 0.0021:.6f} (create 0.000056, send 0.000312, "
                     f"recv {boot_recv:.6f}, ring 0.00{rng.randrange(1000, 9999)}, delay 0.000000)")
        if job.inject == "missing_rank" and c.kind == "world":
            return L  # the root waits for the missing rank forever
        if job.inject == "wrong_iface" and c.kind == "world":
            if rk.node != job.bad_node:
                port = 40000 + rng.randrange(20000)
                msg = f"socketStartConnect: Connect to 172.17.0.1<{port}> failed : Connection refused"
                L.append(self.warn("misc/socket.cc:558", msg, tid, sec=62))
                L.append(f"{P}misc/socket.cc:567 -> 2")
                L.append(f"{P}bootstrap.cc:272 -> 2")
                L.append(f"{P}init.cc:1586 -> 2 [Async thread]")
                L.extend(self.torch_nccl_error("unhandled system error (run with NCCL_DEBUG=INFO for details)",
                                               "ncclSystemError: System call (e.g. socket, malloc) or external "
                                               "library call failed or device error. ", msg))
            return L
        # NCCL checks for a duplicate GPU in initTransportsRank's first AllGather, before it prints
        # the nRanks/nNodes line (src/init.cc): the two ranks fail there, the others go on
        if job.inject == "dup_gpu" and c.kind == "world":
            if rk.rank in job.culprit:
                other = job.culprit[1] if rk.rank == job.culprit[0] else job.culprit[0]
                msg = f"Duplicate GPU detected : rank {rk.rank} and rank {other} both on CUDA device {rk.busid}"
                L.append(self.warn("init.cc:934", msg, tid, sec=3))
                L.append(f"{P}init.cc:1588 -> 5")
                L.append(f"{P}init.cc:1855 -> 5 [Async thread]")
                L.extend(self.torch_nccl_error("invalid usage (run with NCCL_DEBUG=WARN for details)",
                                               "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
                                               msg))
            elif st.nranks_line:  # past the check; they wait for the two later in init
                L.append(f"{P}comm {ptr} rank {me} nRanks {n} nNodes {len(nodes)} localRanks {local_ranks} "
                         f"localRank {local_rank} MNNVL 0")
            return L
        if st.nranks_line:
            L.append(f"{P}comm {ptr} rank {me} nRanks {n} nNodes {len(nodes)} localRanks {local_ranks} "
                     f"localRank {local_rank} MNNVL 0")
        if st.mm >= (2, 23):
            L.append(f"{P}NVLS multicast support is not available on dev {rk.dev}")
        chans = self.job.a.channels
        if me == 0:
            L.extend(P + ln for ln in self.ring_dump(n, chans))
        L.append(P + self.trees(me, n, chans))
        if st.channels_line:
            L.append(f"{P}{chans} coll channels, {chans} collnet channels, 0 nvls channels, {chans} p2p channels, "
                     f"{chans} p2p channels per peer")
        if not st.runtime_connect:
            L.extend(self.connections(c, gi))
        L.append(f"{P}threadThresholds 8/8/64 | {8 * n}/8/64 | 512 | 512")
        if st.timings:
            fn = st.world_fn if c.kind == "world" else "ncclCommSplit"
            tot = [rng.uniform(0.1, 0.3), rng.uniform(0.005, 0.03), boot_recv + 0.003, rng.uniform(0.01, 0.08),
                   rng.uniform(0.2, 0.6), rng.uniform(0.01, 0.05), rng.uniform(0.001, 0.01), rng.uniform(0.05, 0.2)]
            L.append(f"{P}Init timings - {fn}: rank {me} nranks {n} total {sum(tot):.2f} (kernels {tot[0]:.2f}, "
                     f"alloc {tot[1]:.2f}, bootstrap {tot[2]:.2f}, allgathers {tot[3]:.2f}, topo {tot[4]:.2f}, "
                     f"graphs {tot[5]:.2f}, connections {tot[6]:.2f}, rest {tot[7]:.2f})")
        L.append(self._init_line(c, gi, me, n, ptr, "COMPLETE"))
        return L

    def ring_dump(self, n: int, chans: int) -> list[str]:
        out = []
        if self.st.ring_cap128:
            w = len(str(n - 1))
            body = "".join(" %*d" % (w, i) for i in range(n))
            for c in range(chans):
                s = "Channel %02d/%02d :%s" % (c, chans, body)
                out.append(s if len(s) <= 128 else s[:125] + "...")
        else:
            body = "".join(" %3d" % i for i in range(min(n, 20)))
            out.extend("Channel %02d/%02d : %s" % (c, chans, body) for c in range(chans))
        return out

    def trees(self, me: int, n: int, chans: int) -> str:
        parts = ["Trees"]
        for c in range(chans):
            i = me if c % 2 == 0 else n - 1 - me  # the odd channels use the mirrored tree

            def g(x: int, c: int = c) -> int:
                return x if c % 2 == 0 else n - 1 - x

            d0 = g(2 * i + 1) if 2 * i + 1 < n else -1
            d1 = g(2 * i + 2) if 2 * i + 2 < n else -1
            up = g((i - 1) // 2) if i > 0 else -1
            parts.append(f" [{c}] {d0}/{d1}/-1->{me}->{up}")
        s = "".join(parts)
        cap = 1023 - len(self.P) if self.st.mm < (2, 29) else 1 << 20  # 1024-byte vsnprintf buffer
        return s[:cap]

    def connections(self, c: Comm, gi: int) -> list[str]:
        job, rk, st = self.job, self.rk, self.st
        group = c.members[gi]
        n, me = len(group), job.where[(c.index, rk.rank)][1]
        if n == 1:
            return []
        P = self.p(80 + c.index)
        nxt = job.ranks[group[(me + 1) % n]]
        prv = job.ranks[group[(me - 1) % n]]
        fallback = job.inject == "socket_fallback" and rk.node == job.bad_node
        L = []
        for ch in range(job.a.channels):
            if nxt.node == rk.node:
                L.append(f"{P}Channel {ch:02d}/0 : {me}[{rk.dev}] -> {(me + 1) % n}[{nxt.dev}] via P2P/IPC/read")
            else:
                via = "NET/Socket/0" if fallback else f"NET/IB/{rk.dev % 8}/GDRDMA"
                L.append(f"{P}Channel {ch:02d}/0 : {me}[{rk.dev}] -> {(me + 1) % n}[{nxt.dev}] [send] via {via}")
            if prv.node != rk.node:
                via = "NET/Socket/0" if fallback else f"NET/IB/{rk.dev % 8}/GDRDMA"
                L.append(f"{P}Channel {ch:02d}/0 : {(me - 1) % n}[{prv.dev}] -> {me}[{rk.dev}] [receive] via {via}")
        L.append(f"{P}Connected all rings, use ring PXN 0 GDR 1" if st.pxn_rings else f"{P}Connected all rings")
        L.append(f"{P}Connected all trees")
        return L

    # failures -------------------------------------------------------------------
    def torch_nccl_error(self, what: str, detail: str, last: str) -> list[str]:
        pre = f"[rank{self.rk.rank}]: "
        return [pre + "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                f"NCCLUtils.hpp:317, {what}, NCCL version {self.st.version}",
                pre + detail, pre + "Last error:", pre + last]

    def epilogue(self) -> list[str]:
        job, rk, inj = self.job, self.rk, self.job.inject
        R = rk.rank
        pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {R}]"
        L: list[str] = []
        if inj == "desync":
            if R in job.culprit:
                L.append(self.torch("E", 716, "ProcessGroupNCCL.cpp:1685",
                                    f"{pg} Observed flight recorder dump signal from another rank via TCPStore."))
                L.append(self.torch("E", 716, "ProcessGroupNCCL.cpp:1746",
                                    f"{pg} Received a dump signal due to a collective timeout from  rank 0 and we "
                                    "will try our best to dump the debug info. Last enqueued NCCL work: 1244, last "
                                    "completed NCCL work: 1244.This is most likely caused by incorrect usages of "
                                    "collectives, e.g., wrong sizes used across ranks, the order of collectives is "
                                    "not same for all ranks or the scheduled collective, for some reason, didn't "
                                    "run. Additionally, this can be caused by GIL deadlock or other reasons such "
                                    "as network errors or bugs in the communications library (e.g. NCCL), etc. "))
                L.append(self.torch("I", 716, "ProcessGroupNCCL.cpp:1565",
                                    f"{pg} ProcessGroupNCCL dumping nccl trace to /tmp/nccl_trace_rank_{R}"))
                L.append(self.torch("I", 717, "FlightRecorder.cpp:129",
                                    f"Finished writing NCCLPG debug info to /tmp/nccl_trace_rank_{R}"))
                L.append(self.torch("F", 777, "ProcessGroupNCCL.cpp:1575",
                                    f"{pg} {pg} Terminating the process after attempting to dump debug info, due "
                                    "to collective timeout or exception."))
                return L
            wd = (f"[Rank {R}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1245, OpType=ALLREDUCE, "
                  "NumelIn=26214400, NumelOut=26214400, Timeout(ms)=600000) ran for 600047 milliseconds before "
                  "timing out.")
            L.append(self.torch("E", 715, "ProcessGroupNCCL.cpp:632", wd))
            if R == 0:
                lag = job.culprit[0]
                others = ", ".join(str(x) for x in range(job.a.ranks) if x != lag)
                L.append(self.torch("E", 715, "ProcessGroupNCCL.cpp:1936", f"Rank {R}") +
                         "\n\t - [0] Timeout at collective: ALLREDUCE, #1245"
                         "\n\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:"
                         f"\n\t     [{lag}] finished collective #1244, but didn't join collective #1245 (count from 1)"
                         "\n\t - Snapshot of ranks' latest states:"
                         "\n\t   #1244 finished ranks:"
                         f"\n\t     [{lag}] finished ALLREDUCE"
                         "\n\t   #1245 started ranks:"
                         f"\n\t     [{others}] started ALLREDUCE")
            L.append(self.torch("E", 715, "ProcessGroupNCCL.cpp:2168",
                                f"{pg}  failure detected by watchdog at work sequence id: 1245 PG status: last "
                                "enqueued work: 1245, last completed work: 1244"))
            L.append(self.torch("E", 715, "ProcessGroupNCCL.cpp:681",
                                f"[Rank {R}] Some NCCL operations have failed or timed out. Due to the asynchronous "
                                "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete "
                                "data."))
            L.append(self.torch("E", 715, "ProcessGroupNCCL.cpp:687",
                                f"[Rank {R}] To avoid data inconsistency, we are taking the entire process down."))
            L.append(self.torch("E", 715, "ProcessGroupNCCL.cpp:1895",
                                f"{pg} Process group watchdog thread terminated with exception: {wd}"))
            L.append("terminate called after throwing an instance of 'c10::DistBackendError'")
            L.append(f"  what():  {pg} Process group watchdog thread terminated with exception: {wd}")
        elif inj == "missing_rank":
            wd = (f"[Rank {R}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
                  "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.")
            L.append(self.torch("E", 700, "ProcessGroupNCCL.cpp:632", wd))
            L.append(self.torch("E", 700, "ProcessGroupNCCL.cpp:2168",
                                f"{pg}  failure detected by watchdog at work sequence id: 1 PG status: last "
                                "enqueued work: 1, last completed work: 0"))
        elif inj == "ib_error":
            tid = 120
            if R in job.culprit or R - 1 in job.culprit:
                sending = R in job.culprit
                peer = job.ranks[R + 1 if sending else R - 1]
                port = 40000 + self.rng.randrange(20000)
                st = self.st
                kind = "Send" if sending else "Recv"
                if st.mm >= (2, 22):
                    msg = (f"NET/IB: Got completion from peer {peer.ip}<{port}> with status=12 opcode=0 len=0 "
                           f"vendor err 129 ({kind}) hca mlx5_{rk.dev % 8}")
                else:
                    msg = (f"NET/IB : Got completion from peer {peer.ip}<{port}> with error 12, opcode 0, len 0, "
                           f"vendor err 129 ({kind})")
                P = self.p(tid)
                L.append(self.warn("transport/net_ib.cc:1696", msg, tid, sec=833))
                L.append(f"{P}transport/net.cc:1294 -> 6")
                L.append(f"{P}proxy.cc:698 -> 6 {st.progress_thread}")
                L.append(self.torch("E", 834, "ProcessGroupNCCL.cpp:1895",
                                    f"{pg} Process group watchdog thread terminated with exception: NCCL error: "
                                    "remote process exited or there was a network error, NCCL version "
                                    f"{st.version}"))
                L.append("ncclRemoteError: A call failed possibly due to a network error or a remote process "
                         "exiting prematurely.")
                L.append("Last error:")
                L.append(msg)
        return L


# --------------------------------------------------------------------------- noise


_BAR = "█▏▎▍▌▋▊▉"


class Noise:
    """Training-loop output of one rank, continuing its iteration count between calls."""

    def __init__(self, seed: int, rank: int) -> None:
        self.rng = random.Random(seed * 2_000_003 + rank * 104729 + 5)
        self.it = 83000 + self.rng.randrange(1000)
        self.t = 120.0

    def lines(self, n: int) -> Iterator[str]:
        rnd = self.rng.random
        for _ in range(n):
            self.it += 1
            it = self.it
            x = rnd()
            loss = 1.2 + 0.6 * ((x * 7.31) % 1.0)
            self.t += 4.4
            kind = int(x * 10)
            if kind < 4:
                yield f"iter {it}: loss {loss:.4f}, time: {4300 + 200 * x:.2f}ms"
            elif kind < 6:
                yield (f"{{'loss': {loss:.4f}, 'grad_norm': {0.5 + x:.4f}, 'learning_rate': {3e-4 * (1 - x / 2):.3e}, "
                       f"'epoch': {it / 100000:.2f}}}")
            elif kind < 8:
                s = int(self.t)
                yield (f"2025-11-29 {11 + s // 3600 % 12:02d}:{30 + s // 60 % 30:02d}:{s % 60:02d},{int(x * 1000):03d} - "
                       f"INFO - step {it} | lr {3e-4 * (1 - x / 2):.3e} | grad_norm {0.5 + x:.4f} | "
                       f"tokens/s {120000 + int(x * 20000)}")
            else:
                total = 100000
                pos = it % total
                pct = pos * 100 // total
                full, part = divmod(pos * 80 // total, 8)
                bar = _BAR[0] * full + (_BAR[part] if part else " ") + " " * (9 - full)
                s = int(self.t)
                cur = (f"Training: {pct:3d}%|{bar[:10]}| {pos}/{total} [{s // 3600:02d}:{s // 60 % 60:02d}<"
                       f"{(total - pos) // 6000:02d}:{(total - pos) // 100 % 60:02d}, {5.8 + x / 2:.2f}it/s, "
                       f"loss={loss:.3f}]")
                if kind == 9 and x > 0.95:  # a tqdm redraw captured with its carriage returns
                    yield f"{cur}\r{cur}\r{cur}"
                else:
                    yield cur


# --------------------------------------------------------------------------- layout / writing


def _lines_of(items: list[str]) -> int:
    return sum(s.count("\n") + 1 for s in items)


def rank_stream(job: Job, rk: Rank, phases: list[list[str]], noise_n: int) -> Iterator[str]:
    """The items of one process: NCCL phases with training noise between them."""
    noise = Noise(job.a.seed, rk.rank)
    if not phases:
        return
    early_fail = job.inject in ("missing_rank", "wrong_iface", "dup_gpu")
    # gaps: after prelude (data loading), between comm inits, after the first collective
    n_gaps = len(phases) - 1
    if early_fail:
        weights = [1.0] + [0.0] * (n_gaps - 1)
    else:
        weights = [0.02] + [0.01] * (n_gaps - 2) + [1.0] if n_gaps >= 2 else [1.0] * n_gaps
    wsum = sum(weights) or 1.0
    counts = [int(noise_n * w / wsum) for w in weights]
    if counts:
        counts[-1 if not early_fail else 0] += noise_n - sum(counts)
    for i, ph in enumerate(phases):
        yield from ph
        if i < n_gaps and counts[i]:
            yield from noise.lines(counts[i])


class Writer:
    def __init__(self, path: str, gz: bool) -> None:
        self.path = path + (".gz" if gz else "")
        raw = open(self.path, "wb")  # noqa: SIM115
        self.f = gzip.GzipFile(filename=os.path.basename(path), mode="wb", compresslevel=1, fileobj=raw, mtime=0) \
            if gz else raw
        self.raw = raw
        self.buf: list[str] = []
        self.lines = 0
        self.bytes = 0

    def add(self, item: str) -> None:
        self.buf.append(item)
        if len(self.buf) >= _CHUNK_LINES:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            data = ("\n".join(self.buf) + "\n").encode("utf-8")
            self.lines += data.count(b"\n")
            self.bytes += len(data)
            self.f.write(data)
            self.buf = []

    def close(self) -> None:
        self.flush()
        if self.f is not self.raw:
            self.f.close()
        self.raw.close()


def generate(a: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    job = Job(a)
    if os.path.exists(a.out):
        if not a.force and os.listdir(a.out):
            raise SystemExit(f"generate: {a.out} exists and is not empty (use --force)")
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    all_phases = {rk.rank: RankLog(job, rk).phases() for rk in job.ranks}
    nccl_lines = sum(_lines_of(ph) for phs in all_phases.values() for ph in phs)
    live = [rk for rk in job.ranks if all_phases[rk.rank]]
    noise = a.noise_per_rank
    if a.target_lines:
        noise = max(0, (a.target_lines - nccl_lines) // max(1, len(live)))
    streams = {rk.rank: rank_stream(job, rk, all_phases[rk.rank], noise) for rk in live}
    files = []
    total_lines = total_bytes = 0
    if a.layout == "per-rank-files":
        for rk in live:
            w = Writer(os.path.join(a.out, f"nccl.{rk.host}.{rk.pid}.log"), a.gzip)
            for item in streams[rk.rank]:
                w.add(item)
            w.close()
            files.append(os.path.basename(w.path))
            total_lines += w.lines
            total_bytes += w.bytes
    else:
        rng = random.Random(a.seed * 31 + 7)
        w = Writer(os.path.join(a.out, "job.log"), a.gzip)
        active = [streams[rk.rank] for rk in live]
        add = w.add
        while active:
            k = rng.randrange(len(active))
            s = active[k]
            for _ in range(rng.randint(1, 32)):
                item = next(s, None)
                if item is None:
                    active[k] = active[-1]
                    active.pop()
                    break
                add(item)
        w.close()
        files.append(os.path.basename(w.path))
        total_lines, total_bytes = w.lines, w.bytes
    man = {
        "out": a.out, "files": len(files), "layout": a.layout, "gzip": a.gzip, "ranks": a.ranks,
        "per_host": a.per_host, "hosts": job.nnodes, "comms": a.comms, "channels": a.channels,
        "nccl_version": job.st.version, "inject": a.inject, "culprit_ranks": job.culprit,
        "culprit_hosts": sorted({job.ranks[r].host for r in job.culprit}),
        "noise_per_rank": noise, "nccl_lines": nccl_lines, "lines": total_lines,
        "bytes_uncompressed": total_bytes, "seed": a.seed,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    with open(a.out.rstrip("/") + ".manifest.json", "w") as f:
        json.dump(man, f, indent=1)
    return man


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--comms", type=int, default=1, help="communicators: world, then TP (per host) and DP "
                                                              "(per local rank) splits, alternating")
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--noise-per-rank", type=int, default=0)
    ap.add_argument("--target-lines", type=int, default=0, help="scale the noise to reach about this many lines")
    ap.add_argument("--nccl-version", default="2.23", help="2.18 | 2.23 | 2.26 (or a full x.y.z)")
    ap.add_argument("--layout", choices=("per-rank-files", "one-file"), default="per-rank-files")
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--inject", choices=INJECTIONS, default="none")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true", help="replace a non-empty --out")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.ranks < 1 or a.per_host < 1 or a.comms < 1 or a.channels < 1:
        raise SystemExit("generate: --ranks, --per-host, --comms and --channels must be >= 1")
    man = generate(a)
    json.dump(man, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
