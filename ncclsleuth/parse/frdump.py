"""A Flight Recorder dump's plain data -> :class:`FrDump`: every format version, normalised.

What the releases write differs (``shared/reference/torch/FLIGHT_RECORDER.md`` §1, and
``fixtures/real/README.md`` for what 2.13 really writes), and this module is where
those differences end:

* format versions 1.x (torch 2.3: ``seq_id``, no ``p2p_seq_id``, no dtypes, no
  ``pg_status``), 2.1 (2.4), 2.4 (2.5-2.7: all_to_all sizes), 2.9 (2.8: threads,
  ``nccl_version``), 2.10 (2.9-2.15);
* the pickle (``process_group`` a tuple, ``time_discovered_*`` None, frames) and the
  JSON form (lists, 0 for None, no frames, ``pg_status`` values as strings);
* ``state`` that never leaves ``scheduled`` (no timing: every gloo entry, NCCL without
  ``TORCH_NCCL_ENABLE_TIMING``): an entry counts as completed when it is ``retired`` or
  its sequence number is at or below ``pg_status.last_completed_collective`` of its
  group (``pg_status`` is keyed by the rank's own ``pg_id``, not by the group's name);
* ``pg_config`` keyed by ``''`` (2.13 gloo) or with ``ranks`` ``'[]'`` (several groups,
  the DETAIL wrapper): kept as written, and the quirk noted, never trusted blindly.

Values are interned (sizes, dtypes, frames, group names repeat in every entry), so a
2,000-entry ring costs a few hundred KB however many ranks there are.  Malformed entries
are skipped and counted; nothing here raises on bad data.
"""
from __future__ import annotations

import os
import re
from typing import Any

from ..events.flight import RELEASES, Frame, FrDump, FrOp, Signature

__all__ = ["MAX_ENTRIES", "RELEASES", "Frame", "FrDump", "FrOp", "normalise", "rank_from_name"]

#: entries read from one dump (the default ring is 2,000; 100x that is not a real dump)
MAX_ENTRIES = 200_000
#: entries of unusual shape read per dump (each is converted value by value; real dumps
#: have none: this bounds the time a crafted one costs)
MAX_ODD_ENTRIES = 2_000
#: frames kept per entry, tensors per entry, dimensions per tensor
MAX_FRAMES, MAX_TENSORS, MAX_DIMS = 64, 256, 16
_RANK_IN_NAME = re.compile(r"(\d+)$")
_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_INTS = re.compile(r"-?\d+")
_INTERN: dict[Any, Any] = {}
_INTERN_CAP = 200_000


def rank_from_name(path: str) -> int | None:
    """The rank a dump's file name ends with (``nccl_trace_rank_12``, ``rank_3.json``): the
    writer appends the global rank to its prefix; the content does not hold it."""
    name = os.path.basename(path)
    for _ in range(2):  # rank_3.json.gz, trace_0.log
        name = _EXT.sub("", name)
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def _i(x: Any) -> Any:
    """The interned copy of a hashable value (bounded: a hostile dump cannot grow it forever)."""
    hit = _INTERN.get(x)
    if hit is None:
        if len(_INTERN) >= _INTERN_CAP:
            return x
        _INTERN[x] = hit = x
    return hit


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str) and _INTS.fullmatch(v.strip() or "x"):
        return int(v)
    if isinstance(v, float) and v == v and abs(v) < 1 << 62:
        return int(v)
    return None


def _sizes(v: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(v, (list, tuple)):
        return ()
    out = []
    for t in v[:MAX_TENSORS]:
        if isinstance(t, (list, tuple)):
            dims = tuple(t[:MAX_DIMS])
            if not all(type(d) is int for d in dims):
                dims = tuple(d if type(d) is int else -1 for d in dims)
            out.append(_i(dims))
    return _i(tuple(out))


def _text(v: Any, limit: int) -> str:
    """A string field as text, cut; anything else (a hostile dump's huge list) as "?",
    never through ``str()`` of the whole value."""
    if isinstance(v, str):
        return v[:limit]
    return str(v)[:limit] if isinstance(v, (int, float)) else "?"


def _strs(v: Any) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)):
        return ()
    return _i(tuple(_text(x, 64) for x in v[:MAX_TENSORS]))


def _frames(v: Any) -> tuple[Frame, ...]:
    if not isinstance(v, (list, tuple)):
        return ()
    out = []
    for f in v[:MAX_FRAMES]:
        if isinstance(f, dict):
            out.append(_i(Frame(_i(_text(f.get("name", "?"), 200)), _i(_text(f.get("filename", "?"), 500)),
                                _int(f.get("line")) or 0)))
    return _i(tuple(out))


def _ranks(v: Any) -> tuple[int, ...] | None:
    """``'[0, 1, 2, 3]'`` (a string in every release seen) or a list -> the ranks; ``'[]'`` -> None."""
    if isinstance(v, str):
        vals = [int(x) for x in _INTS.findall(v[:1 << 20])]
    elif isinstance(v, (list, tuple)):
        vals = [x for x in (_int(x) for x in v) if x is not None]
    else:
        return None
    return _i(tuple(vals)) if vals else None


def _state(raw: str, retired: bool | None, seq: int, p2p: bool,
           status: tuple[int | None, int | None, int | None] | None) -> str:
    if raw == "completed" or retired is True:
        return "completed"
    if status is not None and not p2p:
        if status[2] is not None and seq <= status[2]:
            return "completed"
        if status[1] is not None and status[1] >= 0 and seq <= status[1]:
            return "started"
    return "started" if raw == "started" else "scheduled"


def normalise(data: dict[str, Any], source: str, form: str, rank: int | None = None) -> FrDump:
    """A dump's plain data (see :mod:`ncclsleuth.ingest.dumps`) as an :class:`FrDump`."""
    version = _text(data.get("version", "?"), 16)
    d = FrDump(source=source, rank=rank_from_name(source) if rank is None else rank, form=form,
               version=_i(version), entries=[])
    lib = data.get("comm_lib_version", data.get("nccl_version"))
    d.comm_lib = _text(lib, 64) if lib not in (None, "") else None
    cfg = data.get("pg_config")
    if isinstance(cfg, dict):
        for key, v in list(cfg.items())[:10_000]:
            if isinstance(v, dict):
                d.pg_config[_i(_text(key, 200))] = (_i(_text(v.get("desc", ""), 200)), _ranks(v.get("ranks")))
    status = data.get("pg_status")
    if isinstance(status, dict):
        for key, v in list(status.items())[:10_000]:
            if isinstance(v, dict):
                d.pg_status[str(key)] = (_int(v.get("last_enqueued_collective")),
                                         _int(v.get("last_started_collective")),
                                         _int(v.get("last_completed_collective")))
    raw_entries = data.get("entries") or []
    if len(raw_entries) > MAX_ENTRIES:
        d.notes.append(f"{len(raw_entries)} entries: only the last {MAX_ENTRIES} were read")
        raw_entries = raw_entries[-MAX_ENTRIES:]
    odd: list[Any] = [MAX_ODD_ENTRIES, {}]  # budget, and the odd values already converted (by identity)
    for pos, e in enumerate(raw_entries, 1):
        op = _entry(e, pos, d.pg_status, odd) if isinstance(e, dict) else None
        if op is None:
            d.skipped += 1
        else:
            d.entries.append(op)
    _note_quirks(d, raw_entries)
    return d


_STATIC: dict[Any, Any] = {}
_SHARED = ("profiling_name", "process_group", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes", "frames")
_DIMS = MAX_TENSORS * MAX_DIMS
_values = dict.values


def _static(e: dict[str, Any]) -> tuple[Any, ...] | None:
    """What an entry shares with the other calls of the same collective from the same
    line (names, group, sizes, dtypes, frames), normalised once per distinct raw value:
    the key is built by C-level conversions only (a 2,000-entry ring holds a few dozen
    distinct ones).  None when the entry is not of the shapes dumps hold (validated by
    the slow path)."""
    get = e.get
    name, pg = get("profiling_name"), get("process_group", ())
    ins, outs = get("input_sizes", ()), get("output_sizes", ())
    idt, odt, frames = get("input_dtypes", ()), get("output_dtypes", ()), get("frames", ())
    try:
        if len(ins) > MAX_TENSORS or len(outs) > MAX_TENSORS or len(frames) > MAX_FRAMES or len(idt) > MAX_TENSORS \
                or len(odt) > MAX_TENSORS or len(pg) > 4 or sum(map(len, ins)) > _DIMS or \
                sum(map(len, outs)) > _DIMS or sum(map(len, frames)) > 8 * MAX_FRAMES:
            return None  # bigger than any real entry (a pickle can share one huge list everywhere)
        key = (name, tuple(pg), tuple(map(tuple, ins)), tuple(map(tuple, outs)), tuple(idt), tuple(odt),
               tuple(map(tuple, map(_values, frames))))
    except (TypeError, AttributeError):
        return None
    hit = _STATIC.get(key)
    if hit is None:
        hit = _normalised(name, pg, ins, outs, idt, odt, frames)
        if hit is not None and len(_STATIC) < _INTERN_CAP:
            _STATIC[key] = hit
    return hit


def _slow_static(e: dict[str, Any]) -> tuple[Any, ...] | None:
    """The same as :func:`_static` for entries of odd shapes, every value checked."""
    get = e.get
    return _normalised(get("profiling_name"), get("process_group"), get("input_sizes"), get("output_sizes"),
                       get("input_dtypes"), get("output_dtypes"), get("frames"))


def _normalised(name: Any, pg: Any, ins: Any, outs: Any, idt: Any, odt: Any, frames: Any) -> tuple[Any, ...] | None:
    """(backend, op, peer, group name, description, signature, frames) of an entry's
    shared values; ``nccl:send 1->2`` is backend nccl, op send, peer 1->2."""
    if not isinstance(name, str):
        return None
    backend, _, rest = name.partition(":")
    if not rest:
        backend, rest = "", name
    parts = rest.split(" ", 1)
    opname = _i(parts[0][:64])
    pg_name, desc = (_i(_text(pg[0], 200)), _i(_text(pg[1], 200))) if isinstance(pg, (list, tuple)) and len(pg) >= 2 \
        else ("", "")
    return (_i(backend[:32]), opname, _i(parts[1][:32]) if len(parts) > 1 else None, pg_name, desc,
            _i(Signature((opname, _sizes(ins), _sizes(outs), _strs(idt), _strs(odt)))), _frames(frames))


def _entry(e: dict[str, Any], pos: int, status: dict[str, tuple[int | None, int | None, int | None]],
           odd: list[Any]) -> FrOp | None:
    st = _static(e)
    if st is None:  # an unusual shape: value by value, a bounded number of times per dump
        seen = odd[1]
        ids = tuple(id(e.get(k)) for k in _SHARED)  # the raw data is alive while it is read: ids are stable
        st = seen.get(ids)
        if st is None:
            if odd[0] <= 0:
                return None
            odd[0] -= 1
            st = seen[ids] = _slow_static(e)
    if st is None:
        return None
    backend, opname, peer, pg_name, desc, sig, frames = st
    get = e.get
    pg_id = get("pg_id")
    if type(pg_id) is not int:
        pg_id = _int(pg_id)
    if not pg_name:
        pg_name = f"#{pg_id}" if pg_id is not None else "#?"
    is_p2p = get("is_p2p")
    p2p = is_p2p if type(is_p2p) is bool else opname in ("send", "recv")
    seq = get("p2p_seq_id") if p2p and "p2p_seq_id" in e else get("collective_seq_id", get("seq_id"))
    if type(seq) is not int:
        seq = _int(seq)
    record_id = get("record_id")
    if type(record_id) is not int:
        record_id = _int(record_id)
    if seq is None or record_id is None:
        return None
    retired = get("retired")
    if type(retired) is not bool:
        retired = None
    raw_state = get("state", "?")
    if type(raw_state) is not str or len(raw_state) > 16:
        raw_state = str(raw_state)[:16]
    created = get("time_created_ns")
    if raw_state == "completed" or retired is True:
        state = "completed"
    else:
        state = _state(raw_state, retired, seq, p2p, status.get(str(pg_id)) if pg_id is not None else None)
    return FrOp(pos, record_id, pg_name, desc, pg_id, seq, p2p, opname, backend, peer, sig, state, _i(raw_state),
                retired, frames, created if type(created) is int else _int(created))


def _note_quirks(d: FrDump, raw: list[Any]) -> None:
    """What this dump does that a reader (or torchfrtrace) could trip over."""
    names = {op.pg for op in d.entries}
    if d.pg_config and names and not names & set(d.pg_config):
        keys = ", ".join(repr(k) for k in sorted(d.pg_config)[:4])
        d.notes.append(f"pg_config is keyed by {keys}, by no group name the entries use")
    if d.pg_config and all(r is None for _, r in d.pg_config.values()):
        d.notes.append("pg_config lists no ranks (group membership not recorded)")
    if d.entries and all(op.raw_state == "scheduled" for op in d.entries):
        d.notes.append("every entry says state 'scheduled' (no timing recorded): completion read from "
                       "'retired' and pg_status")
    if any(op.pg.startswith("#") for op in d.entries):
        d.notes.append("entries name the process group ('', ''): recorded through the "
                       "TORCH_DISTRIBUTED_DEBUG=DETAIL wrapper, groups told apart by pg_id only")
    if d.entries and not any(op.frames for op in d.entries):
        d.notes.append("no stack frames" + (" (the JSON form has none)" if d.form == "json" else ""))
    if d.skipped:
        d.notes.append(f"{d.skipped} malformed entr{'y' if d.skipped == 1 else 'ies'} skipped"
                       + (f" (of an unusual shape, past the first {MAX_ODD_ENTRIES} read)"
                          if d.skipped > MAX_ODD_ENTRIES else ""))
