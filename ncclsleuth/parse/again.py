"""An event made again from its line, read again from its file: what a process keeps of the
lines it set its values from, where the model keeps no event of them.

A process's NCCL version, bootstrap interface, network and settings are folded into its fields
as their lines are read; the line itself is kept only to be quoted, by the few facts that find
something wrong with that process.  Past the model's bound on events of a kind (and for the kinds
analyze keeps none of: ``nccl_version``, ``bootstrap_iface``, ``net_selected``), each of those
events lived on only as its process's evidence: six a rank, ~1.4 KB with their integers, at
100,000 ranks 140 MB that no report reads.  The process keeps its line's place instead
(:attr:`ncclsleuth.model.job.Process.said`), and the event is made again from the line when a
fact asks for it (:func:`event`): an NCCL ``INFO`` line with its own prefix (host, pid, thread,
device), whose event depends on nothing but its text.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from .. import events as E
from ..util import reread
from .grammar import ShapeCache

#: events made again and kept (a fact asks one process's lines several times in a row)
_MAX_MADE = 256
_MADE: OrderedDict[tuple[str, int, int, str], E.Event] = OrderedDict()
_LOCK = threading.Lock()


def event(source: str, line: int, where: int, kind: str, shapes: ShapeCache | None = None) -> E.Event:
    """The ``kind`` event of line ``line`` of ``source`` (kept by reference ``where``: see
    :func:`ncclsleuth.util.reread.ref`), made again by the parser from the line read again, with
    the shape cache ``shapes`` (the one the files were read with: warm, its shapes in memory; a
    parser with a fresh cache read the template store from disk for each line, 130 us a line).

    The same object while it is among the last few asked for (facts dedupe evidence by it).
    A line that no longer reads as it did (the file changed) gives an event of the kind whose
    text says so, with no fields of its own: quoted, it says what happened."""
    key = (source, line, where, kind)  # its place and its text's check: a file read again is another key
    with _LOCK:
        got = _MADE.get(key)
        if got is not None:
            _MADE.move_to_end(key)
            return got
    got = _make(source, line, where, kind, shapes)
    with _LOCK:
        _MADE[key] = got
        if len(_MADE) > _MAX_MADE:
            _MADE.popitem(last=False)
    return got


def _make(source: str, line: int, where: int, kind: str, shapes: ShapeCache | None) -> E.Event:
    from .lines import FileParser  # the parser's import chain is not every caller's

    text = reread.line(source, where, line)
    fp = FileParser(source, shapes, keep_text=False, use_catalog=False)  # as analyze read it
    cls = E.REGISTRY[kind]
    if kind == "step_time":
        made = [fp.step_event(line, text)]
    elif kind in ("last_line", "progress"):
        made = [fp.end_event(kind, line, text)]
    else:
        made = [*fp.parse_line(line, text), *fp.finish()]
    for ev in made:
        if type(ev) is cls and ev.line == line:
            ev._text = where  # type: ignore[attr-defined]  # as the model's event was: by reference
            return ev
    return cls(source=source, line=line, text=text)

