"""What inputs that are not log lines mean: a Flight Recorder dump (its entries as value
records, and an entry quoted as evidence), and the lines of NCCL's ``ncclras`` status
report.  The dump records are built by :mod:`ncclsleuth.parse.frdump`."""
from __future__ import annotations

from dataclasses import field
from typing import Any

from ..util.classes import NamedTuple, dataclass
from .base import Event, ev

__all__ = ["RELEASES", "Frame", "FrDump", "FrEntry", "FrOp", "RasReport", "Signature"]

#: FR dump format -> the torch releases that write it (FLIGHT_RECORDER.md §1)
RELEASES = {"1.4": "2.3", "2.1": "2.4", "2.4": "2.5-2.7", "2.9": "2.8", "2.10": "2.9-2.15"}


class Frame(NamedTuple):
    name: str
    file: str
    line: int


class Signature(tuple[Any, ...]):
    """(op, input sizes, output sizes, input dtypes, output dtypes), hashed once: the
    tables look a signature up several times an entry, and a tuple rehashes every time
    (a crafted dump's 256 tensors of 16 dimensions cost 40 us a lookup).  Pickled as a
    plain rebuild, so the hash is computed again in the receiving process (string
    hashes differ between processes)."""

    _h: int

    def __new__(cls, items: Any) -> Signature:
        self = super().__new__(cls, items)
        self._h = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._h

    def __eq__(self, other: object) -> bool:
        return self is other or tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __reduce__(self) -> tuple[Any, ...]:
        return Signature, (tuple(self),)


class FrOp(NamedTuple):
    """One entry of a rank's ring, normalised."""

    pos: int  # 1-based position in the dump's ``entries`` (a finding's "line")
    record_id: int
    pg: str  # the group's name (process_group[0]); "#<pg_id>" where the dump names none
    desc: str  # its description (process_group[1]), e.g. default_pg
    pg_id: int | None
    seq: int  # collective_seq_id (p2p_seq_id for point-to-point ops)
    p2p: bool
    op: str  # all_reduce, broadcast, send, coalesced, ...
    backend: str  # nccl, gloo, ...
    peer: str | None  # "1->2" of a send, "3<-0" of a recv
    #: what every rank of a group must agree on at one sequence number (interned):
    #: (op, input sizes, output sizes, input dtypes, output dtypes)
    signature: tuple[Any, ...]
    state: str  # completed | started | scheduled, as far as the dump can tell
    raw_state: str  # what the entry says
    retired: bool | None
    frames: tuple[Frame, ...]
    created_ns: int | None

    @property
    def in_sizes(self) -> tuple[tuple[int, ...], ...]:
        return self.signature[1]

    @property
    def out_sizes(self) -> tuple[tuple[int, ...], ...]:
        return self.signature[2]

    @property
    def in_dtypes(self) -> tuple[str, ...]:
        return self.signature[3]

    @property
    def out_dtypes(self) -> tuple[str, ...]:
        return self.signature[4]

    @property
    def where(self) -> Frame | None:
        """The caller's frame: the innermost one outside torch itself."""
        for f in self.frames:
            if not _in_torch(f.file):
                return f
        return self.frames[0] if self.frames else None


@dataclass
class FrDump:
    """One rank's dump."""

    source: str
    rank: int | None
    form: str  # pickle | json
    version: str
    entries: list[FrOp]
    #: group name -> (description, global ranks or None when the dump does not say)
    pg_config: dict[str, tuple[str, tuple[int, ...] | None]] = field(default_factory=dict)
    #: the rank's pg_id -> (last enqueued, last started, last completed) collective seq
    pg_status: dict[str, tuple[int | None, int | None, int | None]] = field(default_factory=dict)
    comm_lib: str | None = None
    #: what this dump does differently from the documented format (said in findings)
    notes: list[str] = field(default_factory=list)
    skipped: int = 0

    @property
    def release(self) -> str:
        return RELEASES.get(self.version, "?")


def _in_torch(path: str) -> bool:
    return "/torch/" in path or path.startswith("torch/")




@ev("fr_entry")
class FrEntry(Event):
    """One entry of a rank's Flight Recorder dump, as a finding quotes it.

    ``source`` is the dump file and ``line`` the entry's 1-based position in its
    ``entries`` list (a dump has no lines; line 0 is the dump as a whole)."""

    pg: str | None = None
    seq: int | None = None
    op: str = ""
    state: str = ""


@ev("ras_report")
class RasReport(Event):
    """A line of the status report NCCL's RAS service sends to the ``ncclras`` client
    (2.24+, ``src/ras/client_support.cc``), pasted or saved to a file.

    ``what``: ``dead`` (N processes considered dead), ``incomplete`` (missing data from N
    processes), ``process`` (one such process: pid, host, GPUs), ``comm`` (a communicator's
    ``#g-i (hash) INCOMPLETE|ERROR|MISMATCH`` header), ``comm_missing`` (missing data from N
    ranks of it), ``rank`` (one rank of the section above: rank, GPU, pid, host, and what
    it reported: status, launched operation count, error), ``count`` (N ranks have status
    X / launched up to operation N / reported an error), ``differ`` (ranks have different
    status or operation counts; ``coll``: AllReduce, ...), ``error`` (initialization or
    asynchronous errors on N ranks), ``timeout`` (N timeouts while gathering data),
    ``summary`` (a communicator group row of the table), ``banner`` (the NCCL version)."""

    what: str = ""
    section: str | None = None  # INCOMPLETE | DEAD | ERROR | MISMATCH | TIMEOUT (the heading it is under)
    comm: str | None = None  # the communicator hash of the section, 16 hex digits
    comm_rank: int | None = None
    count: int | None = None
    ops: int | None = None  # "launched up to operation N"
    status: str | None = None  # RUNNING, INIT, FINALIZE, ABORT, NOCOMM; an error name
    coll: str | None = None  # AllReduce, ... ("different AllReduce operation counts")
    peer_host: str | None = None  # the node the line names (an IP address or host name)
    peer_pid: int | None = None
    gpu: str | None = None

    @property
    def is_problem(self) -> bool:
        """Dead processes, missing data, errors and mismatches are problems; the table and
        counts of healthy ranks are not; a line at a problem level is one whatever it says."""
        return self.what in ("dead", "incomplete", "comm", "comm_missing", "error", "differ") or super().is_problem
