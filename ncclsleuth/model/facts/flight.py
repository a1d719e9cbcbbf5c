"""Facts from Flight Recorder dumps: who stopped where, who called something else.

The dumps say *who and where* (per group and sequence id: which ranks issued which
collective, with which sizes, and from which line of Python); the logs say *why*.
Every fact here reasons over the folded tables of :mod:`ncclsleuth.model.flight`, quotes
the dump entries as evidence (file = the dump, line = the entry's position) and says what
the logs add: a record's ``source`` names the dumps it used, ``logs`` whether the logs
agree, disagree or are silent, and the log lines it compared with join the evidence.

Unlike ``torchfrtrace`` (FLIGHT_RECORDER.md §3-4), nothing here takes the first rank as
the reference: at a sequence number the majority's signature is the expected one and the
minority is named; a rank absent from a collective the others wait in is followed to
where it stands (another collective: a messenger; nothing: the culprit); a missing dump
is a finding, not a reason to stop.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ... import events as E
from ...events.flight import FrOp
from ...util.classes import dataclass
from ..job import JobModel
from ..members import rank_hosts
from .base import TEXT_MOST, Record, fact, ranges

if TYPE_CHECKING:  # the tables come with the model (``model.flight``): a start without dumps never imports them
    from ..flight import FlightRecords, RankBits, Row

#: ops whose sizes legitimately differ across ranks (uneven splits, a root's buffer)
_UNEVEN = frozenset({"all_to_all", "all_to_allv", "alltoall", "alltoall_base", "scatter", "gather", "coalesced",
                     "ALLGATHER_coalesced", "REDUCE_SCATTER_coalesced"})
#: records before the first divergence for the program-order check to be trusted
_ORDER_PREFIX = 2


class FrMismatch(Record):
    kind: str  # op | size | dtype
    pg: str
    seq: int
    op: str  # what the majority called
    culprit_op: str
    rank: int
    ranks: list[int]
    culprits: str
    majority: str
    host: str
    detail: str
    where: str
    others_where: str
    source: str
    logs: str


class FrMissing(Record):
    pg: str
    seq: int
    op: str
    rank: int
    ranks: list[int]
    culprits: str
    waiting: str
    host: str
    stands: str
    chain: str
    where: str
    source: str
    logs: str
    #: collective_timeout where the culprit was in no collective when it dumped (busy past the
    #: others' timeout: a checkpoint, data loading, a hang in Python), else collective_desync
    category: str


class FrHang(Record):
    pg: str
    seq: int
    op: str
    ranks: list[int]
    members: str
    state: str
    detail: str
    where: str
    source: str
    logs: str


class FrNoDump(Record):
    rank: int
    ranks: list[int]
    culprits: str
    host: str
    expected: int
    dumps: int
    others: str
    suspect: bool
    context: str
    source: str
    logs: str


class FrQuiet(Record):
    ranks: list[int]
    who: str
    detail: str
    notes: str
    source: str


class FrNotes(Record):
    dumps: int
    ranks: str
    versions: str
    notes: str
    mixed: bool
    torchfrtrace: str


# ---------------------------------------------------------------------- the analysis


@dataclass
class _Analysis:
    """What the Flight Recorder dumps of a model say, worked out once for every fact that reads them."""

    fl: FlightRecords
    hosts: dict[int, str]
    expected: set[int]
    no_dump: list[int]
    mismatches: list[FrMismatch] = field(default_factory=list)
    missing: list[FrMissing] = field(default_factory=list)
    hangs: list[FrHang] = field(default_factory=list)
    #: (group, seq) rows already explained by a mismatch: no hang or missing-rank record for them
    explained: set[tuple[str, int]] = field(default_factory=set)


_MEMO: dict[int, tuple[JobModel, FlightRecords, _Analysis]] = {}


def _analysis(model: JobModel) -> _Analysis | None:
    """The dumps' analysis, once per model (every FR fact reads it)."""
    fl = model.flight
    if fl is None:
        return None
    fl.fold()
    if not fl.ranks:
        return None
    hit = _MEMO.get(id(model))
    if hit is not None and hit[0] is model and hit[1] is fl:
        return hit[2]
    a = _analyse(model, fl)
    _MEMO.clear()  # one model at a time: never keep an old job alive
    _MEMO[id(model)] = (model, fl, a)
    return a


def expected_world(model: JobModel) -> int | None:
    """How many ranks the dumps say the job had (those that dumped, the gaps below the
    highest, the failed ranks the launcher names): the job summary's rank count when no
    NCCL or launcher line gives one."""
    a = _analysis(model)
    return len(a.expected) if a is not None else None


def _analyse(model: JobModel, fl: FlightRecords) -> _Analysis:
    hosts = rank_hosts(model)
    expected = _expected_ranks(model, fl)
    a = _Analysis(fl, hosts, expected, sorted(expected - set(fl.ranks)))
    by_pg: dict[str, list[tuple[int, Row]]] = {}
    for (pg, seq), row in fl.rows.items():
        by_pg.setdefault(pg, []).append((seq, row))
    for pg in sorted(by_pg):
        rows = sorted(by_pg[pg], key=lambda t: t[0])
        _mismatch(model, a, pg, rows)
    for pg in sorted(by_pg):
        rows = sorted(by_pg[pg], key=lambda t: t[0])
        _waits(model, a, pg, rows)
    return a


def _expected_ranks(model: JobModel, fl: FlightRecords) -> set[int]:
    """The ranks that should have dumped: every group's listed members, the gaps below the
    highest rank that dumped, and the ranks the launcher reports as failed."""
    out: set[int] = set(fl.ranks)
    for pg in fl.groups():
        for v in fl.ranks.values():
            out.update(r for r in v.config.get(pg, ()) if 0 <= r < 1 << 20)
    top = max(out) if out else -1
    out.update(range(top + 1))
    for r in _failed_ranks(model):
        out.add(r)
    return out


def _failed_ranks(model: JobModel) -> dict[int, str]:
    """rank -> its exit code as torchrun's failure block reports it (``-9 (SIGKILL)``)."""
    out: dict[int, str] = {}
    for b in model.failure_blocks:
        f = b["fields"]
        if "rank" not in f or "exitcode" not in f:
            continue
        try:
            rank = int(f["rank"][0].split()[0])
        except (ValueError, IndexError):
            continue
        value = f["exitcode"][0]
        sig = _signal(value)
        out.setdefault(rank, value.split("(pid")[0].strip() + (f" ({sig})" if sig else ""))
    return out


# ---------------------------------------------------------------------- mismatches


def _mismatch(model: JobModel, a: _Analysis, pg: str, rows: list[tuple[int, Row]]) -> None:
    """The earliest sequence number of a group at which ranks recorded different
    collectives: what comes after is a consequence of it."""
    for seq, row in rows:
        if len(row.sigs) < 2:
            continue
        if sum(len(b) for b in row.sigs.values()) != len(row.ranks()):
            continue  # a rank with several entries at one seq: a coalesced group, not comparable one to one
        groups = sorted(row.sigs.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
        major_sig, major = groups[0]
        minority = groups[1:]
        kind = _kind(major_sig, [s for s, _ in minority])
        if kind is None:
            continue
        culprit_sig, culprit_bits = minority[0]  # on a tie, the side without the lowest rank
        culprit_ranks = sorted(r for _, bits in minority for r in bits)
        r0, op0 = row.ex[culprit_sig]
        m0, mop = row.ex[major_sig]
        tie = len(major) == len(culprit_bits) and len(groups) == 2
        detail = f"{_sig_text(culprit_sig)} on {_who(culprit_ranks)} vs {_sig_text(major_sig)} on {_who(major)}"
        logs, log_evs = _logs_agree(model, r0, op0, list(major), mop)
        rec: FrMismatch = {
            "kind": kind, "pg": a.fl.label(pg), "seq": seq, "op": mop.op, "culprit_op": op0.op, "rank": r0,
            "ranks": culprit_ranks, "culprits": _who(culprit_ranks), "majority": _who(major),
            "host": a.hosts.get(r0, "?"), "detail": detail + (" (a tie: no majority to tell which side is wrong)"
                                                               if tie else ""),
            "where": _where(op0), "others_where": _where(mop), "source": _source(a.fl),
            "logs": logs,
            "evidence": [_entry_ev(a.fl, r0, op0), _entry_ev(a.fl, m0, mop)] + log_evs}
        a.mismatches.append(rec)
        a.explained.add((pg, seq))
        return


def _kind(major: tuple[Any, ...], others: list[tuple[Any, ...]]) -> str | None:
    """op, size or dtype: how the minority's signatures differ from the majority's
    (None when the op allows different sizes and only sizes differ)."""
    op = major[0]
    if any(s[0] != op for s in others):
        return "op"
    if op in _UNEVEN:
        return None
    if any(s[1:3] != major[1:3] for s in others):
        return "size"
    if any(s[3:] != major[3:] for s in others):
        return "dtype"
    return None


# ---------------------------------------------------------------------- waits


def _waits(model: JobModel, a: _Analysis, pg: str, rows: list[tuple[int, Row]]) -> None:
    """The earliest collective of a group that some rank still waits in: who never
    issued it (missing ranks, followed to where they stand), or, when every member did,
    a hang inside the collective itself."""
    fl = a.fl
    members = fl.members(pg)
    if len(members) < 2:
        return
    for seq, row in rows:
        recorded = row.ranks()
        pending = [r for r in recorded if r not in row.done]
        if not pending or (pg, seq) in a.explained:
            continue
        absent = [r for r in members if r not in recorded and _reached_window(fl, r, pg, seq)]
        with_dump = [r for r in absent if r in fl.ranks]
        if with_dump:
            _missing(model, a, pg, seq, row, recorded, with_dump)
        elif not absent and len(row.sigs) == 1:
            _hang(model, a, pg, seq, row, recorded)
        a.explained.add((pg, seq))
        return


def _reached_window(fl: FlightRecords, r: int, pg: str, seq: int) -> bool:
    """Whether rank r's dump could show (pg, seq): its ring still holds that far back."""
    v = fl.ranks.get(r)
    if v is None:
        return True
    g = v.groups.get(pg)
    return g is None or g.first_seq <= seq


def _missing(model: JobModel, a: _Analysis, pg: str, seq: int, row: Row, recorded: RankBits,
             absent: list[int]) -> None:
    fl = a.fl
    links, culprits, missing_from = _follow(fl, pg, seq, row, absent)
    culprits = culprits or absent
    c0 = culprits[0]
    mpg, mseq = missing_from.get(c0, (pg, seq))
    mrow = fl.rows.get((mpg, mseq), row)
    sig = next(iter(mrow.sigs))
    r_ex, op_ex = mrow.ex[sig]
    waiting = mrow.ranks()
    v = fl.ranks[c0]
    logs, log_evs = _logs_agree(model, c0, v.pending, list(waiting), op_ex)
    ev: list[E.Event] = [_last_ev(fl, c0), _entry_ev(fl, r_ex, op_ex)]
    for r, _ in links:
        p = fl.ranks[r].pending
        if r != c0 and p is not None and r != r_ex:
            ev.append(_entry_ev(fl, r, p))
    for r, _ in links:  # the collectives of the chain are explained by this record
        p = fl.ranks[r].pending
        if p is not None:
            a.explained.add((p.pg, p.seq))
    rec: FrMissing = {
        "pg": fl.label(mpg), "seq": mseq, "op": op_ex.op, "rank": c0, "ranks": culprits, "culprits": _who(culprits),
        "waiting": _who(waiting), "host": a.hosts.get(c0, "?"), "stands": _stands(fl, c0),
        "chain": "; ".join(text for _, text in links) or "-", "where": _where(v.pending or v.last),
        "source": _source(fl), "logs": logs,
        "category": "collective_timeout" if v.pending is None and v.last is not None else "collective_desync",
        "evidence": ev + log_evs}
    a.missing.append(rec)


def _follow(fl: FlightRecords, pg: str, seq: int, row: Row, absent: list[int]
            ) -> tuple[list[tuple[int, str]], list[int], dict[int, tuple[str, int]]]:
    """Follow the ranks a collective waits for to where they stand.

    A rank blocked in another collective is a messenger: follow whom that one waits for.
    The chain ends at ranks in no collective (the culprits) or comes back on itself (ranks
    waiting for each other): then the rank whose N-th op differs from what the others
    issued as their N-th op (program order, across groups) is the culprit.  Returns the
    links (rank, what it does, in words), the culprits, and for each rank met the
    collective it is missing from."""
    recorded = row.ranks()
    first = sorted(r for r in recorded if r not in row.done)
    links: list[tuple[int, str]] = [(first[0] if first else absent[0],
                                     f"{_who(recorded)} wait in {fl.label(pg)} #{seq} for {_who(absent)}")]
    missing_from = {r: (pg, seq) for r in absent}
    seen: set[int] = set()
    todo = list(absent)
    culprits: list[int] = []
    cycle = False
    while todo:
        r = todo.pop(0)
        if r in seen:
            continue
        seen.add(r)
        p = fl.ranks[r].pending
        prow = fl.rows.get((p.pg, p.seq)) if p is not None else None
        if p is None or prow is None:
            culprits.append(r)
            continue
        got = prow.ranks()
        waits_for = [m for m in fl.members(p.pg) if m not in got and _reached_window(fl, m, p.pg, p.seq)]
        back = [m for m in waits_for if m in seen or m in missing_from]
        links.append((r, f"rank {r} itself waits in {fl.label(p.pg)} #{p.seq} ({p.op})"
                         + (f" for {_who(waits_for)}" if waits_for else "")
                         + (": a cycle, the ranks wait for each other" if back or (p.pg, p.seq) == (pg, seq) else "")))
        cycle = cycle or bool(back) or (p.pg, p.seq) == (pg, seq)
        for m in waits_for:
            missing_from.setdefault(m, (p.pg, p.seq))
            if m in fl.ranks and m not in seen:
                todo.append(m)
    if not culprits and cycle:
        odd = _program_order(fl, seen)
        if odd is not None:
            culprits = odd[1]
            links.append((culprits[0], odd[2]))
    return links, sorted(culprits), missing_from


def _program_order(fl: FlightRecords, among: set[int]) -> tuple[int, list[int], str] | None:
    """The first record id (the N-th op each process issued) at which some of ``among``
    issued something else than every other rank did, after agreeing on the ones before."""
    agreed = 0
    for rid in sorted(fl.order):
        sigs = fl.order[rid]
        if len(sigs) == 1:
            agreed += 1
            continue
        groups = sorted(sigs.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
        major_sig, major = groups[0]
        odd = sorted(r for _, bits in groups[1:] for r in bits)
        if agreed < _ORDER_PREFIX or len(odd) >= len(major) or not set(odd) & among:
            return None
        return rid, odd, (f"at its op #{rid + 1} (record_id {rid}) {_who(odd)} issued "
                          f"{_sig_text(groups[1][0])} where {_who(major)} issued {_sig_text(major_sig)}: "
                          "it left out or reordered a collective, so the ranks wait for each other")
    return None


def _stands(fl: FlightRecords, r: int) -> str:
    """Where a rank that never issued the collective stands, in words."""
    v = fl.ranks[r]
    if v.pending is not None:
        p = v.pending
        return f"it waits in {fl.label(p.pg)} #{p.seq} ({p.op}) at {_where(p)}"
    if v.last is None:
        return "its dump holds no collective"
    last = v.last
    return (f"its last entry is {fl.label(last.pg)} #{last.seq} ({last.op}, completed) at {_where(last)}: "
            "it was in no collective when it dumped (busy outside torch.distributed: compute, data loading, "
            "a checkpoint, a hang in Python)")


def _hang(model: JobModel, a: _Analysis, pg: str, seq: int, row: Row, recorded: RankBits) -> None:
    fl = a.fl
    (sig, _), = list(row.sigs.items())[:1]
    r_ex, op_ex = row.ex[sig]
    started = len(row.started)
    done = [r for r in recorded if r in row.done]
    waiting = [r for r in recorded if r not in row.done]
    state = ("started on every rank (timing on), completed on none" if started == len(recorded) and not done else
             f"completed on {_who(done)}, not on {_who(waiting)}" if done else
             f"{'started' if started else 'scheduled'} on every rank, completed on none")
    logs, log_evs = _logs_agree(model, waiting[0], fl.ranks[waiting[0]].pending if waiting[0] in fl.ranks else None,
                                [], op_ex)
    rec: FrHang = {"pg": fl.label(pg), "seq": seq, "op": op_ex.op, "ranks": sorted(recorded),
                   "members": _who(recorded), "state": state, "detail": _sig_text(sig), "where": _where(op_ex),
                   "source": _source(fl), "logs": logs,
                   "evidence": [_entry_ev(fl, r, fl.ranks[r].groups[pg].pending or op_ex)
                                for r in waiting[:2] if r in fl.ranks and pg in fl.ranks[r].groups] + log_evs}
    a.hangs.append(rec)


# ---------------------------------------------------------------------- missing dumps


def _no_dump(model: JobModel, a: _Analysis) -> list[FrNoDump]:
    fl = a.fl
    if not a.no_dump:
        return []
    missing = a.no_dump
    failed = _failed_ranks(model)
    suspect = len(missing) <= max(1, len(a.expected) // 4)
    others, ev = _what_others_say(fl, missing)
    said: list[str] = []
    log_evs: list[E.Event] = []
    for r in missing[:8]:
        agent = _agent_failures(model, r)
        log_evs.extend(agent)
        code = failed.get(r)
        if code is None and agent:
            code = str(getattr(agent[0], "exitcode", "?"))
        if code is not None:
            said.append(f"the launcher reports rank {r} exited with {code}")
        calls = _sync_calls(model).get(r)
        if calls:
            said.append(f"rank {r}'s own traceback stops in {getattr(calls[-1], 'call', '?')}")
            log_evs.append(calls[-1])
    logs = ("The logs agree: " + "; ".join(said)) if said else (
        "The logs say nothing about " + _who(missing) if _has_logs(model) else "No logs among the inputs")
    context = ("Nothing else in the dumps points elsewhere: no mismatch and no other rank missing from a "
               "collective.")
    if a.mismatches:
        m = a.mismatches[0]
        context = (f"The dumps also show a {m['kind']} mismatch at {m['pg']} #{m['seq']} ({m['culprits']}): a rank "
                   "that dies inside that collective (gloo aborts on a size mismatch) writes no dump.")
    r0 = missing[0]
    return [{"rank": r0, "ranks": missing, "culprits": _who(missing), "host": a.hosts.get(r0, "?"),
             "expected": len(a.expected), "dumps": len(fl.ranks), "others": others, "suspect": suspect,
             "context": context, "source": _source(fl), "logs": logs, "evidence": ev + log_evs}]


def _what_others_say(fl: FlightRecords, missing: list[int]) -> tuple[str, list[E.Event]]:
    """Where the ranks that dumped stand, grouped by collective: the one they wait in
    (which the missing ranks would have had to join), or their last completed one."""
    stand: dict[tuple[str, int, str], list[int]] = {}
    for r, v in sorted(fl.ranks.items()):
        at = v.pending or v.last
        if at is not None:
            stand.setdefault((at.pg, at.seq, at.op), []).append(r)
    parts: list[str] = []
    ev: list[E.Event] = []
    for (pg, seq, op), ranks in sorted(stand.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:4]:
        row = fl.rows.get((pg, seq))
        ended = [r for r in ranks if row is not None and r in row.done]
        waiting = [r for r in ranks if r not in ended]
        how = []
        if ended:
            how.append(f"ended on {_who(ended)} (retired: done or failed)")
        if waiting:
            how.append(f"still pending on {_who(waiting)}")
        parts.append(f"{_who(ranks)} reached {op} #{seq} of {fl.label(pg)}: it {' and is '.join(how)}")
        for r in (waiting[:1] + ended[:1]):
            v = fl.ranks[r]
            e_op = v.pending or v.last
            if e_op is not None:
                ev.append(_entry_ev(fl, r, e_op))
    return "; ".join(parts) or "the other dumps hold no collective", ev


def _signal(value: str) -> str | None:
    """``SIGKILL`` of an exit code text ``-9 (pid: 29291)  (SIGKILL)``."""
    i = value.find("(SIG")
    j = value.find(")", i)
    return value[i + 1:j] if i >= 0 and j > i else None


def _agent_failures(model: JobModel, rank: int) -> list[E.Event]:
    """The elastic agent's ``failed (exitcode: N) local_rank: R`` lines for a rank (local
    rank = global rank only on one node: used when every process ran on one host)."""
    if len({p.host for p in model.processes.values() if p.host}) > 1:
        return []
    return [e for e in model.events.get("agent_failure", ()) if getattr(e, "local_rank", None) == rank][:1]


# ---------------------------------------------------------------------- logs


def _logs_agree(model: JobModel, rank: int, op: FrOp | None, others: list[int], others_op: FrOp | None
                ) -> tuple[str, list[E.Event]]:
    """What the logs say about a rank the dumps single out, compared with the dumps:
    where its traceback stops (the collective it was in), and the others'."""
    calls = _sync_calls(model)
    said: list[str] = []
    agree: list[bool] = []
    evs: list[E.Event] = []
    mine = calls.get(rank)
    if mine:
        e = mine[-1]
        call = getattr(e, "call", "")
        evs.append(e)
        if op is not None:
            ok = _same_call(call, op.op)
            agree.append(ok)
            said.append(f"rank {rank}'s traceback stops in {call} ({os.path.basename(e.source)}:{e.line})"
                        + ("" if ok else f", not in {op.op}"))
        else:
            said.append(f"rank {rank}'s traceback stops in {call} ({os.path.basename(e.source)}:{e.line}), "
                        "after the others' timeouts")
    if others and others_op is not None:
        seen = {r: getattr(calls[r][-1], "call", "") for r in others if r != rank and calls.get(r)}
        if seen:
            ok = all(_same_call(c, others_op.op) for c in seen.values())
            agree.append(ok)
            said.append(f"{_who(sorted(seen))}'s stop in {', '.join(sorted(set(seen.values())))}")
            evs.extend(calls[r][-1] for r in sorted(seen)[:2])
    laggard = _log_laggards(model)
    if laggard:
        ok = rank in laggard
        agree.append(ok)
        said.append(f"their collective counters name {_who(sorted(laggard))} as behind")
    if not said:
        if not _has_logs(model):
            return "no logs among the inputs (add the ranks' logs: they say why)", []
        return "the logs say nothing about it (no traceback or counter of these ranks)", []
    verdict = "the logs agree" if all(agree) else "the logs disagree" if not any(agree) else "the logs partly agree"
    return f"{verdict}: {'; '.join(said)}", evs


def _has_logs(model: JobModel) -> bool:
    """Whether any input besides the dumps was read."""
    fl = model.flight
    dumps = {v.source for v in fl.ranks.values()} | {d[2] for d in fl.duplicates} if fl is not None else set()
    return any(s not in dumps for s in model.sources)


def _sync_calls(model: JobModel) -> dict[int, list[E.Event]]:
    out: dict[int, list[E.Event]] = {}
    for e in model.events.get("sync_call", ()):
        if e.rank is not None:
            out.setdefault(e.rank, []).append(e)
    return out


def _same_call(call: str, op: str) -> bool:
    a, b = call.lower().replace("_", ""), op.lower().replace("_", "")
    return a == b or a.startswith(b) or b.startswith(a)


def _log_laggards(model: JobModel) -> set[int]:
    from .collectives import collective_laggard

    return {f["rank"] for f in collective_laggard(model)}


# ---------------------------------------------------------------------- words and evidence


def _who(ranks: Iterable[int]) -> str:
    rs = sorted(ranks)
    if not rs:
        return "no rank"
    return f"rank {rs[0]}" if len(rs) == 1 else f"ranks {ranges(rs, most=TEXT_MOST)}"


def _sig_text(sig: tuple[Any, ...]) -> str:
    op, ins, outs, idt, odt = sig
    size = _sizes(ins) if ins == outs else f"{_sizes(ins)} -> {_sizes(outs)}"
    dt = ",".join(dict.fromkeys(idt + odt))
    return f"{op} {size}" + (f" {dt}" if dt else "")


def _sizes(s: tuple[tuple[int, ...], ...]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, t)) + "]" for t in s[:4]) + (", ..." if len(s) > 4 else "") + "]"


def _where(op: FrOp | None) -> str:
    if op is None:
        return "?"
    f = op.where
    if f is None:
        return "(no stack in this dump)"
    return f"{f.file}:{f.line} in {f.name}"


def _source(fl: FlightRecords) -> str:
    vs = sorted({v.version for v in fl.ranks.values()})
    forms = sorted({v.form for v in fl.ranks.values()})
    return (f"Flight Recorder dumps of {_who(fl.ranks)} (format {', '.join(vs)}, {'/'.join(forms)})")


def _entry_ev(fl: FlightRecords, rank: int, op: FrOp) -> E.FrEntry:
    v = fl.ranks.get(rank)
    src = v.source if v is not None else "?"
    n = v.entries if v is not None else "?"
    st = op.state if op.state == "completed" else f"{op.state}, not completed"
    sizes = _sig_text(op.signature).partition(" ")[2]
    text = (f"rank {rank} entry {op.pos}/{n} (record_id {op.record_id}): {fl.label(op.pg)} #{op.seq} "
            f"{op.backend + ':' if op.backend else ''}{op.op}{' ' + op.peer if op.peer else ''} {sizes} [{st}] "
            f"at {_where(op)}")
    return E.FrEntry(source=src, line=op.pos, text=text, rank=rank, pg=op.pg, seq=op.seq, op=op.op, state=op.state)


def _last_ev(fl: FlightRecords, rank: int) -> E.FrEntry:
    v = fl.ranks[rank]
    op = v.pending or v.last
    if op is None:
        return E.FrEntry(source=v.source, line=0, text=f"rank {rank}: a dump with no collective", rank=rank)
    return _entry_ev(fl, rank, op)


# ---------------------------------------------------------------------- the facts


@fact(FrMismatch)
def fr_mismatch(model: JobModel) -> list[FrMismatch]:
    """Ranks that recorded a different collective (op, sizes or dtypes) at the same
    sequence number of a group, the minority named: the earliest such point per group."""
    a = _analysis(model)
    return list(a.mismatches) if a else []


@fact(FrMissing)
def fr_missing_rank(model: JobModel) -> list[FrMissing]:
    """Ranks that never issued the collective the others of their group wait in, followed
    to where they stand (a messenger stuck elsewhere is followed further)."""
    a = _analysis(model)
    return list(a.missing) if a else []


@fact(FrHang)
def fr_hang(model: JobModel) -> list[FrHang]:
    """A collective every member issued, with the same sizes, that did not complete: the
    ranks agree, the collective itself (network, GPU, NCCL) did not finish."""
    a = _analysis(model)
    return list(a.hangs) if a else []


@fact(FrNoDump)
def fr_no_dump(model: JobModel) -> list[FrNoDump]:
    """Ranks that should have written a dump and did not (killed, crashed, or their dump
    was not copied), with what the others' dumps and the logs say about them."""
    a = _analysis(model)
    return _no_dump(model, a) if a else []


@fact(FrQuiet)
def fr_quiet(model: JobModel) -> list[FrQuiet]:
    """Dumps of every rank in which no collective is in flight: the failure happened
    outside what the recorder saw (before a collective was issued, or outside c10d)."""
    a = _analysis(model)
    if a is None or a.no_dump or a.mismatches or a.missing or a.hangs:
        return []
    fl = a.fl
    if any(v.pending is not None for v in fl.ranks.values()):
        return []
    notes = sorted({n for v in fl.ranks.values() for n in v.notes if "DETAIL" in n})
    last = {v.rank: v.last for v in fl.ranks.values() if v.last is not None}
    detail = "; ".join(f"{_who([r])} last completed {fl.label(op.pg)} #{op.seq} ({op.op})"
                       for r, op in sorted(last.items())[:4])
    ev: list[E.Event] = [_entry_ev(fl, r, op) for r, op in sorted(last.items())[:2]]
    return [{"ranks": sorted(fl.ranks), "who": _who(fl.ranks), "detail": detail or "no entries",
             "notes": "; ".join(notes) or "-", "source": _source(fl), "evidence": ev}]


@fact(FrNotes)
def fr_notes(model: JobModel) -> list[FrNotes]:
    """What the dumps do differently from the documented format (keys torchfrtrace trips
    on, states that never leave 'scheduled', mixed versions), and the ranks dumped twice."""
    fl = model.flight
    if fl is None:
        return []
    fl.fold()
    if not fl.ranks:
        return []
    notes: dict[str, list[int]] = {}
    for r, v in sorted(fl.ranks.items()):
        for n in v.notes:
            notes.setdefault(n, []).append(r)
    versions: dict[str, list[int]] = {}
    for r, v in sorted(fl.ranks.items()):
        versions.setdefault(v.version, []).append(r)
    mixed = len(versions) > 1
    trips = []
    if mixed:
        trips.append("refuses dumps of different versions")
    if any("pg_config is keyed" in n for n in notes):
        trips.append("stops with KeyError on pg_config (rename its key to the group's name to run it)")
    if any("no ranks" in n for n in notes):
        trips.append("cannot tell group membership")
    a = _analysis(model)
    if a is not None and a.no_dump:
        trips.append(f"stops with 'Missing dump files from ranks {{{', '.join(map(str, a.no_dump[:8]))}}}' "
                     "unless given --allow-incomplete-ranks")
    if fl.unranked:
        notes.setdefault(f"{len(fl.unranked)} dump(s) without a rank in the file name, not compared", [])
    text = "; ".join(f"{n} ({_who(rs)})" if rs else n for n, rs in notes.items())
    same = sorted({d[0] for d in fl.duplicates if d[3]})
    later = sorted({d[0] for d in fl.duplicates if not d[3]})
    if same:
        text += ("; " if text else "") + f"{_who(same)} given twice, as pickle and as JSON of the same record " \
                "(the pickle, with frames, is used)"
    if later:
        text += ("; " if text else "") + f"{_who(later)} dumped twice at different times (the later dump is used)"
    if not mixed and not trips and not later and all(n.startswith("no stack frames") for n in notes):
        return []  # nothing a reader could trip over: the JSON form simply has no frames
    vtext = ", ".join(f"{ver} ({_who(rs)})" for ver, rs in sorted(versions.items()))
    return [{"dumps": len(fl.ranks), "ranks": _who(fl.ranks), "versions": vtext,
             "notes": text or "the documented fields, nothing unusual", "mixed": mixed,
             "torchfrtrace": "; ".join(trips) or "-", "evidence": [_dump_ev(fl, r) for r in sorted(fl.ranks)[:1]]}]


def _dump_ev(fl: FlightRecords, rank: int) -> E.FrEntry:
    v = fl.ranks[rank]
    return E.FrEntry(source=v.source, line=0, rank=rank,
                     text=f"rank {rank}: Flight Recorder dump format {v.version} ({v.form}, {v.entries} "
                          f"entr{'y' if v.entries == 1 else 'ies'}"
                          f"{', ' + v.comm_lib if v.comm_lib else ''})")
