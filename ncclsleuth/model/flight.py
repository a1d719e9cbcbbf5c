"""Flight Recorder dumps in the job model: per (group, sequence id), who did what.

Each dump (one rank's ring, :class:`~ncclsleuth.parse.frdump.FrDump`) is folded, when
its per-file model is merged, into tables that do not grow with the number of entries
times the number of ranks:

* ``rows``: (group, collective seq) -> :class:`Row`: per distinct signature (op, sizes,
  dtypes) the set of ranks that recorded it, the ranks on which it completed or
  started, and one exemplar entry per signature (the lowest rank's: evidence);
* ``order``: record id (the N-th op a process issued, across its groups) -> signature
  -> ranks, for the program-order check across groups;
* ``ranks``: per rank a :class:`RankView` (its file, version, notes, per group the first
  and last seq and the last completed one, and the entry where it stands).

Rank sets are bitmaps (:class:`RankBits`, a bytearray: a 16,384-rank set is 2 KB and
adding a rank is O(1)), signatures and frames are interned by the dump reader, so a
16,384-rank job with 2,000-entry rings costs tens of MB, not the dumps' size.  Folding is
order-independent (sets, lowest-rank exemplars, latest dump per rank), so ``--jobs`` and
the input order do not change results.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field
from typing import Any

from ..events.flight import FrDump, FrOp
from ..util.classes import dataclass


class RankBits:
    """A set of ranks as a bitmap."""

    __slots__ = ("b",)

    def __init__(self, ranks: Any = ()) -> None:
        self.b = bytearray()
        for r in ranks:
            self.add(r)

    def add(self, r: int) -> None:
        i = r >> 3
        b = self.b
        if i >= len(b):
            b.extend(bytes(i + 1 - len(b)))
        b[i] |= 1 << (r & 7)

    def __contains__(self, r: object) -> bool:
        if not isinstance(r, int) or r < 0:
            return False
        i = r >> 3
        return i < len(self.b) and bool(self.b[i] >> (r & 7) & 1)

    def __ior__(self, other: RankBits) -> RankBits:
        a, b = self.b, other.b
        if len(b) > len(a):
            a.extend(bytes(len(b) - len(a)))
        for i, x in enumerate(b):
            if x:
                a[i] |= x
        return self

    def __len__(self) -> int:
        return int.from_bytes(self.b, "little").bit_count()

    def __iter__(self) -> Iterator[int]:
        for i, x in enumerate(self.b):
            while x:
                low = x & -x
                yield (i << 3) + low.bit_length() - 1
                x ^= low

    def __repr__(self) -> str:
        return f"RankBits({list(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return _bits, (bytes(self.b),)


def _bits(b: bytes) -> RankBits:
    r = RankBits()
    r.b = bytearray(b)
    return r


@dataclass
class Row:
    """One collective (group, seq) across the ranks that recorded it."""

    sigs: dict[tuple[Any, ...], RankBits] = field(default_factory=dict)
    done: RankBits = field(default_factory=RankBits)
    started: RankBits = field(default_factory=RankBits)
    #: signature -> (rank, entry) of the lowest rank that recorded it
    ex: dict[tuple[Any, ...], tuple[int, FrOp]] = field(default_factory=dict)

    def ranks(self) -> RankBits:
        out = RankBits()
        for bits in self.sigs.values():
            out |= bits
        return out

    def merge(self, other: Row) -> None:
        for sig, bits in other.sigs.items():
            mine = self.sigs.get(sig)
            if mine is None:
                self.sigs[sig] = _bits(bytes(bits.b))
            else:
                mine |= bits
        self.done |= other.done
        self.started |= other.started
        for sig, ex in other.ex.items():
            if _better(ex[0], ex[1], self.ex.get(sig)):
                self.ex[sig] = ex


@dataclass
class GroupView:
    """One rank's view of one group."""

    desc: str
    first_seq: int
    last_seq: int
    last_done: int | None = None  # highest completed seq
    pending: FrOp | None = None  # earliest not completed
    last: FrOp | None = None


@dataclass
class RankView:
    """What one rank's dump says, summarised."""

    rank: int
    source: str
    form: str
    version: str
    entries: int
    first_record: int | None
    last_record: int | None
    has_frames: bool
    notes: list[str]
    groups: dict[str, GroupView] = field(default_factory=dict)
    #: where the rank stands: its earliest collective not completed (any group), else None
    pending: FrOp | None = None
    last: FrOp | None = None
    #: group name -> the ranks its pg_config lists, where the dump says
    config: dict[str, tuple[int, ...]] = field(default_factory=dict)
    comm_lib: str | None = None

    @property
    def key(self) -> tuple[int, int, str]:
        """Which of two dumps of one rank to keep: the later one, then the one with frames."""
        return (self.last_record if self.last_record is not None else -1, int(self.has_frames), self.source)


@dataclass
class FlightRecords:
    """Every dump of the job, folded (see the module docstring)."""

    ranks: dict[int, RankView] = field(default_factory=dict)
    rows: dict[tuple[str, int], Row] = field(default_factory=dict)
    order: dict[int, dict[tuple[Any, ...], RankBits]] = field(default_factory=dict)
    #: group name -> description (the first non-empty one seen)
    descs: dict[str, str] = field(default_factory=dict)
    #: (rank, source kept, source dropped, the same record): a rank given twice (the pickle
    #: and the JSON form of one dump, or two dumps taken at different times)
    duplicates: list[tuple[int, str, str, bool]] = field(default_factory=list)
    #: dumps whose file name holds no rank (not comparable across ranks)
    unranked: list[str] = field(default_factory=list)
    #: dumps not folded yet (a per-file model's own dump)
    pending: list[FrDump] = field(default_factory=list)

    # ------------------------------------------------------------------ folding
    def fold(self) -> FlightRecords:
        """Fold the dumps not folded yet; returns self."""
        while self.pending:
            self._add(self.pending.pop())
        return self

    def merge(self, other: FlightRecords) -> None:
        """Fold another model's records into these (order-independent)."""
        for d in other.pending:
            self._add(d)
        for view in other.ranks.values():
            self._keep(view)
        for key, row in other.rows.items():
            mine = self.rows.get(key)
            if mine is None:
                self.rows[key] = row
            else:
                mine.merge(row)
        for rid, sigs in other.order.items():
            mine_o = self.order.setdefault(rid, {})
            for sig, bits in sigs.items():
                if sig in mine_o:
                    mine_o[sig] |= bits
                else:
                    mine_o[sig] = bits
        for pg, desc in other.descs.items():
            if desc and not self.descs.get(pg):
                self.descs[pg] = desc
        self.duplicates.extend(other.duplicates)
        self.unranked.extend(other.unranked)

    def _keep(self, view: RankView) -> bool:
        cur = self.ranks.get(view.rank)
        if cur is None:
            self.ranks[view.rank] = view
            return True
        keep, drop = (view, cur) if view.key > cur.key else (cur, view)
        self.ranks[view.rank] = keep
        same = (keep.entries, keep.first_record, keep.last_record) == (drop.entries, drop.first_record,
                                                                       drop.last_record)
        self.duplicates.append((view.rank, keep.source, drop.source, same))
        return keep is view

    def _add(self, d: FrDump) -> None:
        """Fold one dump: per entry a few dict lookups and one byte of a bitmap set in place
        (the rank's byte and bit are the same for all its entries)."""
        if d.rank is None:
            self.unranked.append(d.source)
            return
        r = d.rank
        self._keep(_view(d))
        rows, order, descs = self.rows, self.order, self.descs
        i, bit = r >> 3, 1 << (r & 7)
        pad = bytes(i + 1)

        def mark(bits: RankBits) -> None:
            b = bits.b
            if len(b) <= i:
                b.extend(pad[: i + 1 - len(b)])
            b[i] |= bit

        for op in d.entries:
            pg, sig = op.pg, op.signature
            if op.desc and pg not in descs:
                descs[pg] = op.desc
            o = order.get(op.record_id)
            if o is None:
                o = order[op.record_id] = {}
            bits = o.get(sig)
            if bits is None:
                bits = o[sig] = RankBits()
            mark(bits)
            if op.p2p:
                continue
            key = (pg, op.seq)
            row = rows.get(key)
            if row is None:
                row = rows[key] = Row()
            bits = row.sigs.get(sig)
            if bits is None:
                bits = row.sigs[sig] = RankBits()
            mark(bits)
            state = op.state
            if state == "completed":
                mark(row.done)
            elif state == "started":
                mark(row.started)
            ex = row.ex.get(sig)
            if ex is None or r < ex[0] or (r == ex[0] and op.frames and not ex[1].frames):
                row.ex[sig] = (r, op)

    # ------------------------------------------------------------------ queries
    def groups(self) -> list[str]:
        """Every group name seen, sorted."""
        return sorted({pg for pg, _ in self.rows} | {pg for v in self.ranks.values() for pg in v.groups})

    def members(self, pg: str) -> RankBits:
        """The ranks of a group: what pg_config lists (where it names this group), else the
        ranks whose dumps recorded anything in it."""
        out = RankBits()
        for v in self.ranks.values():
            for r in v.config.get(pg, ()):
                if r >= 0:
                    out.add(r)
        if not len(out):
            for v in self.ranks.values():
                if pg in v.groups:
                    out.add(v.rank)
        return out

    def label(self, pg: str) -> str:
        """A group as people name it: ``default_pg (pg 0)``."""
        desc = self.descs.get(pg, "")
        if pg.startswith("#"):
            return f"pg_id {pg[1:]}" + (f" ({desc})" if desc else "")
        return f"{desc} (pg {pg})" if desc and desc != pg else f"pg {pg}"


def _better(r: int, op: FrOp, cur: tuple[int, FrOp] | None) -> bool:
    """Whether (r, op) is the better exemplar: the lowest rank, and an entry with frames."""
    return cur is None or r < cur[0] or (r == cur[0] and bool(op.frames) and not cur[1].frames)


def _view(d: FrDump) -> RankView:
    assert d.rank is not None
    v = RankView(rank=d.rank, source=d.source, form=d.form, version=d.version, entries=len(d.entries),
                 first_record=min((op.record_id for op in d.entries), default=None),
                 last_record=max((op.record_id for op in d.entries), default=None),
                 has_frames=any(op.frames for op in d.entries), notes=list(d.notes), comm_lib=d.comm_lib)
    names = {op.pg for op in d.entries}
    for key, (_, ranks) in d.pg_config.items():
        if ranks is None:
            continue
        if key in names:
            v.config[key] = ranks
        elif len(d.pg_config) == 1 and len(names) == 1:  # 2.13 gloo: one group, keyed by ''
            v.config[next(iter(names))] = ranks
    for op in sorted(d.entries, key=lambda o: o.record_id):
        if op.p2p:
            continue
        g = v.groups.get(op.pg)
        if g is None:
            g = v.groups[op.pg] = GroupView(op.desc, op.seq, op.seq)
        g.first_seq, g.last_seq = min(g.first_seq, op.seq), max(g.last_seq, op.seq)
        if op.state == "completed":
            g.last_done = op.seq if g.last_done is None else max(g.last_done, op.seq)
        elif g.pending is None:
            g.pending = op
        g.last = op
        if op.state != "completed" and v.pending is None:
            v.pending = op
        v.last = op
    return v


def absorb(flight: FlightRecords | None, other: FlightRecords) -> FlightRecords:
    """``flight`` with ``other`` merged in (a new one when ``flight`` is None)."""
    if flight is None:
        flight = FlightRecords()
    flight.merge(other)
    return flight
