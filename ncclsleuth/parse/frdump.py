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

from ..events.flight import RELEASES, Frame, FrDump, FrOp

__all__ = ["MAX_ENTRIES", "RELEASES", "Frame", "FrDump", "FrOp", "normalise", "rank_from_name"]

#: entries read from one dump (the default ring is 2,000; 100x that is not a real dump)
MAX_ENTRIES = 200_000
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
            out.append(_i(tuple(d if isinstance(d, int) and not isinstance(d, bool) else -1 for d in t[:MAX_DIMS])))
    return _i(tuple(out))


def _strs(v: Any) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)):
        return ()
    return _i(tuple(str(x)[:64] for x in v[:MAX_TENSORS]))


def _frames(v: Any) -> tuple[Frame, ...]:
    if not isinstance(v, (list, tuple)):
        return ()
    out = []
    for f in v[:MAX_FRAMES]:
        if isinstance(f, dict):
            out.append(_i(Frame(_i(str(f.get("name", "?"))[:200]), _i(str(f.get("filename", "?"))[:500]),
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
    version = str(data.get("version", "?"))[:16]
    d = FrDump(source=source, rank=rank_from_name(source) if rank is None else rank, form=form,
               version=_i(version), entries=[])
    lib = data.get("comm_lib_version", data.get("nccl_version"))
    d.comm_lib = str(lib)[:64] if lib not in (None, "") else None
    cfg = data.get("pg_config")
    if isinstance(cfg, dict):
        for key, v in list(cfg.items())[:10_000]:
            if isinstance(v, dict):
                d.pg_config[_i(str(key))] = (_i(str(v.get("desc", ""))[:200]), _ranks(v.get("ranks")))
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
    for pos, e in enumerate(raw_entries, 1):
        op = _entry(e, pos, d.pg_status) if isinstance(e, dict) else None
        if op is None:
            d.skipped += 1
        else:
            d.entries.append(op)
    _note_quirks(d, raw_entries)
    return d


def _entry(e: dict[str, Any], pos: int, status: dict[str, tuple[int | None, int | None, int | None]]) -> FrOp | None:
    name = e.get("profiling_name")
    if not isinstance(name, str):
        return None
    backend, _, rest = name.partition(":")
    if not rest:
        backend, rest = "", name
    parts = rest.split(" ", 1)
    opname = parts[0]
    peer = parts[1] if len(parts) > 1 else None
    pg = e.get("process_group")
    pg_name, desc = (str(pg[0]), str(pg[1])) if isinstance(pg, (list, tuple)) and len(pg) >= 2 else ("", "")
    pg_id = _int(e.get("pg_id"))
    if not pg_name:
        pg_name = f"#{pg_id}" if pg_id is not None else "#?"
    is_p2p = e.get("is_p2p")
    p2p = bool(is_p2p) if isinstance(is_p2p, bool) else opname in ("send", "recv")
    seq = _int(e.get("p2p_seq_id") if p2p and "p2p_seq_id" in e else e.get("collective_seq_id", e.get("seq_id")))
    record_id = _int(e.get("record_id"))
    if seq is None or record_id is None:
        return None
    retired = e.get("retired")
    retired = retired if isinstance(retired, bool) else None
    raw_state = str(e.get("state", "?"))[:16]
    st = status.get(str(pg_id)) if pg_id is not None else None
    return FrOp(pos=pos, record_id=record_id, pg=_i(pg_name[:200]), desc=_i(desc[:200]), pg_id=pg_id, seq=seq,
                p2p=p2p, op=_i(opname[:64]), backend=_i(backend[:32]), peer=_i(peer[:32]) if peer else None,
                in_sizes=_sizes(e.get("input_sizes")), out_sizes=_sizes(e.get("output_sizes")),
                in_dtypes=_strs(e.get("input_dtypes")), out_dtypes=_strs(e.get("output_dtypes")),
                state=_state(raw_state, retired, seq, p2p, st), raw_state=_i(raw_state), retired=retired,
                frames=_frames(e.get("frames")), created_ns=_int(e.get("time_created_ns")),
                timeout_ms=_int(e.get("timeout_ms")))


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
        d.notes.append(f"{d.skipped} malformed entr{'y' if d.skipped == 1 else 'ies'} skipped")
