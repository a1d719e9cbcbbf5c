"""What each rank did, in a few fields: the raw material of whole-job reasoning.

One :class:`Track` per (launcher rank, file): the lines of rank 5 in ``rank5.log`` are one
track, the unprefixed lines of ``stdout.log`` another (their rank is worked out later,
from the file's other lines, its NCCL processes or its name: :mod:`.members`).  A track
holds references to events the parser made anyway (its first and last problem lines, its
last traceback, its first watchdog timeout, its collective counters per process group) and
the two events the parser makes at the end of each file (its last line and its last
progress line), so its cost per rank is a small constant whatever the length of the log,
and per-file models merge by a dict update (each file has its own tracks).
"""
from __future__ import annotations

from .. import events as E
from ..util.clock import Stamp, stamp
from .places import as_event

#: event kinds a track looks at besides problem lines
TRACKED = frozenset({"last_line", "progress", "work_status", "watchdog_timeout", "traceback", "collective_mismatch"})


class Track:
    """One rank's (or one file's unprefixed) lines, summarised."""

    __slots__ = ("rank", "source", "last", "last_ts", "progress", "step", "elapsed_s", "first_problem", "first_t",
                 "last_problem", "problems", "traceback", "watchdog", "counters", "mismatch")

    def __init__(self, rank: int | None, source: str) -> None:
        self.rank = rank
        self.source = source
        #: the last line of its output (a ``last_line`` event; in the job's model its place where
        #: the file is one rank's: ``ncclsleuth.model.job.track_places``, read by :meth:`last_line`),
        #: and its time stamp (None where it prints none)
        self.last: E.Event | int | None = None
        self.last_ts: str | None = None
        #: its last training-progress line (its event, or its place as ``last``: :meth:`progress_line`),
        #: with the step it reached and the seconds a progress bar says have elapsed
        self.progress: E.Progress | int | None = None
        self.step: int | None = None
        self.elapsed_s: int | None = None
        #: its first problem line, and when it was printed where the line says
        self.first_problem: E.Event | None = None
        self.first_t: Stamp | None = None
        self.last_problem: E.Event | None = None
        self.problems = 0
        #: its last Python traceback (exception, the code line where it stopped)
        self.traceback: E.Traceback | None = None
        #: its first watchdog timeout (op, size, SeqNum of the collective it waited in)
        self.watchdog: E.WatchdogTimeout | None = None
        #: process group -> (last enqueued, last completed, the line): ProcessGroupNCCL's counters
        self.counters: dict[str, tuple[int | None, int | None, E.Event]] | None = None
        #: its first "Detected mismatch between collectives" (TORCH_DISTRIBUTED_DEBUG=DETAIL)
        self.mismatch: E.CollectiveMismatch | None = None

    def see(self, ev: E.Event, kind: str, problem: bool) -> None:
        """Fold one event of this rank in (events arrive in line order)."""
        if problem:
            self.problems += 1
            self.last_problem = ev
            if self.first_problem is None:
                self.first_problem = ev
            if self.first_t is None and ev.ts:  # when its trouble started, where a line says
                self.first_t = stamp(ev.ts)
        if kind == "last_line":
            self.last, self.last_ts = ev, ev.ts
        elif kind == "progress":
            self.progress, self.step, self.elapsed_s = ev, ev.step, ev.elapsed_s  # type: ignore[assignment,attr-defined]
        elif kind == "traceback":
            self.traceback = ev  # type: ignore[assignment]
        elif kind == "watchdog_timeout":
            if self.watchdog is None:
                self.watchdog = ev  # type: ignore[assignment]
        elif kind == "work_status":
            self._counter(ev)  # type: ignore[arg-type]
        elif kind == "collective_mismatch" and self.mismatch is None:
            self.mismatch = ev  # type: ignore[assignment]

    def last_line(self) -> E.Event | None:
        """The event of its last line (made again from the line where the track keeps its place)."""
        return as_event(self.source, self.last, "last_line")

    def progress_line(self) -> E.Progress | None:
        """The event of its last progress line (made again where the track keeps its place)."""
        return as_event(self.source, self.progress, "progress")

    def _counter(self, ev: E.WorkStatus) -> None:
        if ev.last_enqueued is None and ev.last_completed is None:
            return
        pg = ev.pg or "0"
        counters = self.counters if self.counters is not None else {}
        self.counters = counters
        cur = counters.get(pg)
        if cur is None or (ev.last_enqueued or -1) >= (cur[0] or -1):
            counters[pg] = (ev.last_enqueued, ev.last_completed, ev)

    def __repr__(self) -> str:
        return f"Track(rank={self.rank}, source={self.source!r}, problems={self.problems})"
