"""Sources: what the user pointed at (files, folders, ``-``) as the list of
inputs to read, and the :class:`Notice` each input problem becomes.

Logs are the debris of a crash.  This stage never raises on bad input; it records a
notice (file + what was done) and moves on.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

#: files skipped by their name: not text logs (checkpoints, archives, images, ...)
SKIP_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".pdf", ".pt", ".pth", ".ckpt", ".safetensors", ".so",
                 ".tar", ".zip", ".whl", ".pyc", ".npy", ".npz", ".bin", ".html", ".svg")


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


def discover(paths: Iterable[str]) -> Discovery:
    """Expand files, folders (recursively, sorted, no symlink loops) and ``-``."""
    out = Discovery()
    seen: set[str] = set()
    for p in paths:
        if p == "-":
            out.files.append(InputFile("-"))
            continue
        if not os.path.lexists(p):
            out.notices.append(Notice(p, "no such file or folder"))
            continue
        if os.path.isdir(p):
            _walk(p, out, seen)
        else:
            _add_file(p, out, seen)
    return out


def _walk(root: str, out: Discovery, seen: set[str]) -> None:
    before = len(out.files)
    visited: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=None):
        try:
            st = os.stat(dirpath)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in visited:  # symlink loop: a folder reached twice
            out.notices.append(Notice(dirpath, "folder already visited (symlink loop), skipped"))
            dirnames[:] = []
            continue
        visited.add(key)
        dirnames.sort()
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            _add_file(os.path.join(dirpath, name), out, seen)
    if len(out.files) == before:
        out.notices.append(Notice(root, "folder holds no readable log files"))


def _add_file(path: str, out: Discovery, seen: set[str]) -> None:
    try:
        st = os.stat(path)
    except OSError as exc:
        out.notices.append(Notice(path, f"cannot read: {exc.strerror or exc}, skipped"))
        return
    if not stat.S_ISREG(st.st_mode):
        out.notices.append(Notice(path, "not a regular file (FIFO, device or socket), skipped"))
        return
    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    if path.lower().endswith(SKIP_SUFFIXES):
        out.notices.append(Notice(path, "not a log file (by its extension), skipped", "info"))
        return
    out.files.append(InputFile(path))
