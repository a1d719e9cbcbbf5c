"""The job's members: each rank with what its tracks, processes and the launcher say about it.

Built once per model from the per-file results (:mod:`.tracks`, the processes, the
communicators, torchrun's failure blocks), never from event lists across files, so a
16,384-rank job costs one pass over its tracks.

Who a track belongs to: its launcher rank (``[rank5]:``, ``[default5]:``, ``5: ``) where
the lines carry one; otherwise the rank of its file: the one launcher rank the file's other
lines show, the global rank of the file's NCCL process (its rank in the largest
communicator), the file's name (``rank5.log``, torchrun's ``--log-dir``
``attempt_0/<local_rank>/stdout.log`` on a one-node job), or a sibling ``stdout``/
``stderr`` file of the same folder.  Lines of a file that interleaves ranks without a
prefix (the elastic agent's own lines in a console) belong to no rank.

How a worker ended comes from the elastic agent: ``failed (exitcode: -9) local_rank: 2``
and the ``Failures`` / ``Root Cause`` entries (rank, exitcode, signal).
"""
from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any

from .. import events as E
from ..util.classes import dataclass
from ..util.clock import Stamp, stamp
from ..util.rxstore import rx
from .job import JobModel
from .tracks import Track


@dataclass(slots=True)
class Exit:
    """What the elastic agent said about one worker."""

    exitcode: int | None
    signal: str | None  # SIGKILL, SIGABRT, SIGTERM, ...
    root_cause: bool  # named in the "Root Cause (first observed failure)" block
    evidence: list[E.Event] = field(default_factory=list)

    @property
    def torn_down(self) -> bool:
        """Ended by the agent's own SIGTERM after another worker failed (a victim)."""
        return self.exitcode == -15


#: a member's counters before it has any: one mapping for all (read, never written)
_NO_COUNTERS: Mapping[str, tuple[int | None, int | None, E.Event]] = MappingProxyType({})


@dataclass(slots=True)  # one per rank: no dict each
class Member:
    """One rank of the job (or, ``rank`` None, the unattributed lines of one file).

    Built for every rank each time the members are asked for (the rule step), so it holds what its
    tracks say without containers of its own where it can: its files a tuple, its counters its
    track's own mapping until a second track has some (then a merged copy).  Lists and a dict of its
    own were ~300 bytes a rank of the rule step's peak (30 MB at 100,000 ranks)."""

    rank: int | None
    host: str | None = None
    #: its first file, and any others (see :attr:`sources`: a tuple each was 48 bytes a rank)
    source: str | None = None
    more_sources: tuple[str, ...] = ()
    #: the track of its last line (the latest of its tracks' by the time they print, else the last
    #: read), and when it was printed; the track of its last progress line (the furthest step).
    #: The tracks keep those lines' places and what every rank's is read for (time stamp, step,
    #: elapsed seconds): the lines are made for the few ranks a finding quotes (:meth:`last_line`)
    last_of: Track | None = None
    last_t: Stamp | None = None
    progress_of: Track | None = None
    first_problem: E.Event | None = None
    first_t: Stamp | None = None
    last_problem: E.Event | None = None
    problems: int = 0
    traceback: E.Traceback | None = None
    watchdog: E.WatchdogTimeout | None = None
    #: process group -> (last enqueued, last completed, the line): read, never written (shared)
    counters: Mapping[str, tuple[int | None, int | None, E.Event]] = field(default_factory=lambda: _NO_COUNTERS)
    mismatch: E.CollectiveMismatch | None = None
    exit: Exit | None = None
    #: lines of a file that interleaves ranks and carry no rank (not a rank of the job)
    shared: bool = False

    @property
    def step(self) -> int | None:
        """The step its last progress line reached (None: no progress line)."""
        return self.progress_of.step if self.progress_of is not None else None

    @property
    def elapsed_s(self) -> int | None:
        """The seconds its last progress line (a progress bar) says have elapsed."""
        return self.progress_of.elapsed_s if self.progress_of is not None else None

    def last_line(self) -> E.Event | None:
        """The event of its last line (where its output stops)."""
        return self.last_of.last_line() if self.last_of is not None else None

    def progress_line(self) -> E.Progress | None:
        """The event of its last progress line."""
        return self.progress_of.progress_line() if self.progress_of is not None else None

    @property
    def sources(self) -> tuple[str, ...]:
        """The files its lines are in, in the order its tracks were read."""
        return (self.source, *self.more_sources) if self.source is not None else ()

    @property
    def name(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else (self.source or "?")


class _ByRank:
    """rank -> member, found by bisection in the members (those with a rank first, by rank:
    :class:`Members` sorts them): no dict of its own, which was ~50 bytes a rank of the rule step's
    peak, for the few ranks the facts look up."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Member], n: int) -> None:
        self._items = items
        self._n = n  # the members with a rank: the first n

    def get(self, rank: int | None, default: Member | None = None) -> Member | None:
        if rank is None:
            return default
        i = bisect_left(self._items, rank, 0, self._n, key=_rank_of)
        if i < self._n and self._items[i].rank == rank:
            return self._items[i]
        return default

    def __getitem__(self, rank: int) -> Member:
        got = self.get(rank)
        if got is None:
            raise KeyError(rank)
        return got

    def __contains__(self, rank: object) -> bool:
        return isinstance(rank, int) and self.get(rank) is not None

    def __len__(self) -> int:
        return self._n


def _rank_of(m: Member) -> int:
    return m.rank  # type: ignore[return-value]  # bisected among the members with a rank


class Members(list[Member]):
    """The members, those with a rank first by rank, then each file's unattributed lines by file;
    with an index by rank."""

    def __init__(self, items: Iterable[Member]) -> None:
        super().__init__(sorted(items, key=lambda m: (m.rank is None, m.rank if m.rank is not None else 0,
                                                      m.source or "")))
        self.by_rank = _ByRank(self, sum(m.rank is not None for m in self))

    @property
    def ranks(self) -> list[Member]:
        return [m for m in self if m.rank is not None]


def members(model: JobModel) -> Members:
    """The job's members (memoised on the model until it grows)."""
    key = len(model.tracks) * 1_000_003 + len(model.processes) * 1009 + len(model.failure_blocks)
    hit = model.memo.get("members")
    if hit is not None and hit[0] == key:
        return hit[1]  # type: ignore[return-value]
    out = _build(model)
    model.memo["members"] = (key, out)
    return out


# --------------------------------------------------------------------------- who a file belongs to

_NAME_RANK = rx(r"(?:^|[^a-z])(?:rank|proc|worker)[_.-]?(\d+)(?!\d)", re.I)
_LOGDIR = rx(r"attempt_\d+/(\d+)/(?:stdout|stderr|error)\.(?:log|json)$")
_STD = rx(r"(?:stdout|stderr|out|err)(?=\.\w+$|$)")


def _file_ranks(model: JobModel) -> tuple[dict[str, int], set[str]]:
    """File -> its rank, and the files that interleave ranks."""
    seen: dict[str, set[int]] = {}
    for (r, src) in model.tracks:
        s = seen.setdefault(src, set())
        if r is not None:
            s.add(r)
    for p in model.processes.values():
        if p.launcher_rank is not None:
            seen.setdefault(p.source, set()).add(p.launcher_rank)
    multi = {s for s, rs in seen.items() if len(rs) > 1}
    out = {s: next(iter(rs)) for s, rs in seen.items() if len(rs) == 1}
    world = _world_ranks(model)
    for src in seen:
        if src in out or src in multi:
            continue
        r = world.get(src)
        if r is None:
            r = _rank_from_name(src, model)
        if r is not None:
            out[src] = r
    _siblings(seen, out, multi)
    return out, multi


def _world_ranks(model: JobModel) -> dict[str, int]:
    """File -> global rank of its one NCCL process (rank in the largest communicator)."""
    biggest = max(model.comms.values(), key=lambda c: c.nranks or 0, default=None)
    if biggest is None:
        return {}
    per: dict[str, set[int]] = {}
    for r, st in biggest.ranks.items():
        src = st.source if st.began is not None else (at[0] if (at := st.done_at()) is not None else None)
        if src is not None:
            per.setdefault(src, set()).add(r)
    return {s: next(iter(rs)) for s, rs in per.items() if len(rs) == 1}


def _rank_from_name(src: str, model: JobModel) -> int | None:
    m = _LOGDIR.search(src)
    if m is not None:  # torchrun --log-dir: the local rank; the global one on a one-node job
        return int(m.group(1)) if len(model.hosts) <= 1 else None
    m = _NAME_RANK.search(PurePosixPath(src).name)
    return int(m.group(1)) if m is not None else None


def _std_group(src: str, parents: dict[str, str]) -> tuple[str, str]:
    """(folder, name with its ``stdout``/``stderr``/``out``/``err`` word as ``{}``) of a file, as
    ``PurePosixPath`` reads them: the folder's path read once per folder (``parents``), not
    once per file (16,384 per-rank files paid two path objects each, ~0.1 s)."""
    i = src.rfind("/")
    name = src[i + 1:]
    if name in ("", ".", ".."):  # a folder-like name: the path object says what its parts are
        p = PurePosixPath(src)
        return str(p.parent), _STD.sub("{}", p.name)
    head = src[:i + 1]  # with its slash: "/" and "//" stay roots, "" is "."
    parent = parents.get(head)
    if parent is None:
        parent = parents[head] = str(PurePosixPath(head))
    return parent, _STD.sub("{}", name)


def _siblings(seen: dict[str, set[int]], out: dict[str, int], multi: set[str]) -> None:
    """``stdout`` and ``stderr`` files of one folder (and ``x.out`` / ``x.err``) are one process."""
    groups: dict[tuple[str, str], list[str]] = {}
    parents: dict[str, str] = {}
    for src in seen:
        groups.setdefault(_std_group(src, parents), []).append(src)
    for files in groups.values():
        if len(files) < 2:
            continue
        ranks = {out[f] for f in files if f in out}
        if len(ranks) == 1 and not any(f in multi for f in files):
            r = next(iter(ranks))
            for f in files:
                out.setdefault(f, r)


# --------------------------------------------------------------------------- building


def _build(model: JobModel) -> Members:
    file_rank, multi = _file_ranks(model)
    by_key: dict[Any, Member] = {}
    for (r, src), t in model.tracks.items():
        rank = r if r is not None else file_rank.get(src)
        key: Any = rank if rank is not None else ("file", src)
        m = by_key.get(key)
        if m is None:
            m = by_key[key] = Member(rank, shared=rank is None and src in multi)
        _absorb(m, t)
    hosts = rank_hosts(model, file_rank)
    for m in by_key.values():
        if m.rank is not None:
            m.host = hosts.get(m.rank)
    for rank, ex in _exits(model).items():
        m = by_key.get(rank)
        if m is None:  # a worker that printed nothing at all: the agent still knows it
            m = by_key[rank] = Member(rank, host=hosts.get(rank))
        m.exit = ex
    return Members(by_key.values())


def _later(a: Track | None, at: Stamp | None, bt: Stamp | None) -> bool:
    """Whether a last line printed at ``bt`` came after track ``a``'s printed at ``at`` (by the times
    they print, else input order)."""
    if a is None:
        return True
    if at is not None and bt is not None:
        return bt.t >= at.t
    return True


def _absorb(m: Member, t: Track) -> None:
    if m.source is None:
        m.source = t.source
    elif t.source != m.source and t.source not in m.more_sources:
        m.more_sources = (*m.more_sources, t.source)
    if t.last is not None:
        lt = stamp(t.last_ts) if t.last_ts else None
        if _later(m.last_of, m.last_t, lt):
            m.last_of, m.last_t = t, lt
    if t.progress is not None and t.step is not None and (m.progress_of is None or (m.step or -1) < t.step):
        m.progress_of = t
    if t.first_problem is not None:
        if m.first_problem is None or (t.first_t is not None and (m.first_t is None or t.first_t.t < m.first_t.t)):
            m.first_problem, m.first_t = t.first_problem, t.first_t or m.first_t
    m.problems += t.problems
    if t.last_problem is not None:
        m.last_problem = t.last_problem
    if t.traceback is not None and (m.traceback is None or m.traceback.call is None):
        m.traceback = t.traceback
    m.watchdog = m.watchdog or t.watchdog
    m.mismatch = m.mismatch or t.mismatch
    if t.counters:
        m.counters = _counters(m.counters, t.counters)


def _counters(mine: Mapping[str, tuple[int | None, int | None, E.Event]],
              theirs: Mapping[str, tuple[int | None, int | None, E.Event]]
              ) -> Mapping[str, tuple[int | None, int | None, E.Event]]:
    """A member's counters with a track's folded in: per process group the one further on (more
    enqueued).  The track's own mapping where the member has none yet (shared: neither is written
    after the files are read); else a new dict."""
    if not mine:
        return theirs
    out = dict(mine)
    for pg, c in theirs.items():
        cur = out.get(pg)
        if cur is None or (c[0] or -1) > (cur[0] or -1):
            out[pg] = c
    return out


# --------------------------------------------------------------------------- hosts and exits


def rank_hosts(model: JobModel, file_rank: dict[str, int] | None = None) -> dict[int, str]:
    """Global rank -> host, from NCCL comm ranks, launcher prefixes, the hosts of each rank's
    files and torchrun failure blocks."""
    out: dict[int, str] = {}
    biggest = max(model.comms.values(), key=lambda c: c.nranks or 0, default=None)
    if biggest is not None:
        for r, st in biggest.ranks.items():
            if st.host:
                out.setdefault(r, st.host)
    for p in model.processes.values():
        if p.launcher_rank is not None and p.host:
            out.setdefault(p.launcher_rank, p.host)
    if file_rank:
        src_host = model.source_hosts()
        for src, r in file_rank.items():
            h = src_host.get(src)
            if h:
                out.setdefault(r, h)
    for b in model.failure_blocks:
        f = b["fields"]
        if "rank" in f and "host" in f:
            try:
                out.setdefault(int(f["rank"][0].split()[0]), f["host"][0])
            except ValueError:
                pass
    return out


_EXIT = rx(r"(-?\d+)")
_SIG = rx(r"\((SIG[A-Z]+)\)")
_LOCAL = rx(r"local_rank:\s*(\d+)")


def _exits(model: JobModel) -> dict[int, Exit]:
    """Global rank -> how the elastic agent says that worker ended."""
    out: dict[int, Exit] = {}
    by_pid: dict[int, int] = {}
    local_of: dict[int, int] = {}
    for b in model.failure_blocks:
        f, evs = b["fields"], b.get("events", {})
        if "rank" not in f or "exitcode" not in f:
            continue
        try:
            rank = int(f["rank"][0].split()[0])
        except ValueError:
            continue
        code_txt = f["exitcode"][0]
        m = _EXIT.match(code_txt.strip())
        sig = _SIG.search(code_txt)
        pid = re.search(r"pid:\s*(\d+)", code_txt)
        lm = _LOCAL.search(f["rank"][0])
        if pid is not None:
            by_pid[int(pid.group(1))] = rank
        if lm is not None:
            local_of[int(lm.group(1))] = rank
        ex = Exit(int(m.group(1)) if m else None, sig.group(1) if sig else None, b["block"] == "root_cause",
                  [evs[k] for k in ("rank", "exitcode", "traceback") if k in evs])
        if rank not in out or ex.root_cause:
            out[rank] = ex
    one_node = len({b["fields"].get("host", ("",))[0] for b in model.failure_blocks}) <= 1
    for ev in model.events.get("agent_failure", ()):
        assert isinstance(ev, E.AgentFailure)
        who = by_pid.get(ev.child_pid) if ev.child_pid is not None else None
        if who is None and ev.local_rank is not None:
            who = local_of.get(ev.local_rank, ev.local_rank if one_node else None)
        if who is None:
            continue
        known = out.get(who)
        if known is None:
            out[who] = Exit(ev.exitcode, _signal_name(ev.exitcode), False, [ev])
        else:
            known.evidence.insert(0, ev)
    return out


_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
            11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}


def _signal_name(code: int | None) -> str | None:
    return _SIGNALS.get(-code) if code is not None and code < 0 else None
