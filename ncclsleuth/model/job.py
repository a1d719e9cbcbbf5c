"""JobModel: processes, hosts, communicators, ranks, and the events rules look at."""
from __future__ import annotations

import heapq
import re
from array import array
from collections import Counter
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from .. import events as E
from ..events.nccl import via_fields
from ..util import bounded_put
from ..util.classes import dataclass
from ..util.rxstore import rx
from .places import PLACE_BITS, as_event, line_place, own_place
from .tracks import TRACKED, Track

if TYPE_CHECKING:
    from .flight import FlightRecords
    from .live import LiveView

#: Kinds folded into aggregates instead of being kept one by one.
HIGH_VOLUME = frozenset({"text", "err_trace", "channel_conn", "ring", "trees", "nccltests_row",
                         "socket_retry", "call_retry", "failure_field", "step_time", "last_line", "progress"})
#: step times kept per rank (or per file where the rank is unknown) for straggler checks
STEP_SAMPLES = 2000
#: :meth:`JobModel.order_int`: bits of the line below the file's index (a trillion lines a file)
ORDER_LINE_BITS = 40
#: runs of events in order that :meth:`JobModel.in_order` merges; more are sorted, and so are
#: this many events or fewer (a 200-line paste's findings: the merge's set-up cost more than it saved)
MERGE_RUNS = 64
SORT_BELOW = 256
_NCCL_LEVELS = frozenset({"INFO", "WARN", "TRACE", "CALL"})
#: Events kept per kind (errors: per kind); the rest are counted in ``folded``.
KEEP_PER_KIND = 20_000
#: Most processes, communicators, rank states (over all communicators) and hop aggregates the
#: model tracks one by one.  A 100,000-rank job (issue 16's largest) fits: a process a rank (a
#: per-rank file's lines that name none, PyTorch's, are its NCCL process's: :meth:`JobModel.settle`;
#: two a rank where they stay apart, 200,000), and a rank state per rank and communicator,
#: 1,048,576 allowing ten communicators a rank.  Past them a broken
#: or hostile log (2M distinct host names: 3.3 GB before) would cost ~1.5 KB per name.  Lines
#: past a bound still count and their problem lines still reach the report (events are kept
#: per kind); :meth:`JobModel.bounds_met` says what was not tracked, and no fact reads a rank
#: left untracked as a rank that is absent.  (Below 131,072 processes and 262,144 rank states,
#: a 100,000-rank job lost 37,856 of its rank states and was told 12,618 ranks never started
#: NCCL's init.)
MAX_PROCESSES = 1 << 18
MAX_COMMS = 1 << 16
MAX_RANKS = 1 << 20
MAX_HOPS = 1 << 20
#: distinct ring orders shared between communicators and channels (past it each keeps its own)
MAX_ORDERS = 4096
#: connection texts a process printed that the fast path remembers in one generation, to count
#: their later lines (:meth:`JobModel.conn_seen`); when a new one would pass it, the texts of the
#: generation before, none of them met since, are folded and forgotten (:meth:`JobModel._rotate`).
#: A text met again after its fold is counted as a first line (~22 us, against ~1 us for a line
#: folded into its text): the 5M-line file of an 8,000-rank job (its ranks' lines far apart) had
#: 117,342 first lines at 4,096 and 33,688 at 16,384, its build's CPU 16.1 -> 14.2 s for +5 MB of
#: peak (97 -> 102 MB in process); the 1M-line file the same time, +2 MB (stop 48, medians of 3).
#: At most two generations are held: ~350 bytes a text, ~11 MB at this bound, whatever the ranks.
MAX_CONN_TEXTS = 16384
#: tree edges kept per communicator for these channels only: the pictures and checks need
#: one tree, and 32 channels x 16,384 ranks of edges would be ~1.5 M objects (the parser
#: does not make the others: ``JobModel.tree_channels``)
TREE_CHANNELS = 2
#: Kinds no shipped rule, fact or report reads one by one (tests/test_fastpath.py checks the rule
#: pack and the readers of ``JobModel.events``): analyze with the shipped rules keeps none of them;
#: their handlers still fold them into processes and communicators, and their problem lines are kept.
#: These are the per-rank init lines that made memory grow with ranks (~11 KB a rank).
#: ``bootstrap_timings`` has no handler: each rank's ``Bootstrap timings`` event was kept on its
#: rank state and read by nothing (a fact that wants it adds one); its lines are only counted.
#: ``nvls``: NVLS001 reads its WARN lines alone, which are problems (kept); an INFO ``NVLS multicast
#: support is not available`` per rank and communicator was kept and read by nothing.
#: ``nccl_other``: the INFO lines the grammar does not know (``threadThresholds``, ``cudaDriverVersion``:
#: a dozen per rank) are read by no fact; the shipped rules read them only where they say
#: what :data:`KEPT_IF` lists, and those lines are kept.
#: ``comm_init``: each rank's Init START and COMPLETE lines, three communicators a rank (~1.5 KB a
#: rank): its rank state keeps what is read of them (where, when, phase), and
#: :attr:`JobModel.init_aside` where a line is no rank state's.
UNREAD_KINDS = frozenset({"comm_info", "channels_summary", "bootstrap_timings", "init_timings", "nccl_version",
                          "bootstrap_iface", "net_plugin", "net_selected", "pg_options", "connected", "nvls",
                          "nccl_other", "comm_init"})
#: Lines of an unread kind that are kept all the same (no problem, but a shipped rule's ``where``
#: on ``message_text`` reads them: ULIM001's "Too many open files|EMFILE", DESYNC004's "Message
#: truncated"); tests/test_fastpath.py checks that every shipped rule's text test on such a kind is
#: one of these alternatives.  Words only, no digits: the fast path decides it once per shape.
KEPT_IF: dict[str, re.Pattern[str]] = {"nccl_other": rx(r"Too many open files|EMFILE|Message truncated")}


class _Unset(Mapping[str, Any]):
    """What a process has set before its first setting or evidence line: one empty read-only
    mapping for all of them (``Process.set_env`` gives one a dict of its own), pickled as itself
    (a forked worker's model crosses a pipe)."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __reduce__(self) -> str:
        return "_NONE_SET"

    def __hash__(self) -> int:  # immutable (and a dataclass default must be hashable)
        return 0

    def __repr__(self) -> str:
        return "{}"


_NONE_SET: Mapping[str, Any] = _Unset()

#: the settings of processes, one dict per distinct (name, value) list (see :meth:`Process.set_env`)
_ENVS: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
#: distinct settings lists kept in ``_ENVS`` at most: when full it starts again (a job's processes
#: print a handful of lists, so the ones that repeat are soon back)
MAX_ENVS = 1 << 12


def shared_env(env: dict[str, str]) -> dict[str, str]:
    """The one dict of the settings equal to ``env`` (in the same order) that this process keeps:
    ``env`` itself when it is the first.  Never written to once shared (:meth:`Process.set_env`)."""
    key = tuple(env.items())
    got = _ENVS.get(key)
    return bounded_put(_ENVS, MAX_ENVS, key, env) if got is None else got

#: kinds whose event a process keeps as the evidence line of what it set (``Process.evidence``):
#: those a fact quotes (tests/test_model_sharing.py checks each has a reader).  Not
#: ``net_plugin``: kept and never read, one event a process (~200 bytes a rank at 100,000 ranks)
_EVIDENCE_KINDS = frozenset({"nccl_version", "bootstrap_iface", "net_ib_devices", "net_ib_none", "ibverbs_missing",
                             "net_selected"})
#: kinds of the lines kept by their place where the model keeps no event of them: a process's
#: evidence lines (:attr:`Process.said`: those above, its settings' lines and its socket
#: interfaces' lines), a rank's ``Init timings`` line (:attr:`RankState.timed`) and its Init START
#: line (:attr:`RankState.began`).  The parser tells the model their place once the model has
#: them (``placed``).
PLACED_KINDS = _EVIDENCE_KINDS | {"env_setting", "net_socket_ifaces", "init_timings", "comm_init"}


def place(source: str, ev: E.Event) -> int | None:
    """Where a line of ``source`` may be kept instead of its event ``ev`` (``line << PLACE_BITS |``
    its reference), None where its event must stay: its text is kept (not by reference), it is
    another file's, or it is not an NCCL ``INFO`` line with its own prefix (host and pid), the
    lines whose event is made again from their text alone (:mod:`ncclsleuth.parse.again`)."""
    if ev.level != "INFO" or ev.host is None or ev.pid is None or ev.source != source:
        return None
    return line_place(ev)


def track_places(t: Track) -> None:
    """Keep a track's last line and last progress line (the events the parser made at the end of
    its file: :meth:`ncclsleuth.parse.lines.FileParser.tail`) as their places where their texts are
    by reference (a file of one rank), merging the file's model.  What every rank's is read for
    stays beside them (:class:`Track`: ``last_ts``, ``step``, ``elapsed_s``); the line itself is
    quoted for the few ranks a finding names (~300 bytes a rank with their integers: 30 MB at
    100,000 per-rank files).  Both events depend on their line alone (its envelope peeled from it,
    its progress read from it), so :mod:`ncclsleuth.parse.again` makes them again as they were."""
    t.last = own_place(t.source, t.last)
    t.progress = own_place(t.source, t.progress)  # type: ignore[assignment]  # a Progress stays one


class _Quotes(Mapping[str, E.Event]):
    """A process's evidence lines as events (:attr:`Process.evidence`): those it keeps by their
    place made again from their lines (:func:`ncclsleuth.parse.again.event`)."""

    __slots__ = ("source", "said")

    def __init__(self, source: str, said: Mapping[str, E.Event | int]) -> None:
        self.source = source
        self.said = said

    def __getitem__(self, key: str) -> E.Event:
        return as_event(self.source, self.said[key], _said_kind(key))

    def __contains__(self, key: object) -> bool:  # Mapping's asks for the item: it would be made
        return key in self.said

    def __iter__(self) -> Iterator[str]:
        return iter(self.said)

    def __len__(self) -> int:
        return len(self.said)


def _said_kind(key: str) -> str:
    """The event kind of evidence key ``key`` (:attr:`Process.said`)."""
    if key.startswith("env:"):
        return "env_setting"
    if key.startswith("iface:"):
        return "net_socket_ifaces"
    return key


@dataclass(slots=True)  # no dict per instance: one per process / rank / communicator
class Process:
    """One OS process (host, pid): its versions, settings and network choices."""

    host: str | None
    pid: int | None
    source: str
    nccl_version: str | None = None
    cuda_version: str | None = None
    #: NCCL_* settings it printed: read-only, shared by the processes that printed the same ones
    #: (:meth:`set_env`), one shared empty mapping until the first
    env: Mapping[str, str] = _NONE_SET
    bootstrap: tuple[E.Iface, ...] = ()
    socket_ifaces: tuple[E.Iface, ...] = ()
    ib_devices: tuple[E.IbDev, ...] = ()
    ib_none: bool = False
    ibverbs_missing: bool = False
    network: str | None = None
    #: net plugins it loaded (a tuple: most load none)
    plugins: tuple[str, ...] = ()
    #: (communicator, its rank there) per communicator it initialised, in the order of their
    #: first Init lines, flat: ``comm, rank, comm, rank, ...`` (read as pairs: :meth:`comm_pairs`).
    #: A tuple: an empty set was 216 bytes of every process, one a rank with none; and flat: a
    #: tuple of pairs was a pair object each (~170 bytes a rank of three communicators)
    comm_ranks: tuple[str | int, ...] = ()
    launcher_rank: int | None = None
    first_line: int = 0
    last_line: int = 0
    last_kind: str | None = None
    #: the first problem line of this process (when its trouble started)
    first_error: E.Event | None = None
    gdr_conns: int = 0
    net_conns: int = 0
    errors: int = 0
    #: kind (``env:NAME``, ``iface:NAME``) -> the line that set the value above: its event, or
    #: where the model keeps no event of it, its place (:func:`place`), made an event again when
    #: asked (:attr:`evidence`).  One shared empty mapping until the first (:meth:`own_said`): a
    #: file's process of its ``[rankN]:`` lines sets none, and its two empty dicts and list were
    #: ~230 bytes a rank
    said: Mapping[str, E.Event | int] = _NONE_SET

    def comm_pairs(self) -> Iterator[tuple[str, int]]:
        """(communicator, its rank there) of each communicator it initialised, in order."""
        it = iter(self.comm_ranks)
        return zip(it, it)  # type: ignore[arg-type]  # comm_ranks alternates str and int

    def add_comm_rank(self, comm: str, rank: int) -> None:
        """Its rank ``rank`` in communicator ``comm`` (once)."""
        cr = self.comm_ranks
        for i in range(0, len(cr), 2):
            if cr[i] == comm and cr[i + 1] == rank:
                return
        self.comm_ranks = (*cr, comm, rank)

    def set_env(self, settings: Iterable[tuple[str, str]]) -> None:
        """Its settings with ``settings`` (name, value) set, as a new mapping shared with the
        processes that set the same (:func:`shared_env`): a job prints the same settings on every
        rank, and a dict of its own was ~230 bytes a rank (issue 16).  The mapping it had is left
        as it was: other processes may hold it."""
        env = dict(self.env)
        env.update(settings)
        self.env = shared_env(env)

    def told_nothing(self) -> bool:
        """Whether its lines set nothing beyond where they are and a launcher rank (no setting,
        evidence line, network, communicator, connection or problem)."""
        return not (self.nccl_version or self.cuda_version or self.env or self.said or self.bootstrap
                    or self.socket_ifaces or self.ib_devices or self.ib_none or self.ibverbs_missing
                    or self.network or self.plugins or self.comm_ranks or self.first_error is not None
                    or self.gdr_conns or self.net_conns or self.errors)

    def own_said(self) -> dict[str, E.Event | int]:
        """``said``, to be written to (a dict of its own from the first line on)."""
        said = self.said
        if type(said) is not dict:
            said = self.said = {}
        return said

    @property
    def evidence(self) -> Mapping[str, E.Event]:
        """kind -> the event of the line that set the value (the evidence line), made again from
        its line where the process keeps its place.  A fact that reads every process asks
        :attr:`said` (or the values themselves) first and this for the lines it quotes."""
        said = self.said
        return _Quotes(self.source, said) if said else _NONE_SET

    def keep_places(self, unkept: Container[int]) -> None:
        """Keep the place of its evidence lines whose events (ids in ``unkept``) the model keeps
        nowhere else, where they can be placed (:func:`place`)."""
        said = self.said
        for k, v in said.items():
            if type(v) is not int and id(v) in unkept:
                at = place(self.source, v)  # type: ignore[arg-type]  # an event: not an int
                if at is not None:
                    said[k] = at  # type: ignore[index]  # a dict once it holds an event

    def said_at(self, key: str) -> tuple[str, int] | None:
        """(file, line) of ``key``'s evidence line, without making its event."""
        v = self.said.get(key)
        if v is None:
            return None
        return (self.source, v >> PLACE_BITS) if type(v) is int else (v.source, v.line)  # type: ignore[union-attr]

    @property
    def key(self) -> str:
        return f"{self.host or self.source}:{self.pid if self.pid is not None else '?'}"


class Done:
    """A rank's ``Init COMPLETE`` line where its ``Init START`` line says where it was printed: its
    line and time, and its file and process read through its rank state (``state``: its start's, the
    same, or the line is kept as its event).  What is read of an Init COMPLETE line is whether there
    was one, where (the phase of a process's later lines) and when (the init timeline); the rest of
    its event repeated its start's (``src/init.cc``, 2.18.3-2.30, where the START line was added:
    both lines print the same comm, rank, nranks, devices and busId, then commId, or a split's
    parent, color and key; 2.29+ may put ``[Rank N]`` before START's).  56 bytes where its event was
    ~230 with its reference: a 100,000-rank job of three communicators kept 300,000 such events."""

    __slots__ = ("state", "line", "ts")

    def __init__(self, state: RankState, line: int, ts: str | None) -> None:
        self.state = state
        self.line = line
        self.ts = ts

    @property
    def source(self) -> str:
        return self.state.start_where()[0]  # type: ignore[return-value]  # a Done has a start

    @property
    def host(self) -> str | None:
        return self.state.start_where()[1]

    @property
    def pid(self) -> int | None:
        return self.state.start_where()[2]

    def __repr__(self) -> str:
        return f"Done(line={self.line}, ts={self.ts!r})"


def _complete(st: RankState, ev: E.CommInit) -> E.CommInit | Done:
    """What rank state ``st`` keeps of its Init COMPLETE event ``ev``: a :class:`Done` where its start
    says where it was printed, else the event."""
    if st.began is not None and st.start_where() == (ev.source, ev.host, ev.pid):
        return Done(st, ev.line, ev.ts)
    return ev


@dataclass(slots=True)  # no dict per instance: one per process / rank / communicator
class RankState:
    """One rank of one communicator."""

    comm: str
    rank: int
    nranks: int | None = None
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    #: its Init START line (or an older release's Init INFO line): the event, or where the model
    #: keeps no event of it and the line is of the process this state was made for (``host``,
    #: ``pid``), its place (:func:`place`; the event made again when asked: :attr:`start`).  What
    #: every rank's is read for (whether it began, where, in which phase, when: the init facts, the
    #: members, the phase of a process's lines, the timeline) is kept beside it: ``source``,
    #: ``start_phase``, ``start_ts``.  ~220 bytes where the event was kept, three a rank
    began: E.CommInit | int | None = None
    source: str | None = None
    start_phase: str | None = None
    start_ts: str | None = None
    #: its Init COMPLETE line (read as :attr:`complete`): the event, a :class:`Done` where its start
    #: says where it was printed, or where the line has no time stamp either (the Done would say
    #: nothing but the line: 56 bytes, three a rank) its line number alone
    done: E.CommInit | Done | int | None = None
    #: its ``Init timings`` line: the event, or where its start is of the same file (``source``)
    #: and the model keeps no event of it (analyze keeps none: ``UNREAD_KINDS``), its place
    #: (:func:`place`, read in ``source``; the event made again when asked: :attr:`timings`).  What every rank's is
    #: read for (the init facts, the timeline, the summary) is kept beside it: ``init_total``,
    #: ``init_phases``.  ~220 bytes where the event was kept with its ints, three a rank
    timed: E.InitTimings | int | None = None
    init_total: float = 0.0
    init_phases: tuple[tuple[str, float], ...] = ()
    local_rank: int | None = None
    nnodes: int | None = None

    @property
    def start(self) -> E.CommInit | None:
        """The event of its Init START line (made again from the line where it keeps its place).
        Whether it began is ``began is not None``: this makes the event."""
        return as_event(self.source, self.began, "comm_init")

    def begin(self, ev: E.CommInit, at: int | None) -> None:
        """Its Init START line ``ev``: kept as its place ``at`` (None: the event), with its file,
        phase and time."""
        self.began = ev if at is None else at
        self.source, self.start_phase, self.start_ts = ev.source, ev.phase, ev.ts

    def start_where(self) -> tuple[str | None, str | None, int | None]:
        """(file, host, pid) of its Init START line, without making its event (a placed line is
        of this state's process: :attr:`began`)."""
        b = self.began
        if b is None:
            return (None, None, None)
        if type(b) is int:
            return (self.source, self.host, self.pid)
        return (b.source, b.host, b.pid)  # type: ignore[union-attr]

    @property
    def timings(self) -> E.InitTimings | None:
        """The event of its ``Init timings`` line (made again from the line where it keeps its place)."""
        return as_event(self.source, self.timed, "init_timings")

    def time(self, ev: E.InitTimings, at: int | None) -> None:
        """Its ``Init timings`` line ``ev``: kept as its place ``at`` (None: the event), with its
        total and phases."""
        self.timed = ev if at is None else at
        self.init_total, self.init_phases = ev.total, ev.phases

    def keep_places(self, unkept: Container[int]) -> None:
        """Keep the place of its Init START and ``Init timings`` lines whose events (ids in
        ``unkept``) the model keeps nowhere else, where they can be placed: its start where the
        line is of this state's process, its timings where its start's file is known."""
        b, t = self.began, self.timed
        if isinstance(b, E.CommInit) and id(b) in unkept and (b.host, b.pid) == (self.host, self.pid):
            self.begin(b, place(b.source, b))
        if isinstance(t, E.InitTimings) and id(t) in unkept and self.source is not None:
            self.time(t, place(self.source, t))

    def done_at(self) -> tuple[str | None, str | None, int | None, int] | None:
        """(file, host, pid, line) of its Init COMPLETE line, without making a :class:`Done`."""
        d = self.done
        if d is None:
            return None
        if type(d) is int:
            return (*self.start_where(), d)
        return (d.source, d.host, d.pid, d.line)  # type: ignore[union-attr]  # an event or a Done

    @property
    def complete(self) -> E.CommInit | Done | None:
        """Its Init COMPLETE line: the event or a :class:`Done` (made for the asker where the state
        keeps the line number alone).  Whether it completed is ``done is not None``: this may make one."""
        d = self.done
        return Done(self, d, None) if type(d) is int else d  # type: ignore[return-value]

    @complete.setter
    def complete(self, value: E.CommInit | Done | None) -> None:
        self.done = value.line if type(value) is Done and value.state is self and value.ts is None else value

    def init_wheres(self) -> tuple[tuple[str | None, str | None, int | None], ...]:
        """(file, host, pid) of each of its Init lines it keeps (START, COMPLETE)."""
        done = self.done_at()
        if self.began is None:
            return () if done is None else (done[:3],)
        start = self.start_where()
        return (start,) if done is None or done[:3] == start else (start, done[:3])

    def init_event(self) -> E.CommInit | None:
        """The event of one of its Init lines, as evidence: the start, else the Init COMPLETE line."""
        c = self.complete
        return self.start if self.began is not None else (c if isinstance(c, E.CommInit) else None)


@dataclass(slots=True)  # no dict per instance: one per process / rank / communicator
class Comm:
    """A communicator (keyed by commId where the log prints it)."""

    key: str
    nranks: int | None = None
    ranks: dict[int, RankState] = field(default_factory=dict)
    rings: dict[int, tuple[int, ...]] = field(default_factory=dict)
    ring_truncated: bool = False
    #: channel -> each tree edge's rank and its parent, in pairs: ``me, up, me, up, ...`` (up -1:
    #: the root).  What the topology reads of a ``Trees`` line; its children (``down``) say again
    #: what the children's own ``up`` says, and an edge object with them was ~170 bytes where a
    #: pair is 16 (six a rank of three communicators: ~1 KB a rank)
    trees: dict[int, array[int]] = field(default_factory=dict)
    #: each hop's connection lines, one int for the hop and one for what it counted
    #: (:func:`hop_key` of its ranks -> its lines << HOP_KIND_BITS | its kind in ``hop_kinds``):
    #: read through :meth:`hop_items`.  A tuple of the ranks and a list [transport, net, gdr,
    #: lines] were ~270 bytes a hop with their ints (three a rank: ~0.8 KB a rank)
    hops: dict[int, int] = field(default_factory=dict)
    #: the (transport, net, gdr) of the hops, each once
    hop_kinds: list[tuple[str, str | None, bool]] = field(default_factory=list)
    transports: Counter[str] = field(default_factory=Counter)
    #: first line that showed this comm's graph (ring dump / trees): evidence for hangs
    graph_event: E.Event | None = None

    def hop_kind(self, label: str, net: str | None, gdr: bool) -> int | None:
        """The index of (``label``, ``net``, ``gdr``) in ``hop_kinds`` (added), None past its bits."""
        kind = (label, net, bool(gdr))
        kinds = self.hop_kinds
        for i, k in enumerate(kinds):  # a handful: P2P, SHM, NET/IB with and without GDR
            if k == kind:
                return i
        if len(kinds) > HOP_KIND_MASK:
            return None
        kinds.append(kind)
        return len(kinds) - 1

    def hop_items(self) -> Iterator[tuple[tuple[int, int], tuple[str, str | None, bool, int]]]:
        """((src, dst), (transport, net, gdr, lines)) of each hop, in the order they were counted."""
        kinds = self.hop_kinds
        for key, v in self.hops.items():
            yield hop_ends(key), (*kinds[v & HOP_KIND_MASK], v >> HOP_KIND_BITS)


#: bits of a hop's value that say its kind (``Comm.hop_kinds``); the rest count its lines
HOP_KIND_BITS = 16
HOP_KIND_MASK = (1 << HOP_KIND_BITS) - 1
#: a hop's count of lines, as it is added to its value
HOP_LINE = 1 << HOP_KIND_BITS
_RANK_BITS = 32
_RANK_LIMIT = 1 << _RANK_BITS


def hop_key(src: int, dst: int) -> int | None:
    """A hop's key in ``Comm.hops``: its two ranks in one int (None for a rank past 32 bits or
    below 0: a damaged line, not a hop)."""
    if 0 <= src < _RANK_LIMIT and 0 <= dst < _RANK_LIMIT:
        return src << _RANK_BITS | dst
    return None


def hop_ends(key: int) -> tuple[int, int]:
    """The (src, dst) ranks of a hop's key."""
    return key >> _RANK_BITS, key & (_RANK_LIMIT - 1)


def _pkey(ev: E.Event) -> tuple[str, int | None]:
    return (ev.host or ev.source, ev.pid)


class JobModel:
    """Everything the rules need, built one event at a time."""

    def __init__(self, drop: frozenset[str] = frozenset()) -> None:
        #: event kinds not kept one by one (problem lines are always kept): ``UNREAD_KINDS`` for
        #: analyze with the shipped rules (``ncclsleuth.api``), none elsewhere
        self.drop = drop
        self.processes: dict[tuple[str, int | None], Process] = {}
        self.comms: dict[str, Comm] = {}
        self.events: dict[str, list[E.Event]] = {}
        self.folded: Counter[str] = Counter()
        self.kind_counts: Counter[str] = Counter()
        self.sources: list[str] = []
        self._source_index: dict[str, int] = {}  # source -> position in sources (O(1) order keys)
        self.lines = 0
        self.versions_unattached: list[E.NcclVersion] = []
        self.failure_blocks: list[dict[str, Any]] = []
        self._block: dict[str, Any] | None = None
        self.nccltests_rows: list[E.NcclTestsRow] = []
        self._proc_comm: dict[tuple[str, int | None], str] = {}
        #: rank (or source file) -> training-step times in ms, first STEP_SAMPLES of them (doubles,
        #: 8 bytes each, not a float object and a pointer: 32 bytes each)
        self.step_times: dict[int | str, array[float]] = {}
        #: rank (or file) -> its first step-timing line: the event, or where the key is the line's
        #: own file (a per-rank file whose loop prints no rank) and the line is kept by reference,
        #: its place (``places.own_place``, asked by :mod:`.merge`; made an event again when quoted:
        #: :meth:`step_line`).  Only the stragglers' lines are quoted: every other rank's event was
        #: ~250 bytes with its integers and float, 25 MB at 100,000 per-rank files.  A step line's
        #: event depends on its text alone (``FileParser.step_event``)
        self.step_evidence: dict[int | str, E.Event | int] = {}
        self._errors: tuple[tuple[tuple[str, int], ...], list[E.Event]] | None = None
        #: (launcher rank or None, file) -> what that rank did there (:mod:`.tracks`)
        self.tracks: dict[tuple[int | None, str], Track] = {}
        #: derived views memoised for the facts (:mod:`.members`); rebuilt when the model grows
        self.memo: dict[str, tuple[int, object]] = {}
        self._source_hosts: tuple[int, dict[str, str]] | None = None
        self._ip_hosts: tuple[int, dict[str, str]] | None = None
        #: ring orders, one tuple per distinct order (:func:`_h_ring`)
        self._orders: dict[tuple[int, ...], tuple[int, ...]] = {}
        #: what ``watch`` knows beyond the lines (when each process was last heard of); None elsewhere
        self.live: LiveView | None = None
        # the analyze fast path (see ``touch``, ``conn_seen``): "host:pid" text -> (process, key);
        # (comm, "host:pid", connection text) -> lines counted since the first, and what it folds into
        self._hp: dict[str, tuple[Process, tuple[str, int | None]]] = {}
        self._conn_n: dict[tuple[str | None, str, str], int] = {}
        self._conn_to: dict[tuple[str | None, str, str], tuple[Process, Comm, int, str, bool, bool]] = {}
        #: the same of the generation before (:data:`MAX_CONN_TEXTS`): a text met again goes back
        self._old_n: dict[tuple[str | None, str, str], int] = {}
        self._old_to: dict[tuple[str | None, str, str], tuple[Process, Comm, int, str, bool, bool]] = {}
        #: the Flight Recorder dumps among the inputs (:mod:`.flight`); None when there are none
        self.flight: FlightRecords | None = None
        #: rank states and hop aggregates over all communicators (for their bounds)
        self.n_ranks = 0
        self.n_hops = 0
        #: lines whose process, communicator, rank or hop was past its bound (not tracked)
        self.untracked: Counter[str] = Counter()
        #: the rank state the last ``Init timings`` line went to, the process the last evidence
        #: line went to (:meth:`placed`)
        self._timed: RankState | None = None
        self._evid: Process | None = None
        #: the rank state the last Init START line went to (:meth:`placed`)
        self._begun: RankState | None = None
        #: (file, host, pid) of the Init lines (``comm_init``) no rank state says were printed
        #: there: a line with no rank, a second START of a rank, a COMPLETE line replaced by
        #: another process's, a rank past ``MAX_RANKS``.  With the rank states, every process
        #: that began an init (the phase of its lines: ``facts.knowledge``) without keeping
        #: the events (~1.5 KB a rank, six lines: ``UNREAD_KINDS``)
        self.init_aside: set[tuple[str | None, str | None, int | None]] = set()

    # ------------------------------------------------------------------ building
    def add_source(self, source: str, lines: int = 0) -> None:
        if source not in self._source_index:
            self._source_index[source] = len(self.sources)
            self.sources.append(source)
        self.lines += lines

    def add(self, ev: E.Event) -> None:
        """Fold one event into the model."""
        kind = ev.kind
        self.kind_counts[kind] += 1
        problem = ev.is_problem  # a property: asked once here, for the process and the track too
        proc = self._process(ev, problem) if (ev.pid is not None or ev.host is not None
                                              or ev.level in _NCCL_LEVELS) else None
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, ev, proc)
            if proc is not None and kind in _EVIDENCE_KINDS:
                proc.own_said()[kind] = self._said(proc, ev)
        if problem or kind in TRACKED:
            key = (ev.rank, ev.source)
            t = self.tracks.get(key)
            if t is None:
                t = self.tracks[key] = Track(ev.rank, ev.source)
            t.see(ev, kind, problem)
        if (kind in HIGH_VOLUME or kind in self.drop) and not problem and not (
                kind in KEPT_IF and self._kept_if(kind, ev.text)):  # the text only where KEPT_IF reads it
            return
        bucket = self.events.get(kind)
        if bucket is None:
            bucket = self.events[kind] = []
        if len(bucket) < KEEP_PER_KIND:
            bucket.append(ev)
        else:
            self.folded[kind] += 1

    #: see :meth:`placed`
    placed_kinds = PLACED_KINDS

    def _said(self, p: Process, ev: E.Event) -> E.Event | int:
        """What ``p`` keeps of evidence line ``ev`` (being added): its place or the event (:meth:`_place_of`)."""
        self._evid = p
        if ev._text.__class__ is not int:  # type: ignore[attr-defined]  # the parse path: placed() places it
            return ev
        at = self._place_of(p.source, ev)
        return ev if at is None else at

    def _place_of(self, source: str, ev: E.Event) -> int | None:
        """The place of line ``ev`` of ``source`` (being added) where it already keeps its text by
        reference (a line replayed or merged) and the model keeps no event of it; else None: its
        event is kept (and :meth:`placed` may replace it by its place once the parser has it)."""
        if ev._text.__class__ is int and self._unkept(ev.kind, ev.is_problem):  # type: ignore[attr-defined]
            return place(source, ev)
        return None

    def _unkept(self, kind: str, problem: bool) -> bool:
        """Whether an event of ``kind`` being added is not kept among :attr:`events` (as ``add``
        decides; ``KEPT_IF`` reads no kind a process keeps as evidence)."""
        return ((kind in HIGH_VOLUME or kind in self.drop) and not problem) or \
            len(self.events.get(kind, ())) >= KEEP_PER_KIND

    def placed(self, ev: E.Event) -> None:
        """The parser's word that ``ev``, just added, keeps its text by reference now: its process
        (where it is evidence) or its rank state (an ``Init timings`` line) keeps the line's place
        instead of the event where nothing else keeps the event (:attr:`events`): ~220 bytes a
        line, nine lines a rank (:mod:`ncclsleuth.parse.again`)."""
        bucket = self.events.get(ev.kind)
        if bucket and bucket[-1] is ev:  # kept: add just appended it
            return
        # where ``add`` has just put it: the rank state of the last Init timings or START line, or
        # the process of the last evidence line (asked by identity first: an Init COMPLETE line,
        # half of the comm_init lines, is nobody's)
        kind = ev.kind
        owner: Process | RankState | None
        if kind == "init_timings":
            owner = self._timed
            held = owner is not None and owner.timed is ev
        elif kind == "comm_init":
            owner = self._begun
            held = owner is not None and owner.began is ev
        else:
            owner = self._evid
            held = owner is not None and ev in owner.said.values()  # by identity: events have no __eq__
        if held:
            owner.keep_places((id(ev),))  # type: ignore[union-attr]  # held: not None

    def step_sample(self, key: int | str, ms: float | None) -> None:
        """A step line of rank (or file) ``key`` that took ``ms``, given without its event: what
        ``add`` does with a ``step_time`` event that has no host, pid or level (no process, no
        problem, not tracked, not kept: counted and timed).  The parser gives a rank's first
        sampled step line as its event (the one the model quotes), the others so."""
        self.kind_counts["step_time"] += 1
        if ms is not None:
            _step(self, key, ms, None)

    def step_line(self, key: int | str) -> E.Event:
        """The event of rank (or file) ``key``'s first step-timing line, made again from the line
        where the model keeps its place)."""
        return as_event(key if isinstance(key, str) else None, self.step_evidence[key], "step_time")

    def add_conn(self, source: str, line: int, host: str, pid: int, src: str, dst: str, via: str,
                 direction: str | None = None) -> str | None:
        """A ``Channel NN/M : a[x] -> b[y] [send|receive] via ...`` line, folded without an event
        object; the key of the communicator its hop was counted in (:meth:`conn_comm`).

        Equivalent to ``add(ChannelConn(...))`` (tests compare the two); the analyze fast
        path uses it for the most numerous line of an INFO log.
        """
        return self._conn(source, line, host, pid, src, dst, via, direction)[0]

    def _conn(self, source: str, line: int, host: str, pid: int, src: str, dst: str, via: str,
              direction: str | None) -> tuple[str | None, int | None, str, str | None, bool]:
        """:meth:`add_conn`, and what it read of the line: (communicator, hop key, label, net, gdr),
        for :meth:`add_conn_first` to remember without reading the line again."""
        self.kind_counts["channel_conn"] += 1
        key = (host, pid)
        p = self.processes.get(key)
        if p is None and self._room("processes", len(self.processes), MAX_PROCESSES):
            p = self.processes[key] = Process(host, pid, source, first_line=line)
        if p is not None:
            p.last_line, p.last_kind = line, "channel_conn"
        label, net, gdr = _via(via)
        a, b = int(src.partition("[")[0]), int(dst.partition("[")[0])
        comm_key = self.conn_comm(key, p, a, b, direction == "receive")
        _count_hop(self, p, comm_key, label, net, gdr, a, b)
        return comm_key, hop_key(a, b), label, net, gdr

    def conn_comm(self, key: tuple[str, int | None], p: Process | None, src: int, dst: int,
                  receive: bool) -> str | None:
        """The communicator of a connection line of process ``key`` (``p``): the one whose init the
        process logged last, unless the line's ranks say it is another of its communicators.

        The ranks of ``a[x] -> b[y]`` are ranks in the line's communicator, the printing rank
        first (``myInfo->rank``), but the peer first on a NET ``[receive]`` line
        (``transport/p2p.cc``, ``net.cc``, ``shm.cc``, 2.7-2.30).  Up to 2.21 a communicator
        connects during its init, so its lines follow its Init START; from 2.22 connections are
        made at the communicator's first collective (``NCCL_RUNTIME_CONNECT``, default 1:
        ``src/init.cc``), after the process may have initialised others (PyTorch's world and
        split communicators), and the lines of the world's hops were counted in the last split:
        ``7[7] -> 8[0] [send]`` in a communicator of 8 ranks.  So when the process's own rank on
        the line is not its rank in the last one (or the peer is past its size) and exactly one
        other of its communicators fits, the line is that one's; ambiguous lines (rank 0 of both)
        stay with the last.
        """
        cur = self._proc_comm.get(key)
        if p is None or len(p.comm_ranks) < 4:  # one communicator (a pair): no other to fit
            return cur
        own, peer = (dst, src) if receive else (src, dst)
        fit = [ck for ck, r in p.comm_pairs() if r == own and self._holds(ck, peer)]
        return fit[0] if len(fit) == 1 else cur

    def _holds(self, comm_key: str, rank: int) -> bool:
        """Whether communicator ``comm_key`` may have rank ``rank`` (its size unknown: it may)."""
        c = self.comms.get(comm_key)
        return c is None or c.nranks is None or 0 <= rank < c.nranks

    def shared_order(self, order: tuple[int, ...]) -> tuple[int, ...]:
        """The one tuple kept for a ring order equal to ``order`` (``order`` itself the first time,
        up to MAX_ORDERS distinct ones): a job's per-host communicators print the same rings, as
        their 32 channels do (the 4,096-rank job: 16,672 rings, 3 distinct orders, 1.8 MB)."""
        mine = self._orders.get(order)
        if mine is None:
            if len(self._orders) < MAX_ORDERS:
                self._orders[order] = order
            return order
        return mine

    #: the parser's retention limit for ``Trees`` lines: edges past it are not even made
    tree_channels = TREE_CHANNELS

    # ------------------------------------------------------------------ the analyze fast path
    # Plain ``host:pid:tid [dev] NCCL INFO`` lines whose shape the parser has decided
    # (ncclsleuth.parse.fastpath): the same effect as ``add`` of their event, without one.

    def _kept_if(self, kind: str, text: str) -> bool:
        """Whether a no-problem line of an unread kind is kept all the same (:data:`KEPT_IF`)."""
        pat = KEPT_IF.get(kind) if kind in self.drop else None
        return pat is not None and pat.search(text) is not None

    def keeps_line(self, kind: str, text: str) -> bool:
        """Whether a plain INFO line of ``kind`` saying ``text`` does more here than count and
        touch its process: :meth:`needs_event`, or a line :data:`KEPT_IF` keeps."""
        return self.needs_event(kind) or self._kept_if(kind, text)

    def needs_event(self, kind: str) -> bool:
        """Whether an INFO line of ``kind`` does more here than count and touch its process
        (a handler reads it, it is kept, or its kind is a problem)."""
        return kind in _HANDLERS or kind in E.ERROR_KINDS or not (kind in HIGH_VOLUME or kind in self.drop)

    def touch(self, line: int, hp: str, kind: str) -> bool:
        """``add`` of a plain INFO event of a kind nothing reads (``needs_event`` False) of the
        process ``hp`` ("host:pid" as printed): False if the process is not known here yet
        (then :meth:`bind` it).  What ``_process`` does for a line with no rank, time or problem."""
        e = self._hp.get(hp)
        if e is None:
            return False
        p = e[0]
        p.last_line, p.last_kind = line, kind
        self.kind_counts[kind] += 1
        return True

    def launched(self, host: str, pid: int, rank: int) -> None:
        """The launcher rank of a line of process (``host``, ``pid``) that was counted or folded
        without an event (:meth:`touch`, :meth:`conn_seen`, :meth:`add_conn`): what ``_process``
        does with the rank of the event the full way makes of it (a line behind ``srun --label``'s
        ``12: ``: :mod:`ncclsleuth.parse.prefixed`).  Nothing for a process past its bound."""
        p = self.processes.get((host, pid))
        if p is not None and p.launcher_rank is None:
            p.launcher_rank = rank

    def bind(self, source: str, line: int, hp: str) -> None:
        """Know the process of ``hp`` ("host:pid"), creating it as ``_process`` would."""
        host, _, pid_text = hp.rpartition(":")
        key = (host, int(pid_text))
        p = self.processes.get(key)
        if p is None:
            if not self._room("processes", len(self.processes), MAX_PROCESSES):
                return  # past the bound: not known, its lines are counted by the untracked
            p = self.processes[key] = Process(host, key[1], source, first_line=line)
        self._hp[hp] = (p, key)

    def conn_seen(self, line: int, hp: str, rest: str) -> bool:
        """A connection line (``rest``: from its source rank on) counted if the same process
        printed the same connection text for the same communicator before (folded by
        :meth:`settle`); False for a first one, which goes to :meth:`add_conn_first`."""
        e = self._hp.get(hp)
        if e is None:
            return False
        k = (self._proc_comm.get(e[1]), hp, rest)
        n = self._conn_n.get(k)
        if n is None:
            n = self._old_n.pop(k, None)
            if n is None:
                return False
            self._conn_to[k] = self._old_to.pop(k)
        self._conn_n[k] = n + 1
        p = e[0]
        p.last_line, p.last_kind = line, "channel_conn"
        return True

    def add_conn_first(self, source: str, line: int, hp: str, rest: str, src: str, dst: str, via: str) -> None:
        """:meth:`add_conn`, remembering what later lines of the same text fold into."""
        if hp not in self._hp:
            self.bind(source, line, hp)
        direction = "receive" if " [receive] " in rest else None
        if hp not in self._hp:  # a process past the bound: counted, not remembered
            host, _, pid_text = hp.rpartition(":")
            self.add_conn(source, line, host, int(pid_text), src, dst, via, direction)
            return
        p, key = self._hp[hp]
        comm_key, hop, label, net, gdr = self._conn(source, line, key[0], key[1], src, dst, via,  # type: ignore[arg-type]
                                                    direction)
        c = (self.comms.get(comm_key) if comm_key else None) or self.comms.get("unknown")
        if c is None or hop is None or hop not in c.hops:  # a communicator or hop past its bound: nothing to fold into
            return
        # later lines of this text are counted while the same communicator is the process's last
        # (``conn_seen``): they fold into the one this line was counted in
        k = (self._proc_comm.get(key), hp, rest)
        if len(self._conn_n) >= MAX_CONN_TEXTS:
            self._rotate()
        self._conn_n[k] = 0
        self._conn_to[k] = (p, c, hop, label, net is not None, gdr)

    def conn_lines(self, source: str, first: int, hp: str, rests: list[str],
                   cuts: dict[str, tuple[tuple[int, int], tuple[int, int], tuple[int, int]]]) -> None:
        """A run of one process's connection lines (from line ``first``; ``rests``: each line's text
        from its source rank on; ``cuts``: where its fields sit in it), as :meth:`conn_seen` and
        :meth:`add_conn_first` of each line in order do it: each distinct text (a peer and
        transport, ~24 channels alike) is looked at once, at its first line, and its other lines
        are counted together.  Line by line where a bound was met (what is tracked then depends
        on the order) or the process is not known here."""
        if self.untracked or hp not in self._hp:
            for i, rest in enumerate(rests):
                self._conn_line(source, first + i, hp, rest, cuts[rest])
            return
        for rest, count in Counter(rests).items():  # in the order of their first lines
            i = rests.index(rest)
            self._conn_line(source, first + i, hp, rest, cuts[rest])
            if count == 1:
                continue
            k = (self._proc_comm.get(self._hp[hp][1]), hp, rest)
            if k in self._conn_n:
                self._conn_n[k] += count - 1
                continue
            # nothing to fold into (a hop past its bound): each line on its own, as it would have
            # been; what that changes (counts) does not depend on the order
            for j in range(i + 1, len(rests)):
                if rests[j] == rest:
                    self._conn_line(source, first + j, hp, rest, cuts[rest])
        p = self._hp[hp][0]
        p.last_line, p.last_kind = first + len(rests) - 1, "channel_conn"

    def _conn_line(self, source: str, line: int, hp: str, rest: str,
                   cut: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]) -> None:
        """What the fast path does with one connection line (``parse.fastpath.fast_line``)."""
        if not self.conn_seen(line, hp, rest):
            (a, b), (c, d), (e, f) = cut
            self.add_conn_first(source, line, hp, rest, rest[a:b], rest[c:d], rest[e:f])

    def settle(self) -> None:
        """End of a file: fold the connection lines counted by :meth:`conn_seen`, and the lines that
        name no process into the one process the file names (:meth:`_fold_unnamed`)."""
        self._fold_unnamed()
        self._fold_conns(self._old_n, self._old_to)
        self._fold_conns(self._conn_n, self._conn_to)
        self._old_n, self._old_to, self._conn_n, self._conn_to = {}, {}, {}, {}
        self._hp.clear()

    def _rotate(self) -> None:
        """Fold the connection texts of the generation before (:data:`MAX_CONN_TEXTS`) and make the
        current one the generation before.

        A folded text met again is counted as its first line was (:meth:`add_conn_first`), as the
        parser without the fast path counts every line.  Why generations: the one file of an
        8,000-rank job held its 16,993 texts, ~2 a rank, to its end (4.1 MB of the build's peak of
        traced objects); held a generation at a time, the texts of the ranks still printing stay.
        At 4,096 texts a generation 5,767 of its 408,000 connection lines (a communicator's two lines
        printed apart from its other 22) were counted again as first lines (22,760 first lines
        against its 16,993 texts), none at 16,384."""
        self._fold_conns(self._old_n, self._old_to)
        self._old_n, self._old_to = self._conn_n, self._conn_to
        self._conn_n, self._conn_to = {}, {}

    def _fold_conns(self, counts: dict[tuple[str | None, str, str], int],
                    into: dict[tuple[str | None, str, str], tuple[Process, Comm, int, str, bool, bool]]) -> None:
        """Add the later lines of each connection text (``counts``, :meth:`conn_seen`) to what its
        first line was counted in (``into``: its communicator's transport and hop, its process's NET
        and GDR counts): sums, so when a fold happens changes nothing."""
        total = 0
        for k, n in counts.items():
            if not n:
                continue
            p, c, hop, label, is_net, gdr = into[k]
            total += n
            c.transports[label] += n
            c.hops[hop] += n * HOP_LINE
            if is_net:
                p.net_conns += n
                p.gdr_conns += n * gdr
        if total:
            self.kind_counts["channel_conn"] += total

    def _fold_unnamed(self) -> None:
        """A file's lines that name no process (PyTorch's ``[rank3]:[I1129 ...]``: no host, no pid)
        are a process of their own while the file is read (``(file, None)``); where the file's other
        lines name one process, and those lines told nothing but a launcher rank that process has or
        lacks, they are that process's: it takes the rank and the other goes.  Kept, it was ~330
        bytes a rank in a folder of per-rank files, and counted against ``MAX_PROCESSES`` (two
        processes a rank).  What reads the rank finds it on the one process of the same file
        (members, the summary); nothing reads the other's lines (``first_line``, ``last_kind``)."""
        named: dict[str, list[Process]] = {}
        unnamed: list[tuple[str, int | None]] = []
        for k, p in self.processes.items():
            if p.pid is not None:
                named.setdefault(p.source, []).append(p)
            elif p.host is None:
                unnamed.append(k)
        for k in unnamed:
            u = self.processes[k]
            into = named.get(u.source, [])
            if len(into) == 1 and u.told_nothing() and into[0].launcher_rank in (None, u.launcher_rank):
                if u.launcher_rank is not None:
                    into[0].launcher_rank = u.launcher_rank
                del self.processes[k]

    def _room(self, what: str, size: int, bound: int) -> bool:
        """Whether one more ``what`` fits under its bound (else the line is counted as untracked)."""
        if size < bound:
            return True
        self.untracked[what] += 1
        return False

    def set_init_aside(self, wheres: Iterable[tuple[str | None, str | None, int | None]]) -> None:
        """Keep ``wheres`` in :attr:`init_aside` (up to ``MAX_PROCESSES``: one a process at most
        where the logs are sane)."""
        for w in wheres:
            if len(self.init_aside) < MAX_PROCESSES:
                self.init_aside.add(w)

    def bounds_met(self) -> list[str]:
        """One sentence per bound that stopped tracking (the report's notices)."""
        bounds = {"processes": MAX_PROCESSES, "communicators": MAX_COMMS, "ranks": MAX_RANKS, "hops": MAX_HOPS}
        return [f"more than {bounds[what]:,} {what} in these logs: {n:,} more line(s) or record(s) counted but not "
                f"tracked one by one (their problem lines are still reported)"
                for what, n in sorted(self.untracked.items())]

    def _process(self, ev: E.Event, problem: bool | None = None) -> Process | None:
        """The process of ``ev`` (created at its first line), its last line that one
        (``problem``: ``ev.is_problem``, where the caller has asked it)."""
        key = (ev.host or ev.source, ev.pid)  # _pkey, inline: every event with a process
        p = self.processes.get(key)
        if p is None:
            if not self._room("processes", len(self.processes), MAX_PROCESSES):
                return None
            p = self.processes[key] = Process(ev.host, ev.pid, ev.source, first_line=ev.line)
        p.last_line, p.last_kind = ev.line, ev.kind
        if ev.rank is not None and p.launcher_rank is None:
            p.launcher_rank = ev.rank
        if ev.is_problem if problem is None else problem:
            p.errors += 1
            if p.first_error is None:
                p.first_error = ev
        return p

    def comm(self, key: str) -> Comm:
        c = self.comms.get(key)
        if c is None:
            c = Comm(key)
            if self._room("communicators", len(self.comms), MAX_COMMS):
                self.comms[key] = c  # else a communicator of this line only, not kept
        return c

    def current_comm(self, ev: E.Event) -> Comm | None:
        key = self._proc_comm.get(_pkey(ev))
        return self.comms.get(key) if key else None

    # ------------------------------------------------------------------ queries
    def of(self, *kinds: str) -> list[E.Event]:
        out: list[E.Event] = []
        for k in kinds:
            out.extend(self.events.get(k, ()))
        return out

    def error_events(self) -> list[E.Event]:
        """Kept events that are errors, in input order (memoised: facts and the report ask
        for them several times, and a 16,384-rank job keeps ~10^6 events)."""
        key = tuple((k, len(v)) for k, v in self.events.items())
        if self._errors is None or self._errors[0] != key:
            # each kind's lines a run in order, merged (:meth:`in_order`): a sort made an
            # order_key tuple a line (~90 bytes while it ran), an int a line still scatters the
            # heap's small blocks (per rank 9.2 -> 9.4 KiB of peak RSS on 4,096 per-rank files)
            out = [ev for _, ev in self.in_order([ev for evs in self.events.values() for ev in evs if ev.is_problem])]
            self._errors = (key, out)
        return list(self._errors[1])

    def source_hosts(self) -> dict[str, str]:
        """File -> host, for files whose processes all ran on one host (a per-rank log):
        PyTorch lines carry no host, but the NCCL lines of the same file do."""
        if self._source_hosts is None or self._source_hosts[0] != len(self.processes):
            seen: dict[str, set[str]] = {}
            for p in self.processes.values():
                if p.host:
                    seen.setdefault(p.source, set()).add(p.host)
            self._source_hosts = (len(self.processes), {s: next(iter(h)) for s, h in seen.items() if len(h) == 1})
        return self._source_hosts[1]

    def ip_hosts(self) -> dict[str, str]:
        """IP address -> host, from the addresses each process's bootstrap and socket
        interfaces bound; an address seen on two hosts (docker0's 172.17.0.1, loopback)
        names none of them."""
        if self._ip_hosts is None or self._ip_hosts[0] != len(self.processes):
            seen: dict[str, set[str]] = {}
            for p in self.processes.values():
                if not p.host:
                    continue
                for i in (*p.bootstrap, *p.socket_ifaces):
                    if i.addr:
                        addr = i.addr.partition("<")[0].partition("%")[0]
                        seen.setdefault(addr, set()).add(p.host)
            self._ip_hosts = (len(self.processes), {a: next(iter(h)) for a, h in seen.items()
                                                    if len(h) == 1 and not a.startswith("127.") and a != "::1"})
        return self._ip_hosts[1]

    def order_int(self, ev: E.Event) -> int:
        """:meth:`order_key` as one int (file index << ``ORDER_LINE_BITS`` | line)."""
        return self._source_index.get(ev.source, len(self.sources)) << ORDER_LINE_BITS | ev.line

    def in_order(self, evs: list[E.Event]) -> Iterable[tuple[int, E.Event]]:
        """(:meth:`order_int`, event) of each of ``evs`` in input order, stably.  Events come in
        runs already in order (each kind's are kept in input order: an ``any`` of two kinds is two
        runs): up to ``MERGE_RUNS`` runs are merged, holding a key a run, where ``sort`` made a key
        of every event (an ``order_key`` tuple: ~90 bytes a line while it ran, four a rank on 4,096
        per-rank files with the watchdog's lines: the rule step's peak).  Each key is made once,
        into an array (8 bytes a line)."""
        if len(evs) <= SORT_BELOW:  # a few: sorted (what a sort holds is nothing here)
            keyed = [(k, i) for i, k in enumerate(map(self.order_int, evs))]
            keyed.sort()
            return [(k, evs[i]) for k, i in keyed]
        keys = array("q", map(self.order_int, evs))
        cuts = [0, *(i for i, (a, b) in enumerate(zip(keys, keys[1:]), 1) if b < a), len(keys)]
        if len(cuts) == 2:
            return zip(keys, evs)
        if len(cuts) > MERGE_RUNS + 1:
            return ((keys[i], evs[i]) for i in sorted(range(len(evs)), key=keys.__getitem__))
        runs = (zip(keys[a:b], range(a, b)) for a, b in zip(cuts, cuts[1:]))
        return ((k, evs[i]) for k, i in heapq.merge(*runs))

    def source_index(self) -> Mapping[str, int]:
        """File -> its position in :attr:`sources` (the table itself: it only grows)."""
        return self._source_index

    def order_key(self, ev: E.Event) -> tuple[int, int]:
        return (self._source_index.get(ev.source, len(self.sources)), ev.line)

    def order_at(self, source: str, line: int) -> tuple[int, int]:
        """:meth:`order_key` of the event of line ``line`` of ``source``."""
        return (self._source_index.get(source, len(self.sources)), line)

    @property
    def hosts(self) -> list[str]:
        return sorted({p.host for p in self.processes.values() if p.host})

    def nccl_versions(self) -> dict[str, list[Process]]:
        out: dict[str, list[Process]] = {}
        for p in self.processes.values():
            if p.nccl_version:
                out.setdefault(p.nccl_version, []).append(p)
        return out


# ---------------------------------------------------------------------- handlers

_VIA: dict[str, tuple[str, str | None, bool]] = {}


def _via(via: str) -> tuple[str, str | None, bool]:
    """(hop label, net name, GDR) of a ``via`` text, memoised: a log has a handful of them."""
    hit = _VIA.get(via)
    if hit is None:
        f = via_fields(via)
        t = f.get("transport", "")
        net = f.get("net") if t == "NET" else None
        hit = (t if t != "NET" else f"NET/{net}", net, bool(f.get("gdr", False)))
        if len(_VIA) < 10_000:
            _VIA[via] = hit
    return hit



def _h_version(m: JobModel, ev: E.NcclVersion, p: Process | None) -> None:
    if p is None:
        if len(m.versions_unattached) < KEEP_PER_KIND:  # (the rest are counted in kind_counts)
            m.versions_unattached.append(ev)
        return
    p.nccl_version, p.cuda_version = ev.version, ev.cuda


def _h_env(m: JobModel, ev: E.EnvSetting, p: Process | None) -> None:
    if p is not None:
        p.set_env(((ev.name, ev.value),))
        p.own_said()["env:" + ev.name] = m._said(p, ev)


def _h_bootstrap(m: JobModel, ev: E.BootstrapIface, p: Process | None) -> None:
    if p is not None:
        p.bootstrap = ev.ifaces


def _h_socket(m: JobModel, ev: E.NetSocketIfaces, p: Process | None) -> None:
    if p is None or not ev.ifaces:
        return
    if "Using interface" in ev.text:  # NCCL 2.3 prints one "NET : Using interface" line per interface
        p.socket_ifaces = p.socket_ifaces + ev.ifaces
        for i in ev.ifaces:
            if "iface:" + i.name not in p.said:
                p.own_said()["iface:" + i.name] = m._said(p, ev)
    else:
        p.socket_ifaces = ev.ifaces
    if "net_socket_ifaces" not in p.said:
        p.own_said()["net_socket_ifaces"] = m._said(p, ev)


def _h_ib(m: JobModel, ev: E.NetIbDevices, p: Process | None) -> None:
    if p is not None:
        p.ib_devices = ev.devices
        if ev.oob is not None and not p.bootstrap:
            p.bootstrap = (ev.oob,)


def _h_ib_none(m: JobModel, ev: E.Event, p: Process | None) -> None:
    if p is not None:
        p.ib_none = True


def _h_ibverbs(m: JobModel, ev: E.Event, p: Process | None) -> None:
    if p is not None:
        p.ibverbs_missing = True


def _h_net(m: JobModel, ev: E.NetSelected, p: Process | None) -> None:
    if p is not None:
        p.network = ev.network


def _h_plugin(m: JobModel, ev: E.NetPlugin, p: Process | None) -> None:
    if p is not None and ev.status == "loaded" and ev.name:
        p.plugins += (ev.name,)


def _comm_key(ev: E.CommInit | E.InitTimings | E.CommInfo) -> str:
    cid = getattr(ev, "comm_id", None)
    if cid:
        return cid
    return f"nranks={ev.nranks}" if ev.nranks is not None else "comm"


def _rank(m: JobModel, key: str, r: int, ev: E.Event) -> RankState:
    c = m.comm(key)
    st = c.ranks.get(r)
    if st is None:
        st = RankState(key, r, host=ev.host, pid=ev.pid)
        if m.comms.get(key) is c and m._room("ranks", m.n_ranks, MAX_RANKS):
            c.ranks[r] = st  # else a rank state of this line only, not kept
            m.n_ranks += 1
    return st


def _h_init(m: JobModel, ev: E.CommInit, p: Process | None) -> None:
    if ev.comm_rank is None:
        m.set_init_aside(((ev.source, ev.host, ev.pid),))
        return
    key = _comm_key(ev)
    c = m.comm(key)
    if ev.nranks is not None:
        c.nranks = ev.nranks
    st = _rank(m, key, ev.comm_rank, ev)
    st.nranks, st.cuda_dev, st.bus_id = ev.nranks, ev.cuda_dev, ev.bus_id
    held = True  # whether the state keeps where this line was printed
    if ev.phase == "START" or ev.phase == "INFO":
        if st.began is None:  # its place where the line is of the process the state was made for
            m._begun = st
            st.begin(ev, m._place_of(ev.source, ev) if ev.host == st.host and ev.pid == st.pid else None)
        else:  # a second START of this rank
            held = (ev.source, ev.host, ev.pid) in st.init_wheres()
    elif ev.phase == "COMPLETE":
        before = st.init_wheres() if st.done is not None else ()  # a second COMPLETE replaces the first
        st.complete = _complete(st, ev)  # (its where is this line's)
        if before:
            m.set_init_aside(w for w in before if w not in st.init_wheres())
    else:
        held = False
    if not held or c.ranks.get(ev.comm_rank) is not st:
        m.set_init_aside(((ev.source, ev.host, ev.pid),))
    if p is not None:
        p.add_comm_rank(key, ev.comm_rank)
        m._proc_comm[_pkey(ev)] = key  # per process: as bounded as the processes


def _h_timings(m: JobModel, ev: E.InitTimings, p: Process | None) -> None:
    if ev.comm_rank is None:
        return
    key = m._proc_comm.get(_pkey(ev)) or _comm_key(ev)
    st = m._timed = _rank(m, key, ev.comm_rank, ev)
    st.time(ev, m._place_of(st.source, ev) if st.source is not None else None)


def _h_info(m: JobModel, ev: E.CommInfo, p: Process | None) -> None:
    key = m._proc_comm.get(_pkey(ev))
    if key and ev.comm_rank is not None:
        st = _rank(m, key, ev.comm_rank, ev)
        st.local_rank, st.nnodes = ev.local_rank, ev.nnodes


def _h_ring(m: JobModel, ev: E.Ring, p: Process | None) -> None:
    c = m.current_comm(ev)
    if c is None and ev.order:  # no Init line in the excerpt: keep the ring anyway
        c = m.comm("unknown")
        c.nranks = c.nranks or len(ev.order)
    if c is not None and ev.order:
        c.rings[ev.channel] = m.shared_order(ev.order)
        c.graph_event = c.graph_event or ev
        c.ring_truncated = c.ring_truncated or ev.truncated


def _h_trees(m: JobModel, ev: E.Trees, p: Process | None) -> None:
    c = m.current_comm(ev) or m.comm("unknown")
    if c is not None:
        for e in ev.edges:
            if e.channel < TREE_CHANNELS and _INT64[0] <= min(e.me, e.up) and max(e.me, e.up) <= _INT64[1]:
                pairs = c.trees.get(e.channel)
                if pairs is None:
                    pairs = c.trees[e.channel] = array("q")
                pairs.append(e.me)
                pairs.append(e.up)
        c.graph_event = c.graph_event or ev


#: what an ``array("q")`` holds (a rank past it, in a damaged or made-up line, is not an edge)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def tree_pairs(pairs: array[int]) -> Iterator[tuple[int, int]]:
    """(rank, parent) of each edge of a communicator's channel (:attr:`Comm.trees`)."""
    it = iter(pairs)
    return zip(it, it)


def _h_conn(m: JobModel, ev: E.ChannelConn, p: Process | None) -> None:
    label = ev.transport if ev.transport != "NET" else f"NET/{ev.net}"
    _count_hop(m, p, m.conn_comm(_pkey(ev), p, ev.src, ev.dst, ev.direction == "receive"), label,
               ev.net if ev.transport == "NET" else None, ev.gdr, ev.src, ev.dst)


def _count_hop(m: JobModel, p: Process | None, comm_key: str | None, label: str, net: str | None, gdr: bool,
               src: int, dst: int) -> None:
    """One connection line: the process's NET/GDR counts and its communicator's hop aggregate."""
    if p is not None and net is not None:
        p.net_conns += 1
        p.gdr_conns += int(gdr)
    c = (m.comms.get(comm_key) if comm_key else None) or m.comm("unknown")
    c.transports[label] += 1
    key = hop_key(src, dst)
    if key is None:
        return
    v = c.hops.get(key)
    if v is None:
        kind = c.hop_kind(label, net, gdr)
        if kind is not None and m._room("hops", m.n_hops, MAX_HOPS):
            c.hops[key] = HOP_LINE | kind
            m.n_hops += 1
    else:
        c.hops[key] = v + HOP_LINE


def _h_failure_head(m: JobModel, ev: E.FailureBlockHead, p: Process | None) -> None:
    m._block = {"block": ev.block, "source": ev.source, "line": ev.line, "fields": {}, "events": {}}
    if len(m.failure_blocks) < KEEP_PER_KIND:
        m.failure_blocks.append(m._block)


def _h_failure_field(m: JobModel, ev: E.FailureField, p: Process | None) -> None:
    if m._block is None or ev.name in m._block["fields"]:
        m._block = {"block": m._block["block"] if m._block else "failures", "source": ev.source,
                    "line": ev.line, "fields": {}, "events": {}}
        if len(m.failure_blocks) < KEEP_PER_KIND:
            m.failure_blocks.append(m._block)
    m._block["fields"][ev.name] = (ev.value, ev.line)
    if ev.name in ("rank", "exitcode", "traceback"):  # the lines a finding about this worker quotes
        m._block["events"][ev.name] = ev


def _h_step(m: JobModel, ev: E.StepTime, p: Process | None) -> None:
    if ev.ms is not None:
        _step(m, ev.rank if ev.rank is not None else ev.source, ev.ms, ev)


def _step(m: JobModel, key: int | str, ms: float, ev: E.StepTime | None) -> None:
    """Step time ``ms`` of rank (or file) ``key``; ``ev``: its line's event, the rank's evidence if
    it is its first (None: a line given without its event, never a rank's first: ``step_sample``)."""
    times = m.step_times.get(key)
    if times is None:
        if not m._room("ranks", len(m.step_times), MAX_RANKS):
            return
        times = m.step_times[key] = array("d")
    if len(times) < STEP_SAMPLES:
        times.append(ms)
    if ev is not None:
        m.step_evidence.setdefault(key, ev)


def _h_row(m: JobModel, ev: E.NcclTestsRow, p: Process | None) -> None:
    if len(m.nccltests_rows) < KEEP_PER_KIND:
        m.nccltests_rows.append(ev)


_HANDLERS: dict[str, Any] = {
    "nccl_version": _h_version,
    "env_setting": _h_env,
    "bootstrap_iface": _h_bootstrap,
    "net_socket_ifaces": _h_socket,
    "net_ib_devices": _h_ib,
    "net_ib_none": _h_ib_none,
    "ibverbs_missing": _h_ibverbs,
    "net_selected": _h_net,
    "net_plugin": _h_plugin,
    "comm_init": _h_init,
    "init_timings": _h_timings,
    "comm_info": _h_info,
    "ring": _h_ring,
    "trees": _h_trees,
    "channel_conn": _h_conn,
    "failure_block_head": _h_failure_head,
    "failure_field": _h_failure_field,
    "nccltests_row": _h_row,
    "step_time": _h_step,
}
