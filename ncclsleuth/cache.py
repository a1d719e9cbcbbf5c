"""The per-user cache folder and the small JSON files kept in it.

What is cached (Lark's compiled grammar, message templates, parsed rule YAML) is always
derived from files that ship with ncclsleuth or that the user points at, so every
cache can be deleted at any time; a file that cannot be read or parsed is ignored.
"""
from __future__ import annotations

import json
import os
import zlib
from typing import Any


def cache_dir() -> str | None:
    """This user's cache folder (``$XDG_CACHE_HOME/ncclsleuth``, ``~/.cache/ncclsleuth``), or None.

    Lark's grammar cache is a pickle: a folder that another user owns or can write to
    could make this process run their code, so such a folder is not used.
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "ncclsleuth")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return None
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        return None
    return path


def digest(*parts: bytes) -> str:
    """A short key for cache file names: CRC-32 and Adler-32 of each part plus its length.

    Not a cryptographic hash (nothing here needs one) and ~3 ms cheaper at start-up than
    importing hashlib, whose OpenSSL binding loads on import.
    """
    out = []
    for p in parts:
        out.append(f"{zlib.crc32(p):08x}{zlib.adler32(p):08x}{len(p):x}")
    return "-".join(out)


def read_json(path: str) -> Any:
    """The JSON value in ``path``, or None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_text_atomic(path: str, text: str) -> None:
    """Write-then-rename, so that readers see the old file or the new one; errors are ignored."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


class locked:
    """An exclusive ``flock`` on ``path`` for read-merge-write by several processes
    (where the platform has no flock, no lock)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> None:
        try:
            import fcntl

            self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock
