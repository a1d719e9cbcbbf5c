"""Merging per-file models into the job model, in input order.

The result does not depend on how files were grouped into workers: every file is
parsed into its own model and merged in the same order, with ``--jobs 1`` too.

A worker sends back a run of files merged into one model.  Merging is associative (first
value wins, counts add, lists keep their order) except where a bound decides what is kept
(``JobModel._room``): past ``MAX_PROCESSES``, ``MAX_RANKS`` and the others which items
are kept, and how many records are counted as untracked, depend on the order items
arrive in, and a run model's order (communicator by communicator across its files) is
not its files' order.  :func:`fits` says whether a run can be merged whole with no bound
deciding anything; where it cannot, the engine merges its files' own models one by one,
as ``--jobs 1`` does.
"""
from __future__ import annotations

from array import array
from collections.abc import Container, Iterable
from typing import Any

from .job import (
    HOP_KIND_MASK,
    KEEP_PER_KIND,
    MAX_COMMS,
    MAX_HOPS,
    MAX_PROCESSES,
    MAX_RANKS,
    PLACED_KINDS,
    STEP_SAMPLES,
    Comm,
    JobModel,
    Process,
    shared_env,
    track_places,
)
from .places import own_place


def merge(into: JobModel, other: JobModel) -> None:
    """Fold a per-file model into the job model (files merged in input order).

    The result does not depend on how files were grouped into workers: every file is
    parsed into its own model and merged in the same order, with ``--jobs 1`` too.
    """
    known = into._source_index
    for s in other.sources:
        if s not in known:
            known[s] = len(into.sources)
            into.sources.append(s)
    into.lines += other.lines
    into.kind_counts.update(other.kind_counts)
    into.folded.update(other.folded)
    unkept: set[int] = set()  # ids of placed kinds' events past the bound (Process/RankState.keep_places)
    ranks_unkept = False
    for kind, evs in other.events.items():
        bucket = into.events.setdefault(kind, [])
        room = KEEP_PER_KIND - len(bucket)
        bucket.extend(evs[:max(room, 0)])
        if len(evs) > room:
            into.folded[kind] += len(evs) - max(room, 0)
            if kind in PLACED_KINDS:
                unkept.update(map(id, evs[max(room, 0):]))
                ranks_unkept = ranks_unkept or kind in ("init_timings", "comm_init")
    into.untracked.update(other.untracked)
    into.set_init_aside(other.init_aside)
    if ranks_unkept:
        for c in other.comms.values():
            for st in c.ranks.values():
                st.keep_places(unkept)
    for key, p in other.processes.items():
        if unkept and p.said:
            p.keep_places(unkept)
        mine = into.processes.get(key)
        if mine is not None:
            _merge_process(mine, p)
        elif into._room("processes", len(into.processes), MAX_PROCESSES):
            if type(p.env) is dict:  # a worker's: its settings shared here too
                p.env = shared_env(p.env)
            into.processes[key] = p
    for comm_key, c in other.comms.items():
        mine_c = into.comms.get(comm_key)
        if mine_c is None:
            if not into._room("communicators", len(into.comms), MAX_COMMS):
                into.set_init_aside(w for st in c.ranks.values() for w in st.init_wheres())
                continue
            if into.n_ranks + len(c.ranks) <= MAX_RANKS and into.n_hops + len(c.hops) <= MAX_HOPS:
                into.comms[comm_key] = c  # the usual case: taken whole
                into.n_ranks += len(c.ranks)
                into.n_hops += len(c.hops)
                for ch, order in c.rings.items():  # one tuple per distinct order across the files too
                    c.rings[ch] = into.shared_order(order)
                continue
            mine_c = into.comms[comm_key] = Comm(comm_key)
        _merge_comm(into, mine_c, c)
    for t in other.tracks.values():
        track_places(t)
    into.tracks.update(other.tracks)  # keyed by (rank, file): a file's tracks are its own
    into.versions_unattached.extend(other.versions_unattached[: max(KEEP_PER_KIND - len(into.versions_unattached), 0)])
    into.failure_blocks.extend(other.failure_blocks[: max(KEEP_PER_KIND - len(into.failure_blocks), 0)])
    room = KEEP_PER_KIND - len(into.nccltests_rows)
    into.nccltests_rows.extend(other.nccltests_rows[:max(room, 0)])
    for step_key, times in other.step_times.items():
        if step_key not in into.step_times and not into._room("ranks", len(into.step_times), MAX_RANKS):
            continue
        mine_t = into.step_times.get(step_key)
        if mine_t is None:
            mine_t = into.step_times[step_key] = array("d")
        mine_t.extend(times[: max(STEP_SAMPLES - len(mine_t), 0)])
        if step_key not in into.step_evidence:
            into.step_evidence[step_key] = own_place(step_key, other.step_evidence[step_key])  # type: ignore[assignment]
    if other.flight is not None:  # Flight Recorder dumps: folded here, per (group, seq)
        from .flight import absorb

        into.flight = absorb(into.flight, other.flight)


def fits(into: JobModel, other: JobModel) -> bool:
    """Whether merging ``other`` (a run of files merged into one model) into ``into`` makes no
    bound decision, so that it equals merging the run's per-file models one by one.

    False where the run itself met a bound (its ``untracked``: it may have dropped what the
    job model still has room for), or where the processes, communicators, rank states,
    hops or step-time keys it would add do not all fit.  Counted exactly only near a bound.
    """
    if other.untracked:
        return False
    for mine, theirs, bound in ((into.processes, other.processes, MAX_PROCESSES),
                                (into.step_times, other.step_times, MAX_RANKS), (into.comms, other.comms, MAX_COMMS)):
        if len(mine) + len(theirs) > bound and len(mine) + _new(mine, theirs) > bound:
            return False
    ranks = sum(len(c.ranks) for c in other.comms.values())
    hops = sum(len(c.hops) for c in other.comms.values())
    if into.n_ranks + ranks > MAX_RANKS or into.n_hops + hops > MAX_HOPS:  # near a bound: only what is new
        for key, c in other.comms.items():
            mine_c = into.comms.get(key)
            if mine_c is not None:
                ranks -= len(c.ranks) - _new(mine_c.ranks, c.ranks)
                hops -= len(c.hops) - _new(mine_c.hops, c.hops)
    return into.n_ranks + ranks <= MAX_RANKS and into.n_hops + hops <= MAX_HOPS


def _new(mine: Container[Any], theirs: Iterable[Any]) -> int:
    """How many of ``theirs`` are not in ``mine``."""
    return sum(k not in mine for k in theirs)


def _merge_process(a: Process, b: Process) -> None:
    for name in ("nccl_version", "cuda_version", "network", "launcher_rank", "first_error"):
        if getattr(a, name) is None:
            setattr(a, name, getattr(b, name))
    for name in ("bootstrap", "socket_ifaces", "ib_devices"):
        if not getattr(a, name):
            setattr(a, name, getattr(b, name))
    a.ib_none = a.ib_none or b.ib_none
    a.ibverbs_missing = a.ibverbs_missing or b.ibverbs_missing
    if b.env:
        a.set_env([(k, v) for k, v in b.env.items() if k not in a.env])
    a.plugins += tuple(x for x in b.plugins if x not in a.plugins)
    for comm, rank in b.comm_pairs():
        a.add_comm_rank(comm, rank)
    a.gdr_conns += b.gdr_conns
    a.net_conns += b.net_conns
    a.errors += b.errors
    a.last_line, a.last_kind = b.last_line, b.last_kind
    if b.said:
        mine = a.own_said()
        for k, v in b.said.items():
            if k not in mine:  # a place is of its process's file: another file's line is its event
                mine[k] = v if type(v) is not int or a.source == b.source else b.evidence[k]


def _merge_comm(into: JobModel, a: Comm, b: Comm) -> None:
    a.nranks = a.nranks or b.nranks
    for r, st in b.ranks.items():
        mine = a.ranks.get(r)
        if mine is None:
            if into._room("ranks", into.n_ranks, MAX_RANKS):
                a.ranks[r] = st
                into.n_ranks += 1
            else:
                into.set_init_aside(st.init_wheres())
            continue
        wheres = st.init_wheres()  # those of its lines ``mine`` does not keep are set aside below
        for name in ("nranks", "host", "pid", "cuda_dev", "bus_id", "complete", "local_rank", "nnodes"):
            if getattr(mine, name) is None:
                setattr(mine, name, getattr(st, name))
        if mine.began is None and st.began is not None:  # a placed start is of its state's process
            began = st.began if type(st.began) is not int or (mine.host, mine.pid) == (st.host, st.pid) else st.start
            mine.began, mine.source, mine.start_phase, mine.start_ts = began, st.source, st.start_phase, st.start_ts
        if mine.timed is None and st.timed is not None:  # a place is read in its start's file
            same = type(st.timed) is not int or mine.source == st.source
            mine.timed = st.timed if same else st.timings
            mine.init_total, mine.init_phases = st.init_total, st.init_phases
        if wheres:
            kept = mine.init_wheres()
            into.set_init_aside(w for w in wheres if w not in kept)
    for ch, order in b.rings.items():
        if ch not in a.rings:
            a.rings[ch] = into.shared_order(order)
    a.ring_truncated = a.ring_truncated or b.ring_truncated
    for ch, pairs in b.trees.items():
        mine_t = a.trees.get(ch)
        if mine_t is None:
            a.trees[ch] = array("q", pairs)
        else:
            mine_t.extend(pairs)
    kinds = [a.hop_kind(*k) for k in b.hop_kinds]  # b's kind indexes -> a's
    for hop, val in b.hops.items():
        lines = val & ~HOP_KIND_MASK
        mine_h = a.hops.get(hop)
        if mine_h is None:
            kind = kinds[val & HOP_KIND_MASK]
            if kind is not None and into._room("hops", into.n_hops, MAX_HOPS):
                a.hops[hop] = lines | kind
                into.n_hops += 1
        else:
            a.hops[hop] = mine_h + lines
    a.transports.update(b.transports)
    a.graph_event = a.graph_event or b.graph_event
