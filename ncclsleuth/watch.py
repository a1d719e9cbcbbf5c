"""Live watch of a starting job: follow growing log files and diagnose as lines arrive.

A :class:`Watcher` owns one :class:`~ncclsleuth.model.JobModel` and, per followed file,
the byte offset read so far, the partial last line and its own
:class:`~ncclsleuth.parse.FileParser` (parsers keep state across lines: tracebacks,
torchrun failure blocks).  Each :meth:`Watcher.poll`:

1. lists the watched folders again only when a folder's mtime changed (new rank files);
2. ``stat``s every followed file and reads only those whose size or mtime changed, and
   only the bytes appended since the last poll (complete lines; the partial last line
   waits for the next poll).  A file whose inode changed (rotated: a new file under the
   old name) is read from its start as a new stream; a file that shrank (truncated in
   place) makes the watcher rebuild the model from what is on disk now;
3. runs the rule pack when new lines arrived, and computes the watch's own finding
   (``WATCH001``): ranks that went silent before finishing NCCL init while others did;
4. reports each finding not seen before (deduplicated by rule id + message) to
   ``on_finding``.

Polling, not inotify: the optional ``watchdog`` package is not a dependency, and a
``stat`` per file per poll costs about a millisecond per thousand files.

Rules that diagnose an *absence* (a rank that never started or never finished init,
a hang after ring setup) would fire on every job that is merely still starting; they
are held back until no file of the job has grown for ``silence`` seconds.
"""
from __future__ import annotations

import os
import stat as _stat
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import events as E
from .model.facts import ranges
from .grammar import ShapeCache
from .ingest import MAX_LINE_BYTES, InputFile, LineReader, Notice, _looks_binary, clean
from .model import JobModel
from .parse import FileParser
from .report import Evidence, Finding, Report

#: Rules about something that has not happened (yet): reported only once the job is quiet.
ABSENCE_RULES = frozenset({"INIT001", "INIT002", "TOPO002"})
#: Most bytes read from one file in one poll (a huge backlog is read over several polls).
MAX_READ_PER_POLL = 16 << 20
WATCH_RULE = "WATCH001"
_TAIL = 64
_COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
_SKIP = (".png", ".jpg", ".jpeg", ".gif", ".pdf", ".pt", ".pth", ".ckpt", ".safetensors", ".so", ".tar",
         ".zip", ".whl", ".pyc", ".npy", ".npz", ".bin", ".html", ".svg", ".json")

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
    for suffix, mult in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
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


def rank_ranges(ranks: Iterable[int]) -> str:
    """``[40, 41, 42, 47]`` -> ``"40-42, 47"``."""
    return ranges(ranks, ", ")


# --------------------------------------------------------------------------- followed files


@dataclass
class _Followed:
    path: str
    dev: int
    ino: int
    parser: FileParser
    size: int = 0
    mtime_ns: int = 0
    offset: int = 0
    partial: bytes = b""
    tail: bytes = b""  # the last bytes read: a file rewritten in place no longer ends with them
    lineno: int = 0
    mode: str | None = None  # None until sniffed: text | compressed | binary
    last_line_wall: float | None = None
    procs: set[tuple[str, int | None]] = field(default_factory=set)


@dataclass
class ProcState:
    """What the watcher knows about one model process beyond the model: when it was last heard of."""

    key: tuple[str, int | None]
    pseudo: bool  # lines without host/pid (``[rankN]:`` PyTorch lines): keyed by file in the model
    last_wall: float = 0.0
    phase: str = "startup"
    phase_seq: int = 0
    last_event: E.Event | None = None
    last_seq: int = 0


@dataclass
class Unit:
    """One process of the job for the live view (NCCL lines and its rank-tagged PyTorch lines merged)."""

    key: tuple[str, int | None]
    host: str
    last_wall: float = 0.0
    phase: str = "startup"
    phase_seq: int = 0
    last_event: E.Event | None = None
    last_seq: int = 0
    launcher: int | None = None
    comm_ranks: list[int] = field(default_factory=list)
    nccl: bool = False
    past_init: bool = False

    @property
    def ranks(self) -> list[int]:
        return [self.launcher] if self.launcher is not None else self.comm_ranks


class Watcher:
    """Follows PATHS (files and folders), keeps a JobModel current, reports findings as they appear."""

    def __init__(self, paths: Iterable[str], rules: list[Any] | None = None, silence: float = 60.0,
                 on_finding: Callable[[Finding], None] | None = None, clock: Callable[[], float] = time.time,
                 max_read: int = MAX_READ_PER_POLL) -> None:
        if rules is None:
            from .rules.engine import load_rules

            rules, _ = load_rules()
        self.paths = list(paths)
        self.rules = rules
        self.silence = float(silence)
        self.on_finding = on_finding
        self.clock = clock
        self.max_read = max_read
        self.started = clock()
        self._wall = clock is time.time  # then a file's mtime tells when its last line was written
        self.cache = ShapeCache()
        self.model = JobModel()
        self.files: dict[str, _Followed] = {}
        self.notices: list[Notice] = []
        self._noticed: set[tuple[str, str]] = set()
        self._dirs: dict[str, int] = {}  # folder -> mtime_ns when last listed
        self.procs: dict[tuple[str, int | None], ProcState] = {}
        self.report: Report | None = None
        self.findings: list[Finding] = []
        self.seen: dict[tuple[str, ...], float] = {}  # dedup key -> wall time first reported
        self.last_growth: float = self.started
        self.polls = 0
        self.reads = 0  # files read (their size or mtime changed), over all polls
        self.rule_runs = 0
        self.last_poll_s = 0.0
        self.last_rules_s = 0.0
        self._dirty = True
        self._last_rules_at = -1e9
        self._held_back = False
        self._seq = 0
        self._by_inode: dict[tuple[int, int], str] = {}
        self._rebuild_needed = False
        self._grow_time = 0.0

    # ------------------------------------------------------------------ discovery
    def _note(self, path: str, msg: str, severity: str = "warning") -> None:
        if (path, msg) not in self._noticed:
            self._noticed.add((path, msg))
            self.notices.append(Notice(path, msg, severity))

    def _scan(self) -> None:
        for p in self.paths:
            try:
                st = os.stat(p)
            except OSError:
                self._note(p, "no such file or folder (yet): watching for it", "info")
                continue
            if _stat.S_ISDIR(st.st_mode):
                self._scan_dir(p, st)
            elif _stat.S_ISREG(st.st_mode):
                self._follow(p, st)

    def _scan_dir(self, root: str, st: os.stat_result) -> None:
        stack = [(root, st)]
        while stack:
            d, dst = stack.pop()
            known = self._dirs.get(d)
            # unchanged since listed (and not changed in the last second: mtimes are coarse on some
            # file systems, a file created in the same tick as our listing would be missed)
            if known == dst.st_mtime_ns and time.time() - dst.st_mtime > 1.0:
                for sub in [k for k in self._dirs if os.path.dirname(k) == d]:
                    try:
                        stack.append((sub, os.stat(sub)))
                    except OSError:
                        self._dirs.pop(sub, None)
                continue
            self._dirs[d] = dst.st_mtime_ns
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                if e.name.startswith("."):
                    continue
                try:
                    est = e.stat()
                except OSError:
                    continue
                if _stat.S_ISDIR(est.st_mode):
                    stack.append((e.path, est))
                elif _stat.S_ISREG(est.st_mode) and e.path not in self.files:
                    if e.name.lower().endswith(_SKIP):
                        continue
                    self._follow(e.path, est)

    def _follow(self, path: str, st: os.stat_result) -> None:
        f = self.files.get(path)
        if f is not None:
            return
        old = self._by_inode.get((st.st_dev, st.st_ino))
        if old is not None and old in self.files and not os.path.exists(old):
            # renamed (rotated away) to a name we now see: the same stream, keep reading where we were
            other = self.files.pop(old)
            other.path = path
            self.files[path] = other
            self._by_inode[(st.st_dev, st.st_ino)] = path
            return
        self.files[path] = _Followed(path, st.st_dev, st.st_ino, FileParser(path, self.cache))
        self._by_inode[(st.st_dev, st.st_ino)] = path
        self.model.add_source(path)

    # ------------------------------------------------------------------ reading
    def _read(self, f: _Followed, st: os.stat_result, now: float) -> int:
        """Parse what was appended to ``f``; returns the number of complete lines read."""
        if f.mode is None:
            try:
                with open(f.path, "rb") as fh:
                    head = fh.read(8192)
            except OSError:
                return 0
            if not head:
                return 0
            if head.startswith(_COMPRESSED):
                f.mode = "compressed"
            elif _looks_binary(head):
                f.mode = "binary"
                self._note(f.path, "binary file, not a text log, skipped")
            else:
                f.mode = "text"
        if f.mode == "binary":
            f.size, f.mtime_ns = st.st_size, st.st_mtime_ns
            return 0
        if f.mode == "compressed":
            return self._read_compressed(f, st, now)
        n = 0
        k = len(f.tail)
        try:
            with open(f.path, "rb") as fh:
                fh.seek(f.offset - k)
                data = fh.read(k + self.max_read)
        except OSError as exc:
            self._note(f.path, f"cannot read: {exc.strerror or exc}")
            return 0
        if data[:k] != f.tail:  # rewritten in place (truncated, then as long again): what we parsed is gone
            self._note(f.path, "file truncated: re-read from its start", "info")
            self._rebuild_needed = True
            return 0
        data = data[k:]
        f.offset += len(data)
        if data:
            f.tail = (f.tail + data)[-_TAIL:]
        f.size, f.mtime_ns = (st.st_size, st.st_mtime_ns) if f.offset >= st.st_size else (f.offset, -1)
        if not data:
            return 0
        if self._wall and f.offset >= st.st_size:
            now = min(now, st.st_mtime)  # when the last line was written, also for a job watched late
        self._grow_time = max(self._grow_time, now)
        buf = f.partial + data if f.partial else data
        parts = buf.split(b"\n")
        f.partial = parts.pop()
        if len(f.partial) > MAX_LINE_BYTES:  # a line with no end in sight: take what there is
            parts.append(f.partial[:MAX_LINE_BYTES])
            f.partial = b""
            self._note(f.path, f"a line longer than {MAX_LINE_BYTES} bytes was cut")
        for raw in parts:
            n += 1
            f.lineno += 1
            s = raw.decode("utf-8", "replace")
            if "\x00" in s:
                s = s.replace("\x00", "")
            for seg in clean(s):
                self._feed(f, f.parser.parse_line(f.lineno, seg), now)
        if n:
            f.last_line_wall = now
            self.model.lines += n
        return n

    def _read_compressed(self, f: _Followed, st: os.stat_result, now: float) -> int:
        # A compressed log cannot be followed byte by byte: read it whole, once per change.
        if f.offset:  # it changed after we read it: the model must forget the old content
            self._rebuild_needed = True
            return 0
        reader = LineReader(InputFile(f.path))
        if self._wall:
            now = min(now, st.st_mtime)
        self._grow_time = max(self._grow_time, now)
        n = 0
        for lineno, text in reader:
            n = lineno
            self._feed(f, f.parser.parse_line(lineno, text), now)
        self._feed(f, f.parser.finish(), now)
        for no in reader.notices:
            self._note(no.path, no.message, no.severity)
        f.offset, f.size, f.mtime_ns, f.lineno = st.st_size, st.st_size, st.st_mtime_ns, n
        if n:
            f.last_line_wall = now
            self.model.lines += n
        return n

    def _feed(self, f: _Followed, events: list[E.Event], now: float) -> None:
        model = self.model
        for ev in events:
            model.add(ev)
            if ev.pid is None and ev.host is None and ev.level is None:
                continue
            key = (ev.host or ev.source, ev.pid)
            ps = self.procs.get(key)
            if ps is None:
                ps = self.procs[key] = ProcState(key, pseudo=ev.host is None)
                f.procs.add(key)
            self._seq += 1
            ps.last_wall, ps.last_event, ps.last_seq = now, ev, self._seq
            ph = phase_of(ev)
            if ph is not None:
                ps.phase, ps.phase_seq = ph, self._seq

    def _reset(self) -> None:
        """Forget everything read (a file was truncated): the next poll re-reads what is on disk."""
        keep = dict(self.files)
        self.model = JobModel()
        self.cache = ShapeCache()
        self.files = {}
        self.procs = {}
        self._by_inode = {}
        for path, old in keep.items():
            self._by_inode[(old.dev, old.ino)] = path
            self.files[path] = _Followed(path, old.dev, old.ino, FileParser(path, self.cache))
            self.model.add_source(path)

    # ------------------------------------------------------------------ polling
    def poll(self, force: bool = False) -> list[Finding]:
        """Read what changed, update the findings; returns the findings not reported before.

        The rules run when new lines arrived, at most every 3x their last cost (so a big
        model does not turn polling into rule evaluation); ``force`` runs them regardless.
        """
        t0 = time.perf_counter()
        now = self.clock()
        self.polls += 1
        self._rebuild_needed = False
        self._grow_time = 0.0
        self._scan()
        grown = self._poll_files(now)
        if self._rebuild_needed:
            self._reset()
            self._scan()
            grown += self._poll_files(now) + 1
        if grown:
            self.last_growth = self._grow_time or now
            self._dirty = True
        quiet = now - self.last_growth >= self.silence
        if quiet and self._held_back:
            self._dirty = True
        new: list[Finding] = []
        # the rules cost more as the model grows: on a big job run them at most every 3x their cost (<= 1 s)
        if force or (self._dirty and time.perf_counter() - self._last_rules_at >= min(1.0, 3 * self.last_rules_s)):
            self._run_rules(quiet)
        findings = self._merge(self._silence_findings(now))
        for fd in findings:
            key = self._key(fd)
            if key not in self.seen:
                self.seen[key] = now
                new.append(fd)
                if self.on_finding is not None:
                    self.on_finding(fd)
        self.findings = findings
        self.last_poll_s = time.perf_counter() - t0
        return new

    def _poll_files(self, now: float) -> int:
        grown = 0
        for f in list(self.files.values()):
            try:
                st = os.stat(f.path)
            except OSError:
                continue  # gone (rotated away, deleted): keep what it said
            if (st.st_dev, st.st_ino) != (f.dev, f.ino):  # rotated: a new file under the old name
                f.dev, f.ino = st.st_dev, st.st_ino
                self._by_inode[(f.dev, f.ino)] = f.path
                f.offset, f.partial, f.tail, f.mode, f.size, f.mtime_ns, f.lineno = 0, b"", b"", None, 0, 0, 0
                f.parser = FileParser(f.path, self.cache)
                self._note(f.path, "file replaced (rotated): reading the new one from its start", "info")
            elif st.st_size < f.offset:  # truncated in place: what we parsed is gone
                self._note(f.path, "file truncated: re-read from its start", "info")
                self._rebuild_needed = True
                return grown
            if st.st_size == f.size and st.st_mtime_ns == f.mtime_ns:
                continue
            self.reads += 1
            grown += self._read(f, st, now)
            if self._rebuild_needed:
                return grown
        return grown

    def _run_rules(self, quiet: bool) -> None:
        from .rules.engine import build_report

        t = time.perf_counter()
        report = build_report(self.model, self.rules, [n.to_dict() for n in self.notices])
        self._held_back = any(fd.rule_id in ABSENCE_RULES for fd in report.findings)
        if not quiet:
            report.findings = [fd for fd in report.findings if fd.rule_id not in ABSENCE_RULES]
        self.report = report
        self.rule_runs += 1
        self._dirty = False
        self._last_rules_at = time.perf_counter()
        self.last_rules_s = self._last_rules_at - t

    def _merge(self, watch: list[Finding]) -> list[Finding]:
        rule_findings = list(self.report.findings) if self.report else []
        errors = [fd for fd in rule_findings if fd.severity == "error"]
        rest = [fd for fd in rule_findings if fd.severity != "error"]
        return errors + watch + rest

    @staticmethod
    def _key(fd: Finding) -> tuple[str, ...]:
        if fd.rule_id == WATCH_RULE:  # the silence grows every poll: who and the phase identify it
            who, _, rest = fd.title.partition(": no line for")
            return (fd.rule_id, who, rest.rpartition("last seen in ")[2])
        return (fd.rule_id, fd.message)

    # ------------------------------------------------------------------ the watch's own finding
    def units(self) -> dict[tuple[str, int | None], Unit]:
        """The job's processes as the watch sees them, with ranks, last-seen time, phase and init state.

        PyTorch lines tagged ``[rankN]:`` carry no host or pid, so the model keeps them
        apart from the NCCL lines of the same process; in a file that one process writes
        they are merged back into it (and name its global rank).
        """
        procs = self.model.processes
        owner: dict[tuple[str, int | None], tuple[str, int | None] | None] = {}
        alone: dict[tuple[str, int | None], float] = {}
        for f in self.files.values():
            real = [k for k in f.procs if not self.procs[k].pseudo]
            if len(real) == 1:
                for k in f.procs:
                    owner[k] = real[0]
            elif len(real) > 1:
                for k in f.procs:
                    if self.procs[k].pseudo:
                        owner[k] = None  # rank-tagged lines of a shared stdout: no process of their own
            if f.last_line_wall is not None and len(f.procs) >= 1 and len(real) <= 1:
                tgt = real[0] if real else next(iter(f.procs))
                alone[tgt] = max(alone.get(tgt, 0.0), f.last_line_wall)
        big = max(self.model.comms.values(), key=lambda c: (c.nranks or 0, len(c.ranks)), default=None)
        out: dict[tuple[str, int | None], Unit] = {}
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
                    u.comm_ranks = sorted(r for ck, r in p.comm_ranks if ck == big.key) or u.comm_ranks
                u.past_init = u.past_init or any(
                    self.model.comms[ck].ranks[r].complete is not None for ck, r in p.comm_ranks
                    if ck in self.model.comms and r in self.model.comms[ck].ranks)
        for k, t in alone.items():
            if k in out:
                out[k].last_wall = max(out[k].last_wall, t)
        return out

    def _silence_findings(self, now: float) -> list[Finding]:
        units = self.units()
        done = [u for u in units.values() if u.past_init]
        if not done:
            return []
        silent = [u for u in units.values() if not u.past_init and now - u.last_wall >= self.silence]
        if not silent:
            return []
        host_total = Counter(u.host for u in units.values())
        by_host: dict[str, list[Unit]] = {}
        for u in silent:
            by_host.setdefault(u.host, []).append(u)
        out: list[Finding] = []
        for host in sorted(by_host, key=lambda h: (-max(now - u.last_wall for u in by_host[h]), h)):
            us = by_host[host]
            rk = sorted(r for u in us for r in u.ranks)
            who = (f"rank{'s' if len(rk) > 1 else ''} {rank_ranges(rk)}" if rk else
                   f"process{'es' if len(us) > 1 else ''} {', '.join(str(u.key[1]) for u in us)}")
            secs = int(min(now - u.last_wall for u in us))
            ph = Counter(u.phase for u in us).most_common(1)[0][0]
            whole = len(us) == host_total[host] and len(host_total) > 1
            host_note = f" (every process on {host})" if whole else ""
            title = f"{who} on {host}: no line for {secs} s, last seen in {ph}"
            msg = (f"{who} on {host}{host_note}: no line for {secs} s, last seen in {ph}, while "
                   f"{len(done)} of {len(units)} processes finished NCCL init. A rank that stops logging "
                   "before Init COMPLETE waits for a peer (in bootstrap: a missing or unreachable rank, a "
                   "blocked port, a wrong interface; in connection setup: the network between nodes).")
            evs = [Evidence(u.last_event.source, u.last_event.line, u.last_event.text)
                   for u in us[:8] if u.last_event is not None]
            out.append(Finding(
                rule_id=WATCH_RULE, name="watch.silent_rank", category="collective_timeout", severity="warning",
                confidence=0.6, title=title, message=msg,
                fix=(f"Look at what {host} is doing now (py-spy dump on the stuck pids, the host's launcher "
                     "log, nvidia-smi). Waiting in bootstrap: check that every rank started and that "
                     "NCCL_SOCKET_IFNAME names a routable interface on every node. Waiting in connection "
                     "setup: check the IB/RoCE links between the nodes. Set timeout= in init_process_group "
                     "so a hung init fails instead of waiting forever."),
                evidence=evs, references=[], evidence_total=len(us), hosts=[host], ranks=rk,
                explained={(e.file, e.line) for e in evs}))
        return out

    # ------------------------------------------------------------------ views
    def finish(self) -> None:
        """End of input (``--once``): close what the parsers keep open (a traceback cut off)."""
        now = self.clock()
        for f in self.files.values():
            self._feed(f, f.parser.finish(), now)
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
            for ck, r in (p.comm_ranks if p else ()):
                unit_of_rank[(ck, r)] = u
        comms = []
        for c in sorted(self.model.comms.values(), key=lambda c: (-(c.nranks or 0), c.key)):
            if c.key == "unknown":
                continue
            phases: Counter[str] = Counter()
            for r, st in c.ranks.items():
                if st.complete is None:
                    u = unit_of_rank.get((c.key, r))
                    phases[u.phase if u else "?"] += 1
            comms.append({"comm": c.key, "nranks": c.nranks, "seen": len(c.ranks),
                          "complete": sum(1 for st in c.ranks.values() if st.complete is not None),
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
        ranks = [{"process": f"{u.key[0]}:{u.key[1]}", "host": u.host, "ranks": rank_ranges(u.ranks),
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
        return render_status(self.status(), self.findings, self.paths, self.silence)


_SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render_status(s: dict[str, Any], findings: list[Finding], paths: list[str], silence: float) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text(f"ncclsleuth watch {' '.join(paths)[:80]}", style="bold")
    head += Text(f"   {s['elapsed_s']:.0f} s · {s['files']} files · {s['lines']} lines · "
                 f"{s['processes']} processes · poll {s['poll_ms']} ms", style="dim")
    parts: list[Any] = [head]
    ct = Table(title="Communicators", title_justify="left", box=None, pad_edge=False)
    for col in ("comm", "ranks seen", "init complete", "the rest are in"):
        ct.add_column(col)
    for c in s["comms"][:8]:
        n = c["nranks"] or "?"
        rest = ", ".join(f"{ph} ({k})" for ph, k in c["rest_in"].items()) or "-"
        style = "green" if c["nranks"] and c["complete"] == c["nranks"] else ""
        ct.add_row(str(c["comm"])[:20], f"{c['seen']}/{n}", Text(f"{c['complete']}/{n}", style=style), rest)
    if not s["comms"]:
        ct.add_row("(none yet)", "", "", "")
    parts.append(ct)
    ht = Table(title="Hosts", title_justify="left", box=None, pad_edge=False)
    for col in ("host", "ranks", "init complete", "last line", "quietest rank"):
        ht.add_column(col)
    for h in s["hosts"][:12]:
        old = h["quietest_s"]
        ht.add_row(h["host"], rank_ranges(h["ranks"]) or str(h["processes"]),
                   f"{h['init_complete']}/{h['processes']}", f"{h['last_line_s']:.0f} s ago",
                   Text(f"{old:.0f} s", style="red" if old >= silence and h["init_complete"] < h["processes"] else ""))
    if len(s["hosts"]) > 12:
        ht.add_row(f"... {len(s['hosts']) - 12} more", "", "", "", "")
    parts.append(ht)
    ft = Table(title="Findings so far", title_justify="left", box=None, pad_edge=False)
    ft.add_column("severity")
    ft.add_column("rule")
    ft.add_column("finding")
    for fd in findings[:10]:
        ft.add_row(Text(fd.severity, style=_SEV_STYLE.get(fd.severity, "")), fd.rule_id, fd.title[:110])
    if not findings:
        ft.add_row(Text("-", style="green"), "", "nothing wrong so far")
    parts.append(ft)
    return Group(*parts)
