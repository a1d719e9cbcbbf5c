"""Inputs anywhere: object-store URLs (``s3://``, ``gs://``, ``az://``, ...) through fsspec.

Local paths keep going through :func:`ncclsleuth.ingest.sources.discover` unchanged (``file://``
URLs are turned into local paths first), so a local analysis gives the same report
with or without this module.  A URL becomes a :class:`RemoteInputFile`: a picklable
:class:`~ncclsleuth.ingest.sources.InputFile` that knows how to open itself, so the block
reader (through ``ingest.decode.open_binary``) reads it like a local file, gzip/bz2/xz by
magic bytes included.

Listing is lazy: a prefix is walked one "directory" page at a time (fsspec ``walk``,
built on ``ls``), sorted like the local walk, and each object is yielded as soon as
its page is listed; nothing is listed twice and nothing is read during discovery.

Storage options (endpoint, anonymous access, ...) come from the caller
(``storage_options``) or from fsspec's own environment variables
(``FSSPEC_S3_ENDPOINT_URL=http://...``, ``FSSPEC_GCS_TOKEN=...``); credentials come
from each store's usual environment (``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``,
``AZURE_STORAGE_*``).  fsspec is imported only when a URL is actually read.
"""
from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import Any, BinaryIO

from ..util.classes import dataclass
from .sources import SKIP_SUFFIXES, Discovery, InputFile, MissingDependency, Notice, discover, empty_folder

INSTALL_HINT = "pip install 'ncclsleuth[dask]'"
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
#: fsspec protocols over an archive file: not inputs (as ``.zip``/``.tar`` files are skipped by name)
_ARCHIVES = frozenset({"zip", "tar", "libarchive", "reference", "cached", "blockcache", "filecache", "simplecache"})
#: bytes fetched per request when reading an object (the block reader asks for 1 MiB)
READ_BLOCK = 4 << 20


def url_protocol(path: str) -> str | None:
    """``s3`` for ``s3://b/k``; ``None`` for local paths (``C:\\x`` and ``-`` included)."""
    m = _URL.match(path)
    return m.group(1).lower() if m and len(m.group(1)) > 1 else None


#: fsspec's names of this machine's own file system: read as local paths, so that they pass
#: the same checks (FIFOs, devices, folder walk, links) as paths given without a protocol
LOCAL_PROTOCOLS = ("file", "local")


def is_url(path: str) -> bool:
    p = url_protocol(path)
    return p is not None and p not in LOCAL_PROTOCOLS


def local_path(path: str) -> str:
    """``file:///x/y`` (or ``local:///x/y``) -> ``/x/y``; other paths unchanged."""
    if url_protocol(path) in LOCAL_PROTOCOLS:
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(path)
        return unquote(parts.path) if parts.netloc in ("", "localhost") else unquote("//" + parts.netloc + parts.path)
    return path


def _fsspec():  # type: ignore[no-untyped-def]
    try:
        import fsspec
    except ImportError:
        raise MissingDependency(f"reading URLs needs fsspec: {INSTALL_HINT}") from None
    return fsspec


def require_fsspec() -> None:
    _fsspec()


def options_for(protocol: str, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """fsspec's environment settings for ``protocol`` (``FSSPEC_S3_*``), then explicit options.

    Resolved on the client and carried with each input, so workers of a remote
    cluster use the same endpoint even when their environment lacks the variables.
    """
    fsspec = _fsspec()
    env: dict[str, dict[str, Any]] = {}
    fsspec.config.set_conf_env(env, os.environ)
    opts = dict(env.get(protocol, {}))
    opts.update(storage_options or {})
    return opts


def filesystem(protocol: str, options: dict[str, Any]):  # type: ignore[no-untyped-def]
    """The fsspec filesystem (instances are cached by fsspec, so one per worker process)."""
    fsspec = _fsspec()
    if protocol in _ARCHIVES:  # fsspec would open the archive named by an option we never pass: the cwd
        raise MissingDependency(f"{protocol}:// (an archive) is not read: unpack it and give the folder")
    try:
        return fsspec.filesystem(protocol, **options)
    except ImportError as exc:  # e.g. s3fs / gcsfs / adlfs missing
        raise MissingDependency(f"{protocol}:// needs an extra package ({exc}): {INSTALL_HINT}") from None
    except ValueError as exc:  # unknown protocol
        raise MissingDependency(f"{protocol}:// is not a protocol fsspec knows ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - a store that cannot start: one line, not a traceback
        raise MissingDependency(f"{protocol}:// cannot be opened: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True)
class RemoteInputFile(InputFile):
    """An object in a store; ``path`` is its URL (also what reports show)."""

    protocol: str = ""
    options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    size: int | None = field(default=None, compare=False, hash=False)

    def open(self) -> BinaryIO:
        """A buffered binary reader (``peek`` works, so compression is sniffed by magic)."""
        try:
            fs = filesystem(self.protocol, self.options)
            raw = fs.open(self.path, "rb", block_size=READ_BLOCK)
        except OSError:
            raise
        except MissingDependency as exc:
            raise OSError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - store clients raise their own error types
            raise OSError(f"{type(exc).__name__}: {exc}") from None
        if hasattr(raw, "peek"):
            return raw
        return io.BufferedReader(raw, buffer_size=1 << 20)


@dataclass(frozen=True)
class AnchoredInputFile(InputFile):
    """A local file shown by the (relative) path the user gave, opened by its absolute path.

    For worker processes whose working folder is not the client's.
    """

    abspath: str = ""

    def open(self) -> BinaryIO:
        from .decode import open_regular

        return open_regular(self.abspath)


def anchored(f: InputFile) -> InputFile:
    if type(f) is InputFile and f.path != "-" and not os.path.isabs(f.path):
        return AnchoredInputFile(f.path, abspath=os.path.abspath(f.path))
    return f


@dataclass
class LazyDiscovery:
    """Iterates the inputs of ``paths`` as they are listed; :attr:`notices` fills in meanwhile.

    Local paths are expanded by :func:`ncclsleuth.ingest.sources.discover` (consecutive local
    paths together, so its de-duplication and notices are exactly the local ones).
    """

    paths: list[str]
    storage_options: dict[str, Any] | None = None
    notices: list[Notice] = field(default_factory=list)
    bytes_listed: int = 0  # sizes of the listed objects (local files are not stat'ed twice for it)

    def __iter__(self) -> Iterator[InputFile]:
        seen: set[str] = set()
        i = 0
        paths = [local_path(p) for p in self.paths]
        while i < len(paths):
            if not is_url(paths[i]):
                j = i
                while j < len(paths) and not is_url(paths[j]):
                    j += 1
                found: Discovery = discover(paths[i:j])
                self.notices.extend(found.notices)
                yield from found.files
                i = j
                continue
            yield from self._remote(paths[i], seen)
            i += 1

    def _remote(self, url: str, seen: set[str]) -> Iterator[InputFile]:
        protocol = url_protocol(url) or "file"
        opts = options_for(protocol, self.storage_options)
        fs = filesystem(protocol, opts)
        path = fs._strip_protocol(url)
        try:
            if any(c in path for c in "*?["):
                listed = fs.glob(path, detail=True)
                entries: Iterable[tuple[str, dict[str, Any]]] = sorted(
                    (k, v) for k, v in listed.items() if v.get("type") != "directory")
                info = None
            else:
                info = fs.info(path)
                entries = ()
        except FileNotFoundError:
            self.notices.append(Notice(url, "no such file or folder"))
            return
        except Exception as exc:  # noqa: BLE001 - store errors: one notice, go on
            self.notices.append(Notice(url, f"cannot list: {type(exc).__name__}: {exc}, skipped"))
            return
        if info is not None and info.get("type") == "directory":
            entries = self._walk(fs, path, url)
        elif info is not None:
            entries = [(path, info)]
        yielded = again = 0
        for key, meta in entries:
            known = len(seen)
            f = self._make(fs, key, meta, protocol, opts, seen)
            if f is not None:
                yielded += 1
                yield f
            elif len(seen) == known:  # listed already under this URL (the folder given twice)
                again += 1
        if info is not None and info.get("type") == "directory" and not yielded:
            self.notices.append(empty_folder(url, again))

    def _walk(self, fs, root: str, url: str) -> Iterator[tuple[str, dict[str, Any]]]:  # type: ignore[no-untyped-def]
        """Top-down, sorted like ``os.walk`` in :func:`ingest.sources.discover`: a folder's files,
        then its sub-folders."""
        try:
            for dirpath, dirs, files in fs.walk(root, detail=True):
                order = sorted(dirs.items())
                dirs.clear()  # walk descends into what is left in ``dirs``, in its order: sorted
                dirs.update(order)
                page = [(f"{dirpath.rstrip('/')}/{name}" if name else dirpath, files[name])
                        for name in sorted(files) if not name.startswith(".")]
                fs.invalidate_cache(dirpath)  # the listing lives here only, not also in fsspec's cache
                yield from page
        except Exception as exc:  # noqa: BLE001
            self.notices.append(Notice(url, f"listing stopped: {type(exc).__name__}: {exc}"))

    def _make(self, fs: Any, key: str, meta: dict[str, Any], protocol: str, opts: dict[str, Any],
              seen: set[str]) -> InputFile | None:
        full = key if url_protocol(key) else str(fs.unstrip_protocol(key))
        if full in seen:
            return None
        seen.add(full)
        if full.lower().endswith(SKIP_SUFFIXES):
            self.notices.append(Notice(full, "not a log file (by its extension), skipped", "info"))
            return None
        if meta.get("type", "file") not in ("file", None):  # a store's FIFO, device or link target
            self.notices.append(Notice(full, f"not a regular file ({meta.get('type')}), skipped"))
            return None
        size = meta.get("size")
        self.bytes_listed += int(size or 0)
        return RemoteInputFile(full, protocol=protocol, options=opts, size=size)


def needs_remote(paths: Iterable[str]) -> bool:
    return any(is_url(p) or url_protocol(p) in LOCAL_PROTOCOLS for p in paths)
