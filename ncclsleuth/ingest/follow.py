"""Following growing files: what was appended to each followed file since the last poll.

A :class:`Follower` owns, per followed file, the byte offset read so far, the partial
last line and the last bytes read.  Each :meth:`Follower.read_changed`:

1. lists the watched folders again only when a folder's mtime changed (new rank files);
2. ``stat``s every followed file and reads only those whose size or mtime changed, and
   only the bytes appended since the last poll (complete lines; the partial last line
   waits for the next poll).  A file whose inode changed (rotated: a new file under the
   old name) is read from its start as a new stream (``Followed.stream`` counts them); a
   file that shrank or was rewritten in place sets :attr:`Follower.rebuild_needed`: what
   was read from it is gone, and the user of the follower starts again (:meth:`reset`).

Polling, not inotify: the optional ``watchdog`` package is not a dependency, and a
``stat`` per file per poll costs about a millisecond per thousand files.  Lines are
decoded and cleaned as the line reader does (:func:`.decode.clean`); a compressed file
cannot be followed byte by byte and is read whole, once per change.
"""
from __future__ import annotations

import os
import stat as _stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import Any

from ..util.classes import dataclass
from .decode import COMPRESSED_MAGIC, MAX_LINE_BYTES, LineReader, clean, looks_binary
from .sources import InputFile, Notice, limits, link_notice, outside

#: Most bytes read from one file in one poll (a huge backlog is read over several polls).
MAX_READ_PER_POLL = 16 << 20
_TAIL = 64
_SKIP = (".png", ".jpg", ".jpeg", ".gif", ".pdf", ".pt", ".pth", ".ckpt", ".safetensors", ".so", ".tar",
         ".zip", ".whl", ".pyc", ".npy", ".npz", ".bin", ".html", ".svg", ".json")


@dataclass
class Followed:
    """One followed file: where reading stopped, and what its user keeps about it (``owner``)."""

    path: str
    dev: int
    ino: int
    size: int = 0
    mtime_ns: int = 0
    offset: int = 0
    partial: bytes = b""
    tail: bytes = b""  # the last bytes read: a file rewritten in place no longer ends with them
    lineno: int = 0
    mode: str | None = None  # None until sniffed: text | compressed | binary
    last_line_wall: float | None = None
    #: streams read under this name: +1 each time the file is replaced (rotated)
    stream: int = 0
    #: the user's per-file state (the watcher's parser and processes); never read here
    owner: Any = field(default=None, repr=False)


@dataclass
class Lines:
    """The complete lines a poll read from one file, and the wall time they are dated."""

    file: Followed
    #: (line number, text) of each segment (a ``\\r`` redraw gives several per line)
    lines: list[tuple[int, str]]
    now: float
    #: complete lines read (what the model's line count grows by)
    count: int
    #: the whole file was read at once (compressed): nothing more comes on this stream
    whole: bool = False


class Follower:
    """Follows PATHS (files and folders); :meth:`read_changed` yields what was appended."""

    def __init__(self, paths: Iterable[str], max_read: int = MAX_READ_PER_POLL, wall: bool = True) -> None:
        """``wall``: times are wall-clock times, so a file's mtime tells when its last line was written."""
        self.paths = list(paths)
        self.max_read = max_read
        self.wall = wall
        self.files: dict[str, Followed] = {}
        self.notices: list[Notice] = []
        self._noticed: set[tuple[str, str]] = set()
        self._dirs: dict[str, int] = {}  # folder -> mtime_ns when last listed
        self._by_inode: dict[tuple[int, int], str] = {}
        self.reads = 0  # files read (their size or mtime changed), over all polls
        self.rebuild_needed = False
        #: the latest time a line was dated in this poll (0.0: nothing grew)
        self.grow_time = 0.0
        self.new_files: list[Followed] = []

    def note(self, path: str, msg: str, severity: str = "warning") -> None:
        """A notice, once per (path, message)."""
        if (path, msg) not in self._noticed:
            self._noticed.add((path, msg))
            self.notices.append(Notice(path, msg, severity))

    # ------------------------------------------------------------------ discovery
    def scan(self) -> None:
        """Follow the files of PATHS not followed yet (``new_files`` lists them, in order)."""
        for p in self.paths:
            try:
                st = os.stat(p)
            except OSError:
                self.note(p, "no such file or folder (yet): watching for it", "info")
                continue
            if _stat.S_ISDIR(st.st_mode):
                self._scan_dir(p, st)
            elif _stat.S_ISREG(st.st_mode):
                self._follow(p, st)

    def _scan_dir(self, root: str, st: os.stat_result) -> None:
        """New files under ``root``, with discovery's bounds: depth, no link out of the folder
        unless asked, each folder once (a link loop is walked once, not forever)."""
        lim = limits()
        real_root = os.path.realpath(root)
        stack = [(root, st, 0)]
        visited: set[tuple[int, int]] = set()
        while stack:
            d, dst, depth = stack.pop()
            if (dst.st_dev, dst.st_ino) in visited:
                continue
            visited.add((dst.st_dev, dst.st_ino))
            known = self._dirs.get(d)
            # unchanged since listed (and not changed in the last second: mtimes are coarse on some
            # file systems, a file created in the same tick as our listing would be missed)
            if known == dst.st_mtime_ns and time.time() - dst.st_mtime > 1.0:
                for sub in [k for k in self._dirs if os.path.dirname(k) == d]:
                    try:
                        stack.append((sub, os.stat(sub), depth + 1))
                    except OSError:
                        self._dirs.pop(sub, None)
                continue
            self._dirs[d] = dst.st_mtime_ns
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError as exc:
                self.note(d, f"cannot read folder: {exc.strerror or exc}, skipped")
                continue
            for e in entries:
                if e.name.startswith("."):
                    continue
                try:
                    est = e.stat()
                    link = e.is_symlink()
                except OSError:
                    continue
                if link and not lim.follow_symlinks:
                    real = outside(real_root, e.path)
                    if real is not None:
                        self.note(e.path, link_notice(e.path, real))
                        continue
                if _stat.S_ISDIR(est.st_mode):
                    if depth >= lim.max_depth:
                        self.note(e.path, f"folder nested more than {lim.max_depth} levels below {root}: not "
                                          "watched (--max-depth to go deeper)")
                        continue
                    stack.append((e.path, est, depth + 1))
                elif _stat.S_ISREG(est.st_mode) and e.path not in self.files:
                    if e.name.lower().endswith(_SKIP):
                        continue
                    self._follow(e.path, est)

    def _follow(self, path: str, st: os.stat_result) -> None:
        if path in self.files:
            return
        old = self._by_inode.get((st.st_dev, st.st_ino))
        if old is not None and old in self.files and not os.path.exists(old):
            # renamed (rotated away) to a name we now see: the same stream, keep reading where we were
            other = self.files.pop(old)
            other.path = path
            self.files[path] = other
            self._by_inode[(st.st_dev, st.st_ino)] = path
            return
        f = self.files[path] = Followed(path, st.st_dev, st.st_ino)
        self._by_inode[(st.st_dev, st.st_ino)] = path
        self.new_files.append(f)

    def reset(self) -> None:
        """Forget everything read (a file was truncated): the next poll re-reads what is on disk."""
        keep = dict(self.files)
        self.files = {}
        self._by_inode = {}
        self.new_files = []
        for path, old in keep.items():
            self._by_inode[(old.dev, old.ino)] = path
            f = self.files[path] = Followed(path, old.dev, old.ino)
            self.new_files.append(f)

    # ------------------------------------------------------------------ reading
    def read_changed(self, now: float) -> Iterator[Lines]:
        """The lines appended to every file whose size or mtime changed; stops early when a
        file was truncated (``rebuild_needed``)."""
        for f in list(self.files.values()):
            try:
                st = os.stat(f.path)
            except OSError:
                continue  # gone (rotated away, deleted): keep what it said
            if (st.st_dev, st.st_ino) != (f.dev, f.ino):  # rotated: a new file under the old name
                f.dev, f.ino = st.st_dev, st.st_ino
                self._by_inode[(f.dev, f.ino)] = f.path
                f.offset, f.partial, f.tail, f.mode, f.size, f.mtime_ns, f.lineno = 0, b"", b"", None, 0, 0, 0
                f.stream += 1
                self.note(f.path, "file replaced (rotated): reading the new one from its start", "info")
            elif st.st_size < f.offset:  # truncated in place: what we parsed is gone
                self.note(f.path, "file truncated: re-read from its start", "info")
                self.rebuild_needed = True
                return
            if st.st_size == f.size and st.st_mtime_ns == f.mtime_ns:
                continue
            self.reads += 1
            got = self._read(f, st, now)
            if self.rebuild_needed:
                return
            if got is not None:
                yield got

    def _read(self, f: Followed, st: os.stat_result, now: float) -> Lines | None:
        """What was appended to ``f`` (complete lines), or None."""
        if f.mode is None:
            try:
                with open(f.path, "rb") as fh:
                    head = fh.read(8192)
            except OSError:
                return None
            if not head:
                return None
            if head.startswith(COMPRESSED_MAGIC):
                f.mode = "compressed"
            elif looks_binary(head):
                f.mode = "binary"
                self.note(f.path, "binary file, not a text log, skipped")
            else:
                f.mode = "text"
        if f.mode == "binary":
            f.size, f.mtime_ns = st.st_size, st.st_mtime_ns
            return None
        if f.mode == "compressed":
            return self._read_compressed(f, st, now)
        k = len(f.tail)
        try:
            with open(f.path, "rb") as fh:
                fh.seek(f.offset - k)
                data = fh.read(k + self.max_read)
        except OSError as exc:
            self.note(f.path, f"cannot read: {exc.strerror or exc}")
            return None
        if data[:k] != f.tail:  # rewritten in place (truncated, then as long again): what we parsed is gone
            self.note(f.path, "file truncated: re-read from its start", "info")
            self.rebuild_needed = True
            return None
        data = data[k:]
        f.offset += len(data)
        if data:
            f.tail = (f.tail + data)[-_TAIL:]
        f.size, f.mtime_ns = (st.st_size, st.st_mtime_ns) if f.offset >= st.st_size else (f.offset, -1)
        if not data:
            return None
        if self.wall and f.offset >= st.st_size:
            now = min(now, st.st_mtime)  # when the last line was written, also for a job watched late
        self.grow_time = max(self.grow_time, now)
        buf = f.partial + data if f.partial else data
        parts = buf.split(b"\n")
        f.partial = parts.pop()
        if len(f.partial) > MAX_LINE_BYTES:  # a line with no end in sight: take what there is
            parts.append(f.partial[:MAX_LINE_BYTES])
            f.partial = b""
            self.note(f.path, f"a line longer than {MAX_LINE_BYTES} bytes was cut")
        lines: list[tuple[int, str]] = []
        for raw in parts:
            f.lineno += 1
            s = raw.decode("utf-8", "replace")
            if "\x00" in s:
                s = s.replace("\x00", "")
            lines.extend((f.lineno, seg) for seg in clean(s))
        if parts:
            f.last_line_wall = now
        return Lines(f, lines, now, len(parts)) if parts else None

    def _read_compressed(self, f: Followed, st: os.stat_result, now: float) -> Lines | None:
        # A compressed log cannot be followed byte by byte: read it whole, once per change.
        if f.offset:  # it changed after we read it: what was read from it must be forgotten
            self.rebuild_needed = True
            return None
        reader = LineReader(InputFile(f.path))
        if self.wall:
            now = min(now, st.st_mtime)
        self.grow_time = max(self.grow_time, now)
        lines = list(reader)
        for no in reader.notices:
            self.note(no.path, no.message, no.severity)
        n = lines[-1][0] if lines else 0
        f.offset, f.size, f.mtime_ns, f.lineno = st.st_size, st.st_size, st.st_mtime_ns, n
        if n:
            f.last_line_wall = now
        return Lines(f, lines, now, n, whole=True)
