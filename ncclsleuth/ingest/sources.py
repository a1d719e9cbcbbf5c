"""Sources: what the user pointed at (files, folders, ``-``) as the list of
inputs to read, and the :class:`Notice` each input problem becomes.

Logs are the debris of a crash.  This stage never raises on bad input; it records a
notice (file + what was done) and moves on.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import field

from ..util.classes import dataclass

#: files skipped by their name: not text logs (checkpoints, archives, images, ...)
SKIP_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".pdf", ".pt", ".pth", ".ckpt", ".safetensors", ".so",
                 ".tar", ".zip", ".whl", ".pyc", ".npy", ".npz", ".bin", ".html", ".svg")


@dataclass(frozen=True)
class Limits:
    """What reading inputs may cost at most: documented defaults, raised by CLI flags.

    Read from the environment (``NCCLSLEUTH_MAX_DECOMPRESSED``, ``NCCLSLEUTH_MAX_RATIO``,
    ``NCCLSLEUTH_MAX_DEPTH``, ``NCCLSLEUTH_FOLLOW_SYMLINKS``), so that worker processes of
    every engine (forked, spawned, a local Dask cluster) apply the same; :func:`set_limits`
    sets them (the CLI's ``--max-decompressed``, ``--max-ratio``, ``--max-depth``,
    ``--follow-symlinks``).  Each limit that is met is a notice, never silence.
    """

    #: bytes one compressed input may decompress to (gzip/bz2/xz); the rest is not read
    max_decompressed: int = 4 << 30
    #: decompressed bytes per compressed byte, judged once ``ratio_floor`` bytes came out: real
    #: logs stay below (gzip cannot pass ~1,032:1; a flood of one line is ~300:1 in gzip), a
    #: decompression bomb does not
    max_ratio: int = 1000
    ratio_floor: int = 256 << 20
    #: folder levels walked below a given folder
    max_depth: int = 64
    #: follow symbolic links that lead out of the given folder (inside it they are followed)
    follow_symlinks: bool = False


_LIMIT_ENV = {"max_decompressed": "NCCLSLEUTH_MAX_DECOMPRESSED", "max_ratio": "NCCLSLEUTH_MAX_RATIO",
              "max_depth": "NCCLSLEUTH_MAX_DEPTH", "follow_symlinks": "NCCLSLEUTH_FOLLOW_SYMLINKS"}


def limits() -> Limits:
    """The limits in force (the environment's, else the defaults)."""
    env = os.environ
    if not any(v in env for v in _LIMIT_ENV.values()):
        return _DEFAULT_LIMITS
    kw: dict[str, object] = {}
    for name, var in _LIMIT_ENV.items():
        raw = env.get(var)
        if raw is None:
            continue
        if name == "follow_symlinks":
            kw[name] = raw.strip().lower() in ("1", "true", "yes", "on")
        else:
            try:
                kw[name] = max(0, int(raw))
            except ValueError:
                continue
    return Limits(**kw)  # type: ignore[arg-type]


def set_limits(**values: object) -> dict[str, str | None]:
    """Set limits for this process and its workers; returns the previous environment values
    (for :func:`restore_limits`)."""
    before: dict[str, str | None] = {}
    for name, value in values.items():
        var = _LIMIT_ENV[name]
        before[var] = os.environ.get(var)
        os.environ[var] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return before


def restore_limits(before: dict[str, str | None]) -> None:
    for var, value in before.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def size_text(n: int) -> str:
    """``4 GiB``, ``256 MiB``, ``1000 bytes``: a size as the notices say it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


class EngineError(RuntimeError):
    """Inputs or engine unusable (store, scheduler); the message is one line for the user."""


class MissingDependency(EngineError):
    """An optional dependency is needed for what was asked; the message says how to get it."""


@dataclass(frozen=True)
class Notice:
    """One thing the user should know about an input (skipped, repaired, cut)."""

    path: str
    message: str
    severity: str = "warning"  # warning | info

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message, "severity": self.severity}


@dataclass(frozen=True)
class InputFile:
    """A readable input: a path on disk, or ``-`` for standard input."""

    path: str

    @property
    def display(self) -> str:
        return "<stdin>" if self.path == "-" else self.path


@dataclass
class Discovery:
    """What :func:`discover` found: the files to read and the notices for the rest."""

    files: list[InputFile] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)


_DEFAULT_LIMITS = Limits()
#: links out of a folder named one notice each; past this many, one notice counts the rest
MAX_LINK_NOTICES = 20


def discover(paths: Iterable[str]) -> Discovery:
    """Expand files, folders (walked iteratively, sorted, to a bounded depth, no symlink loops,
    no link out of the folder unless asked) and ``-``."""
    out = Discovery()
    seen: set[str] = set()
    lim = limits()
    for p in paths:
        if p == "-":
            out.files.append(InputFile("-"))
            continue
        if not os.path.lexists(p):
            out.notices.append(Notice(p, "no such file or folder"))
            continue
        if os.path.isdir(p):
            _walk(p, out, seen, lim)
        else:
            _add_file(p, out, seen)
    return out


def outside(real_root: str, target: str) -> str | None:
    """Where the symbolic link ``target`` leads when that is out of ``real_root`` (else None)."""
    real = os.path.realpath(target)
    try:
        inside = os.path.commonpath([real_root, real]) == real_root
    except ValueError:  # different drives
        inside = False
    return None if inside else real


def link_notice(path: str, real: str) -> str:
    return (f"symbolic link to {real}, outside the folder given: not followed "
            "(--follow-symlinks to follow it)")


def _walk(root: str, out: Discovery, seen: set[str], lim: Limits) -> None:
    """A folder's files, sorted, then each sub-folder the same way (the order of ``os.walk``),
    with an explicit stack: no depth of nesting can exhaust Python's."""
    before = len(out.files)
    again = 0  # files of the folder read already under another name
    real_root = os.path.realpath(root)
    visited: set[tuple[int, int]] = set()
    links_out = 0
    stack: list[tuple[str, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            st = os.stat(folder)
            key = (st.st_dev, st.st_ino)
            if key in visited:  # symlink loop: a folder reached twice
                out.notices.append(Notice(folder, "folder already visited (symlink loop), skipped"))
                continue
            visited.add(key)
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.notices.append(Notice(folder, f"cannot read folder: {exc.strerror or exc}, skipped"))
            continue
        subs: list[str] = []
        real_folder: str | None = None  # the folder's real path, for the files in it that are no link
        for e in entries:
            try:
                is_dir = e.is_dir()  # follows a link
                is_link = e.is_symlink()
            except OSError:
                is_dir = is_link = False
            if is_link and not lim.follow_symlinks:
                real = outside(real_root, e.path)
                if real is not None:
                    links_out += 1
                    if links_out <= MAX_LINK_NOTICES:
                        out.notices.append(Notice(e.path, link_notice(e.path, real)))
                    continue
            if is_dir:
                subs.append(e.path)
            elif not e.name.startswith("."):
                # a file that is no link is its folder's real path and its name: one realpath a
                # folder, not one a file (a path component's lstat each: 4 of a file's 6 system
                # calls in a folder of 16,384 rank logs)
                real = None
                if not is_link:
                    real_folder = real_folder or os.path.realpath(folder)
                    real = os.path.join(real_folder, e.name)
                again += not _add_file(e.path, out, seen, e, real)
        if subs and depth >= lim.max_depth:
            out.notices.append(Notice(folder, f"{len(subs)} folder(s) nested more than {lim.max_depth} levels below "
                                              f"{root}: not read (--max-depth to go deeper)"))
            continue
        stack.extend((s, depth + 1) for s in reversed(subs))
    if links_out > MAX_LINK_NOTICES:
        out.notices.append(Notice(root, f"{links_out - MAX_LINK_NOTICES} more symbolic link(s) out of the folder, "
                                        "not followed (--follow-symlinks to follow them)"))
    if len(out.files) == before:
        out.notices.append(empty_folder(root, again))


def empty_folder(folder: str, again: int) -> Notice:
    """What a folder that gave no input says: that its ``again`` log files were read already under
    other names (given twice, or through a link), or that it holds none (local and remote)."""
    if again:
        return Notice(folder, f"every log file in it was read already under another name ({again})", "info")
    return Notice(folder, "folder holds no readable log files")


def _add_file(path: str, out: Discovery, seen: set[str], entry: os.DirEntry[str] | None = None,
              real: str | None = None) -> bool:
    """``path`` as an input, unless it is no regular file, was seen under another name or is no
    log by its extension (False only for a file seen already).  ``entry``, ``real``: its folder
    entry (its ``stat`` follows a link, as ``os.stat``) and its real path, where the walk knows them."""
    try:
        st = entry.stat() if entry is not None else os.stat(path)
    except OSError as exc:
        out.notices.append(Notice(path, f"cannot read: {exc.strerror or exc}, skipped"))
        return True
    if not stat.S_ISREG(st.st_mode):
        out.notices.append(Notice(path, "not a regular file (FIFO, device or socket), skipped"))
        return True
    real = real or os.path.realpath(path)
    if real in seen:
        return False
    seen.add(real)
    if path.lower().endswith(SKIP_SUFFIXES):
        out.notices.append(Notice(path, "not a log file (by its extension), skipped", "info"))
        return True
    out.files.append(InputFile(path))
    return True
