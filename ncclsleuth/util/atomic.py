"""Crash-safe output files: a reader, a full disk or a kill sees the old file or the new one,
never half of one.

The new content goes to a temporary file in the same folder (same file system, so the
rename is atomic), is flushed and ``fsync``'ed, and is renamed over the target; the
folder is ``fsync``'ed so that the rename itself survives a power cut.  On any error the
temporary file is removed and the target is left as it was.  A kill (SIGKILL) between
the write and the rename leaves the target intact and a ``.<name>.*.tmp<suffix>`` file beside it.

Targets that are not regular files (``/dev/stdout``, a FIFO, a terminal) are written in
place: renaming over them would replace the device node.  A symbolic link is followed:
its target is replaced, the link stays.
"""
from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator

from . import proc_field


def _umask() -> int:
    """The process's umask, without changing it (Linux: /proc; elsewhere the usual set-and-restore)."""
    got = proc_field("/proc/self/status", "Umask:")
    if got is not None:
        try:
            return int(got, 8)
        except ValueError:
            pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (best effort: not every platform or file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _special(path: str) -> bool:
    """Whether ``path`` exists and is not a regular file (a device, a FIFO, a socket)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _new_temp(folder: str, name: str) -> str:
    """A new empty file ``.<name>.<random>.tmp<suffix>`` in ``folder``, readable by its owner only
    until it is complete (tempfile's naming, without importing tempfile: it pulls in shutil
    and with it the bz2 and lzma codecs, 6 ms of every ``analyze -o``)."""
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp{os.path.splitext(name)[1]}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """A temporary path to write to in place of ``path``; it replaces ``path`` only when the
    block ends without an error (for writers that want a path: networkx, ...).  The
    temporary name ends with the target's suffix, for writers that choose a format by it."""
    target = os.path.realpath(path) if os.path.islink(path) else path
    if _special(target):
        yield target
        return
    folder = os.path.dirname(os.path.abspath(target))
    tmp = _new_temp(folder, os.path.basename(target))
    try:
        yield tmp
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()  # what open(path, "w") would have given a new file
        os.chmod(tmp, mode)
        with open(tmp, "rb+") as f:  # the writer may not have synced: make the bytes durable before the rename
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def write_file(path: str, data: str | bytes | Iterable[str], encoding: str = "utf-8") -> None:
    """Write ``data`` (text as ``encoding``; or pieces of text, written as they come) to ``path``
    atomically; errors are raised (``OSError``, and whatever making a piece raises)."""
    pieces: Iterable[str | bytes] = (data,) if isinstance(data, (str, bytes)) else data
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            for piece in pieces:
                f.write(piece.encode(encoding) if isinstance(piece, str) else piece)
            f.flush()


__all__ = ["atomic_path", "write_file"]
