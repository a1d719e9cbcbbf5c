"""Evidence by reference: a kept event's line read again from its file when it is asked for.

A 10,000-rank job's model keeps a few events per rank (its Init lines, its timings, the
lines a process's network choice was read from, its watchdog and abort lines), each with
its whole line: about a quarter of what the model holds, read again only for the few
lines a report quotes and the ones the rules look into.  So for a line of a plain local
file read by the block reader whose block is its bytes decoded (valid UTF-8, no CRLF
folded, no NUL removed, no line cut), the parser replaces the event's text by
its place in the file (:func:`ref`: byte offset, length and a check of its text, one integer)
once the model
has the event (``FileParser._detach``); :attr:`ncclsleuth.events.base.Event.text` reads
it back (:func:`line`).  Where nothing but a process's or a rank's field would keep the event
(its evidence lines, its ``Init timings``), the model keeps the place alone and the parser makes
the event again from the line when it is asked for (:mod:`ncclsleuth.parse.again`).

Only files this process registered before parsing (:func:`register`, by ``api`` for the
inputs it found; forked workers inherit the table) are read back, so an engine whose
workers run elsewhere (Dask) keeps every text, and a result always says what its line
says.  A line that can no longer be read as it was (the file was truncated or rewritten
meanwhile) reads as a sentence that says so, not as another line's text: the byte
before it and the one after it must still be line ends, and its hash the one it had.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict

from . import bounded_put

#: the evidence is kept by reference (tests switch it off to compare: the same reports); not
#: where there is no ``os.pread`` (Windows): there every event keeps its text
ENABLED = hasattr(os, "pread")
#: bits of a reference's length (lines longer than 4 MB keep their text), and of the check of
#: its text (its hash, this process's and its forked workers': a line rewritten with other
#: characters in the same place is not taken for the one that was read)
_LEN_BITS = 22
_LEN_MASK = (1 << _LEN_BITS) - 1
_CHECK_BITS = 16
_CHECK_MASK = (1 << _CHECK_BITS) - 1
_LOW = _LEN_BITS + _CHECK_BITS
#: source (as events name it) -> the local path its lines are read again from: the path, or where
#: its name is the source's own last part (nearly always) the index of its folder in ``_DIRS``
#: (100,000 per-rank files' absolute paths were ~100 bytes a rank of the peak; their folders are few)
_PATHS: dict[str, str | int] = {}
_DIRS: list[str] = []
_DIR_INDEX: dict[str, int] = {}
#: source -> (its folder's index, its path joined) for the sources read from last: a join was ~1.5 us
#: of each line read again (52,000 in the 8,000-rank file's rule step); as many as the files kept open
_JOINED: dict[str, tuple[int, str]] = {}
#: open files kept for reading lines back, and the lines read last (the facts and the report
#: read some lines several times: the same rank's lines, the lines they quote)
_OPEN: OrderedDict[str, int] = OrderedDict()
_MAX_OPEN = 64
_LINES: OrderedDict[tuple[str, int], str] = OrderedDict()
#: lines kept read: enough for the lines one finding quotes and one rank's lines read by several
#: facts in a row.  8,192 held ~4 MB at the rule step's peak on the 8,000-rank file (watchdog lines
#: are ~300 characters) and saved 5,000 of its 35,000 reads over 512 or 2,048, with the rule step's
#: time the same within the noise (0.47-0.53 s): ``--jobs 1`` peak RSS 144.9 -> 140.6 MiB there,
#: 4,096 per-rank files 103.7 -> 98.7 MiB
_MAX_LINES = 1024
#: both tables are shared by the threads of a process (a library caller's analyses)
_LOCK = threading.Lock()


def register(source: str, path: str) -> None:
    """Lines of ``source`` may be kept by reference: they are read again from ``path``."""
    if ENABLED:
        with _LOCK:
            _PATHS[source] = _compact(source, path)
            _LINES.clear()  # lines read before came from the file as it was then


def _compact(source: str, path: str) -> str | int:
    """What ``_PATHS`` keeps of ``path`` for ``source``: its folder's index where ``path`` is that
    folder joined with ``source``'s last part (:func:`path_of` joins them back), else ``path``."""
    folder, name = os.path.split(path)
    if not name or _name(source) != name or os.path.join(folder, name) != path:
        return path
    i = _DIR_INDEX.get(folder)
    if i is None:
        i = _DIR_INDEX[folder] = len(_DIRS)
        _DIRS.append(folder)
    return i


def _name(source: str) -> str:
    """The last part of a source's name (``a/b/rank3.log`` -> ``rank3.log``)."""
    return source.rpartition("/")[2].rpartition(os.sep)[2]


def path_of(source: str) -> str | None:
    """The path ``source``'s lines are read again from (None: its events keep their text)."""
    kept = _PATHS.get(source)
    if kept.__class__ is not int:
        return kept  # type: ignore[return-value]  # a path, or None
    hit = _JOINED.get(source)
    if hit is not None and hit[0] == kept:
        return hit[1]
    path = os.path.join(_DIRS[kept], _name(source))
    bounded_put(_JOINED, _MAX_OPEN, source, (kept, path))
    return path


def ref(offset: int, length: int, text: str) -> int | None:
    """The reference of ``text``, ``length`` bytes at byte ``offset`` (None for a line too long to
    refer to)."""
    if length > _LEN_MASK or offset < 0:
        return None
    return (offset << _CHECK_BITS | hash(text) & _CHECK_MASK) << _LEN_BITS | length


def line(source: str, where: int, lineno: int) -> str:
    """The text of line ``lineno`` of ``source`` at reference ``where``, read again."""
    key = (source, where)
    with _LOCK:
        got = _LINES.get(key)
        if got is None:
            got = _LINES[key] = _line(source, where, lineno)
            if len(_LINES) > _MAX_LINES:
                _LINES.popitem(last=False)
    return got


def _line(source: str, where: int, lineno: int) -> str:
    offset, check, length = where >> _LOW, where >> _LEN_BITS & _CHECK_MASK, where & _LEN_MASK
    path = path_of(source)
    data = _read(path, offset - 1 if offset else 0, length + 2) if path is not None else None
    if data is not None:
        head, body = (data[:1], data[1:]) if offset else (b"\n", data)
        raw, after = body[:length], body[length:length + 1]
        if head == b"\n" and after in (b"\n", b"") and len(raw) == length:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None and hash(text) & _CHECK_MASK == check:
                return text
    return f"[line {lineno} of {source} could not be read again: the file changed after it was read]"


def _read(path: str, offset: int, size: int) -> bytes | None:
    fd = _OPEN.get(path)
    try:
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
            _OPEN[path] = fd
            if len(_OPEN) > _MAX_OPEN:
                os.close(_OPEN.popitem(last=False)[1])
        else:
            _OPEN.move_to_end(path)
        return os.pread(fd, size, offset)
    except OSError:
        return None


def forget() -> None:
    """Close the files kept open and forget the lines read (the table of paths stays: kept
    events may still be read)."""
    with _LOCK:
        _LINES.clear()
        while _OPEN:
            os.close(_OPEN.popitem()[1])
