"""Live watch of a starting job: follow growing log files and diagnose as lines arrive.

A :class:`Watcher` owns one :class:`~ncclsleuth.model.job.JobModel`, a
:class:`~ncclsleuth.ingest.follow.Follower` (what was appended to each file) and, per
followed file, its own :class:`~ncclsleuth.parse.lines.FileParser` (parsers keep state
across lines: tracebacks, torchrun failure blocks).  Each :meth:`Watcher.poll`:

1. reads what was appended to each followed file (new files in the folders are picked
   up; a rotated file is read from its start as a new stream; a file truncated or
   rewritten in place makes the watcher rebuild the model from what is on disk now);
2. runs the rule pack through :func:`ncclsleuth.api.diagnose` when new lines arrived;
3. runs the live rules (``WATCH001``: ranks silent before finishing NCCL init while others
   did; a fact of the watcher's view of the processes, :mod:`ncclsleuth.model.live`)
   every poll, since silence grows with time;
4. reports what changed since the last poll, by finding id (:attr:`Finding.id`: the rule
   and its subject, stable while the wording changes): ``new`` findings (also to
   ``on_finding``), ``updated`` ones (with the fields that changed) and ``resolved`` ones
   (no longer found), to ``on_event``.  An error whose rule reasons across ranks
   (a fact over lines or ranks, a ``count:``) while lines are still arriving waits for the next run of
   the rules before it is reported: the first DESYNC002 of a job whose timeouts are half
   written may name the wrong rank, and ``--exit-on error`` must not stop on it.

Rules that diagnose an *absence* (a rank that never started or never finished init,
a hang after ring setup) would fire on every job that is merely still starting; they
are held back until no file of the job has grown for ``silence`` seconds.
"""
from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any

from . import api
from . import events as E
from .ingest.follow import MAX_READ_PER_POLL, Followed, Follower, Lines
from .ingest.sources import Notice
from .model.facts import LIVE
from .model.job import JobModel
from .model.live import Key, LiveView, Unit, rank_ranges
from .parse.grammar import ShapeCache
from .parse.lines import FileParser
from .report import Report
from .rules.findings import Finding
from .rules.schema import Rule, facts_of
from .util.classes import dataclass

#: Rules about something that has not happened (yet): reported only once the job is quiet.
ABSENCE_RULES = frozenset({"INIT001", "INIT002", "TOPO002"})
WATCH_RULE = "WATCH001"

# Where a process is, judged by the kind of its last NCCL / PyTorch event.
_PHASE_OF_KIND = {
    "nccl_version": "startup", "env_setting": "startup", "env_deprecated": "startup", "pg_options": "startup",
    "bootstrap_iface": "network setup", "net_plugin": "network setup", "net_ib_devices": "network setup",
    "net_ib_none": "network setup", "ibverbs_missing": "network setup", "net_socket_ifaces": "network setup",
    "net_selected": "network setup", "net_iface_paths": "network setup",
    "bootstrap_timings": "topology", "comm_info": "topology", "nvls": "topology",
    "ring": "graph setup", "trees": "graph setup", "channels_summary": "graph setup",
    "channel_conn": "connection setup", "connected": "connection setup",
    "init_timings": "init finishing", "comm_end": "finished",
    "watchdog_timeout": "collective timeout", "desync_report": "collective timeout", "work_status": "collectives",
    "sync_call": "collectives",
}


def phase_of(ev: E.Event) -> str | None:
    """The init phase a process is in after logging ``ev`` (None: the event says nothing)."""
    if ev.kind == "comm_init":
        ph = getattr(ev, "phase", None)
        return "init complete" if ph == "COMPLETE" else "bootstrap"
    if ev.is_problem and ev.kind not in ("watchdog_timeout", "desync_report"):
        return "error"
    return _PHASE_OF_KIND.get(ev.kind)


def parse_duration(text: str) -> float:
    """``60``, ``60s``, ``1.5m``, ``500ms``, ``1h`` -> seconds."""
    s = str(text).strip().lower()
    for suffix, mult in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):  # noqa: B007 - used after break
        if s.endswith(suffix) and not (suffix == "s" and s.endswith("ms")):
            s = s[: -len(suffix)]
            break
    else:
        mult = 1.0
    try:
        val = float(s) * mult
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 60s, 2m, 500ms)") from None
    if val < 0:
        raise ValueError(f"not a duration: {text!r} (negative)")
    return val


@dataclass
class ProcState:
    """What the watcher knows about one model process beyond the model: when it was last heard of."""

    key: Key
    pseudo: bool  # lines without host/pid (``[rankN]:`` PyTorch lines): keyed by file in the model
    last_wall: float = 0.0
    phase: str = "startup"
    phase_seq: int = 0
    last_event: E.Event | None = None
    last_seq: int = 0


@dataclass
class _FileState:
    """The watcher's own state of one followed file (``Followed.owner``)."""

    parser: FileParser
    stream: int
    procs: set[Key] = field(default_factory=set)


def _state(f: Followed) -> _FileState:
    st: _FileState = f.owner
    return st


def is_live_rule(rule: Rule) -> bool:
    """A rule over the watcher's live view (a fact that only ``watch`` can compute)."""
    return bool(facts_of(rule.match) & LIVE)


#: facts whose records each stand for one line (what the knowledge base says it means):
#: a rule over them does not change its mind as other ranks' lines arrive
PER_LINE_FACTS = frozenset({"known_message"})


def counts_matter(rule: Rule) -> bool:
    """A rule whose finding can change as more ranks' lines arrive: it reasons over a fact
    across lines or ranks (the laggard, the minority configuration) or bounds a count."""
    return bool(facts_of(rule.match) - PER_LINE_FACTS) or _bounds_a_count(rule.match)


def _bounds_a_count(cond: dict[str, Any]) -> bool:
    if "count" in cond:
        return True
    subs = [*cond.get("all", ()), *cond.get("any", ()), *cond.get("none", ())]
    if "not" in cond:
        subs.append(cond["not"])
    return any(_bounds_a_count(c) for c in subs)


#: the fields of a finding whose change is an ``updated`` event
WATCHED_FIELDS = ("severity", "category", "title", "message", "hosts", "ranks", "caused_by", "evidence_total")
_DIGITS = re.compile(r"\d+(?:\.\d+)?")


def changes(old: Finding, new: Finding, volatile_numbers: bool = False) -> dict[str, Any]:
    """Field -> its previous value, for the fields that differ (``volatile_numbers``: the
    numbers in the title and message of a live rule grow every poll: not a change)."""
    out: dict[str, Any] = {}
    for name in WATCHED_FIELDS:
        a, b = getattr(old, name), getattr(new, name)
        if volatile_numbers and name in ("title", "message", "evidence_total"):
            a, b = (_DIGITS.sub("#", x) if isinstance(x, str) else None for x in (a, b))
        if a != b:
            out[name] = getattr(old, name)
    return out


class Watcher:
    """Follows PATHS (files and folders), keeps a JobModel current, reports findings as they appear."""

    def __init__(self, paths: Iterable[str], rules: list[Rule] | None = None, silence: float = 60.0,
                 on_finding: Callable[[Finding], None] | None = None, clock: Callable[[], float] = time.time,
                 max_read: int = MAX_READ_PER_POLL,
                 on_event: Callable[[str, Finding, dict[str, Any]], None] | None = None) -> None:
        if rules is None:
            rules = api.load_rules(api.Options())
        self.paths = list(paths)
        self.rules = [r for r in rules if not is_live_rule(r)]
        self.live_rules = [r for r in rules if is_live_rule(r)]
        self.silence = float(silence)
        self.on_finding = on_finding
        #: ("new" | "updated" | "resolved", finding, {changed field: previous value})
        self.on_event = on_event
        self._wait_rules = {r.id for r in rules if counts_matter(r)}
        self._live_ids = {r.id for r in self.live_rules}
        #: id -> the finding as last reported; id -> (finding, rule runs when it was held back)
        self.emitted: dict[str, Finding] = {}
        self.pending: dict[str, tuple[Finding, int]] = {}
        self.clock = clock
        self.started = clock()
        # with the wall clock, a file's mtime tells when its last line was written
        self.follower = Follower(self.paths, max_read, wall=clock is time.time)
        self.cache = ShapeCache()
        self.model = JobModel()
        self.procs: dict[Key, ProcState] = {}
        self.report: Report | None = None
        self.findings: list[Finding] = []
        self.seen: dict[str, float] = {}  # finding id -> wall time first reported
        self.last_growth: float = self.started
        self.polls = 0
        self.rule_runs = 0
        self.last_poll_s = 0.0
        self.last_rules_s = 0.0
        self._dirty = True
        self._last_rules_at = -1e9
        self._held_back = False
        self._seq = 0

    @property
    def files(self) -> dict[str, Followed]:
        return self.follower.files

    @property
    def notices(self) -> list[Notice]:
        return self.follower.notices

    @property
    def reads(self) -> int:
        """Files read (their size or mtime changed), over all polls."""
        return self.follower.reads

    # ------------------------------------------------------------------ reading
    def _scan(self) -> None:
        self.follower.scan()
        for f in self.follower.new_files:
            f.owner = _FileState(FileParser(f.path, self.cache), f.stream)
            self.model.add_source(f.path)
        self.follower.new_files.clear()

    def _read(self, now: float) -> int:
        """Parse what was appended to the followed files; returns the number of lines read."""
        grown = 0
        for got in self.follower.read_changed(now):
            st = _state(got.file)
            if st.stream != got.file.stream:  # rotated: a new stream under the old name
                st.parser, st.stream = FileParser(got.file.path, self.cache), got.file.stream
            self._parse(got, st)
            grown += got.count
        return grown

    def _parse(self, got: Lines, st: _FileState) -> None:
        parser, f, now = st.parser, got.file, got.now
        for lineno, text in got.lines:
            self._feed(f, parser.parse_line(lineno, text), now)
        if got.whole:
            self._feed(f, parser.finish(), now)
        self.model.lines += got.count

    def _feed(self, f: Followed, events: list[E.Event], now: float) -> None:
        model = self.model
        for ev in events:
            model.add(ev)
            if ev.pid is None and ev.host is None and ev.level is None:
                continue
            key = (ev.host or ev.source, ev.pid)
            ps = self.procs.get(key)
            if ps is None:
                ps = self.procs[key] = ProcState(key, pseudo=ev.host is None)
                _state(f).procs.add(key)
            self._seq += 1
            ps.last_wall, ps.last_event, ps.last_seq = now, ev, self._seq
            ph = phase_of(ev)
            if ph is not None:
                ps.phase, ps.phase_seq = ph, self._seq

    def _reset(self) -> None:
        """Forget everything read (a file was truncated): the next poll re-reads what is on disk."""
        self.model = JobModel()
        self.cache = ShapeCache()
        self.procs = {}
        self.follower.reset()

    # ------------------------------------------------------------------ polling
    def poll(self, force: bool = False) -> list[Finding]:
        """Read what changed, update the findings; returns the findings not reported before.

        The rules run when new lines arrived, at most every 3x their last cost (so a big
        model does not turn polling into rule evaluation); ``force`` runs them regardless.
        """
        t0 = time.perf_counter()
        now = self.clock()
        self.polls += 1
        fol = self.follower
        fol.rebuild_needed, fol.grow_time = False, 0.0
        self._scan()
        grown = self._read(now)
        if fol.rebuild_needed:
            self._reset()
            self._scan()
            fol.rebuild_needed = False
            grown += self._read(now) + 1
        if grown:
            self.last_growth = fol.grow_time or now
            self._dirty = True
        quiet = now - self.last_growth >= self.silence
        if quiet and self._held_back:
            self._dirty = True
        new: list[Finding] = []
        # the rules cost more as the model grows: on a big job run them at most every 3x their cost (<= 1 s)
        if force or (self._dirty and time.perf_counter() - self._last_rules_at >= min(1.0, 3 * self.last_rules_s)):
            self._run_rules(quiet)
        findings = self._merge(self._live_findings(now))
        new = self._report_changes(findings, now, still_arriving=bool(grown))
        self.findings = findings
        self.last_poll_s = time.perf_counter() - t0
        return new

    def _run_rules(self, quiet: bool) -> None:
        t = time.perf_counter()
        report = api.diagnose(self.model, self.rules, [n.to_dict() for n in self.notices])
        self._held_back = any(fd.rule_id in ABSENCE_RULES for fd in report.findings)
        if not quiet:
            report.findings = [fd for fd in report.findings if fd.rule_id not in ABSENCE_RULES]
        self.report = report
        self.rule_runs += 1
        self._dirty = False
        self._last_rules_at = time.perf_counter()
        self.last_rules_s = self._last_rules_at - t

    def _live_findings(self, now: float) -> list[Finding]:
        """The live rules on the processes as seen now (their silence grows every poll)."""
        if not self.live_rules:
            return []
        self.model.live = LiveView(now, self.silence, self.units())
        try:
            return api.evaluate(self.model, self.live_rules)
        finally:
            self.model.live = None

    def _merge(self, live: list[Finding]) -> list[Finding]:
        rule_findings = list(self.report.findings) if self.report else []
        errors = [fd for fd in rule_findings if fd.severity == "error"]
        rest = [fd for fd in rule_findings if fd.severity != "error"]
        return errors + live + rest

    def _report_changes(self, findings: list[Finding], now: float, still_arriving: bool) -> list[Finding]:
        """new / updated / resolved since the last poll, by id; returns the new ones."""
        current: dict[str, Finding] = {}
        for fd in findings:
            current.setdefault(fd.id, fd)
        new: list[Finding] = []
        for fid, fd in current.items():
            old = self.emitted.get(fid)
            if old is not None:
                changed = changes(old, fd, volatile_numbers=fd.rule_id in self._live_ids)
                if changed:
                    self.emitted[fid] = fd
                    self._event("updated", fd, changed)
                continue
            held = self.pending.get(fid)
            if held is None and still_arriving and fd.severity == "error" and fd.rule_id in self._wait_rules:
                self.pending[fid] = (fd, self.rule_runs)  # the next run of the rules says whether it holds
                self._dirty = True
                continue
            if held is not None and held[1] == self.rule_runs:
                self._dirty = True
                continue  # the rules have not run again since
            self.pending.pop(fid, None)
            self.emitted[fid] = fd
            self.seen[fid] = now
            new.append(fd)
            if self.on_finding is not None:
                self.on_finding(fd)
            self._event("new", fd, {})
        for fid in [f for f in self.emitted if f not in current]:
            self._event("resolved", self.emitted.pop(fid), {})
        for fid in [f for f in self.pending if f not in current]:
            del self.pending[fid]
        return new

    def _event(self, kind: str, fd: Finding, changed: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, fd, changed)

    # ------------------------------------------------------------------ the processes as seen live
    def units(self) -> dict[Key, Unit]:
        """The job's processes as the watch sees them, with ranks, last-seen time, phase and init state.

        PyTorch lines tagged ``[rankN]:`` carry no host or pid, so the model keeps them
        apart from the NCCL lines of the same process; in a file that one process writes
        they are merged back into it (and name its global rank).
        """
        procs = self.model.processes
        owner: dict[Key, Key | None] = {}
        alone: dict[Key, float] = {}
        for f in self.files.values():
            fprocs = _state(f).procs
            real = [k for k in fprocs if not self.procs[k].pseudo]
            if len(real) == 1:
                for k in fprocs:
                    owner[k] = real[0]
            elif len(real) > 1:
                for k in fprocs:
                    if self.procs[k].pseudo:
                        owner[k] = None  # rank-tagged lines of a shared stdout: no process of their own
            if f.last_line_wall is not None and len(fprocs) >= 1 and len(real) <= 1:
                tgt = real[0] if real else next(iter(fprocs))
                alone[tgt] = max(alone.get(tgt, 0.0), f.last_line_wall)
        big = max(self.model.comms.values(), key=lambda c: (c.nranks or 0, len(c.ranks)), default=None)
        out: dict[Key, Unit] = {}
        for k, ps in self.procs.items():
            o = owner.get(k, k)
            if o is None:
                continue
            u = out.get(o)
            if u is None:
                host = o[0] if not self.procs[o].pseudo else os.path.basename(o[0])
                u = out[o] = Unit(o, host)
            u.last_wall = max(u.last_wall, ps.last_wall)
            if ps.phase_seq >= u.phase_seq:
                u.phase, u.phase_seq = ps.phase, ps.phase_seq
            if u.last_event is None or ps.last_seq >= u.last_seq:
                u.last_event, u.last_seq = ps.last_event, ps.last_seq
            p = procs.get(k)
            if p is None:
                continue
            if p.launcher_rank is not None and u.launcher is None:
                u.launcher = p.launcher_rank
            if p.comm_ranks:
                u.nccl = True
                if big is not None:
                    u.comm_ranks = sorted(r for ck, r in p.comm_pairs() if ck == big.key) or u.comm_ranks
                u.past_init = u.past_init or any(
                    self.model.comms[ck].ranks[r].done is not None for ck, r in p.comm_pairs()
                    if ck in self.model.comms and r in self.model.comms[ck].ranks)
        for k, t in alone.items():
            if k in out:
                out[k].last_wall = max(out[k].last_wall, t)
        return out

    # ------------------------------------------------------------------ views
    def finish(self) -> None:
        """End of input (``--once``): close what the parsers keep open (a traceback cut off)."""
        now = self.clock()
        for f in self.files.values():
            self._feed(f, _state(f).parser.finish(), now)
        self._dirty = True

    def current_report(self) -> Report:
        """The findings so far as a :class:`Report` (for the analyze renderers)."""
        base = self.report or Report(findings=[], unexplained=[], summary={})
        return Report(findings=list(self.findings), unexplained=base.unexplained, summary=base.summary,
                      notices=[n.to_dict() for n in self.notices], unexplained_total=base.unexplained_total)

    def status(self) -> dict[str, Any]:
        """Plain-builtins state of the job: communicators, hosts, quiet ranks (the live view's data)."""
        now = self.clock()
        units = self.units()
        unit_of_rank: dict[tuple[str, int], Unit] = {}
        for u in units.values():
            p = self.model.processes.get(u.key)
            for ck, r in (p.comm_pairs() if p else ()):
                unit_of_rank[(ck, r)] = u
        comms = []
        for c in sorted(self.model.comms.values(), key=lambda c: (-(c.nranks or 0), c.key)):
            if c.key == "unknown":
                continue
            phases: Counter[str] = Counter()
            for r, st in c.ranks.items():
                if st.done is None:
                    waiting = unit_of_rank.get((c.key, r))
                    phases[waiting.phase if waiting else "?"] += 1
            comms.append({"comm": c.key, "nranks": c.nranks, "seen": len(c.ranks),
                          "complete": sum(1 for st in c.ranks.values() if st.done is not None),
                          "rest_in": dict(phases.most_common())})
        hosts: dict[str, dict[str, Any]] = {}
        for u in units.values():
            d = hosts.setdefault(u.host, {"host": u.host, "processes": 0, "ranks": [], "init_complete": 0,
                                          "last_line_s": None, "quietest_s": 0.0})
            ago = max(0.0, now - u.last_wall)
            d["processes"] += 1
            d["ranks"].extend(u.ranks)
            d["init_complete"] += int(u.past_init)
            d["last_line_s"] = ago if d["last_line_s"] is None else min(d["last_line_s"], ago)
            d["quietest_s"] = max(d["quietest_s"], ago)
        ranks: list[dict[str, Any]] = [{"process": f"{u.key[0]}:{u.key[1]}", "host": u.host,
                                        "ranks": rank_ranges(u.ranks),
                  "silent_s": round(max(0.0, now - u.last_wall), 1), "phase": u.phase, "init_complete": u.past_init}
                 for u in units.values()]
        ranks.sort(key=lambda r: (-r["silent_s"], r["process"]))
        return {"elapsed_s": round(now - self.started, 1), "files": len(self.files), "lines": self.model.lines,
                "processes": len(units), "comms": comms,
                "hosts": sorted(hosts.values(), key=lambda d: (-d["quietest_s"], d["host"])),
                "ranks": ranks, "polls": self.polls, "poll_ms": round(self.last_poll_s * 1000, 1),
                "rules_ms": round(self.last_rules_s * 1000, 1)}

    def renderable(self) -> Any:
        """The rich live view of the job (communicators, hosts, silent ranks, findings)."""
        from .renderers.live import render_status

        return render_status(self.status(), self.findings, self.paths, self.silence)
