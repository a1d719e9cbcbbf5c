"""The per-user cache folder and the small files kept in it.

What is cached (Lark's compiled grammar, message templates, parsed rule YAML, the
compiled code of generated functions) is always derived from files that ship with
ncclsleuth or that the user points at, so every cache can be deleted at any time; a
file that cannot be read or parsed is ignored.
"""
from __future__ import annotations

import json
import marshal
import os
import sys
import threading
import zlib
from collections.abc import Callable
from types import CodeType
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


def pread(fd: int, size: int, offset: int) -> bytes:
    """``os.pread``: ``size`` bytes at ``offset`` without moving the file's position (several
    threads and forked processes read one open file); where there is none (Windows) a seek and
    a read, under a lock."""
    if _PREAD is not None:
        return _PREAD(fd, size, offset)
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)


def head_count(head: bytes, magic: bytes, bound: int) -> int:
    """The number a store file's head (``magic`` then 4 bytes, little-endian) announces: 0 where
    the file is not such a file or the number is past ``bound`` (damage)."""
    end = len(magic) + 4
    if len(head) < end or not head.startswith(magic):
        return 0
    n = int.from_bytes(head[len(magic):end], "little")
    return n if n <= bound else 0


#: a store file up to this size is read whole and its entries sliced from it: a fresh code store
#: (~190 functions, 277 KB) took 2.63 ms a paste read an entry at a time against 1.98 ms loaded whole
WHOLE = 512 << 10


class OffsetFile:
    """A store file whose front (its head and index) is read when it is opened and whose entries
    are read by offset when they are asked for, from the file opened: a save renames another
    file over the path, and the offsets read stay true for the one open.  A file of ``whole``
    bytes or less is read in one read and closed (its entries sliced from it: cheaper than a read
    an entry, and no read later, which ``serve`` asks for)."""

    def __init__(self, path: str | None, head: int, index_size: Callable[[bytes], int],
                 whole: int | None = None) -> None:
        """``head``: the head's size; ``index_size(head bytes)``: the size of the index after it."""
        #: the head and the index (empty where the file cannot be read), or the whole file
        self.front = b""
        self._whole: bytes | None = None
        self._fd = -1
        try:
            fd = os.open(path or "", os.O_RDONLY)
        except OSError:
            return
        try:
            size = os.fstat(fd).st_size
            if size <= (WHOLE if whole is None else whole):
                self.front = self._whole = pread(fd, size, 0)
            else:
                first = pread(fd, head, 0)
                self.front = first + pread(fd, index_size(first), head)
        except OSError:
            pass
        if self._whole is not None or not self.front:
            os.close(fd)
            return
        import weakref

        self._fd = fd
        weakref.finalize(self, os.close, fd)

    def read(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``offset``; None where they cannot be read whole."""
        if self._whole is not None:
            data = self._whole[offset:offset + size]
        elif self._fd < 0:
            return None
        else:
            try:
                data = pread(self._fd, size, offset)
            except OSError:
                return None
        return data if len(data) == size else None


def remove_quietly(path: str) -> None:
    """Delete ``path`` if it is there (a cache file of an earlier version)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _remove_others(path: str, prefix: str, suffix: str) -> None:
    """Delete the files beside ``path`` named ``prefix...suffix`` but ``path`` itself: what was
    kept for the same thing before it changed."""
    folder = os.path.dirname(path)
    for name in os.listdir(folder):
        if name.startswith(prefix) and name.endswith(suffix) and os.path.join(folder, name) != path:
            remove_quietly(os.path.join(folder, name))


_PREAD = getattr(os, "pread", None)
_SEEK_LOCK = threading.Lock()


def write_atomic(path: str, data: str | bytes) -> None:
    """Write-then-rename (text as UTF-8), so that readers see the old file or the new one;
    errors are ignored.

    Not ``util.atomic.write_file`` on purpose: a cache file is disposable (a lost or torn one
    is rebuilt), so it gets no fsync of the file and its folder, which would cost milliseconds
    on every start that refreshes a table. Reports and exports, which a user keeps, go
    through ``util.atomic``."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
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


def merge_recent(stored: dict[str, Any], used: set[str], new: dict[str, Any], limit: int) -> dict[str, Any]:
    """What a bounded cache file keeps: ``stored`` with the entries this process
    ``used`` moved to the end, then the ``new`` ones, then the oldest dropped to fit
    ``limit`` (the dict order is the age).

    Without it the first ``limit`` entries ever stored stayed forever, and a full store
    costs every start its load: 57 ms for 21,000 templates (a fuzzing session had
    filled it with mutated lines), against 78 ms for a whole chat-ops answer.
    """
    out = {k: v for k, v in stored.items() if k not in used and k not in new}
    out.update((k, stored[k]) for k in used if k in stored and k not in new)
    out.update(new)
    extra = len(out) - limit
    return dict(list(out.items())[extra:]) if extra > 0 else out


class RecentStore:
    """What a process made and the next start can reuse, kept in one bounded marshal file
    (:func:`save_recent`): the entries made here (``_new``) and those reused (``_used``, kept
    longer).  Subclasses say where the file is and how it is read (``_where``, ``_read``)."""

    #: entries kept in the file
    MAX_ENTRIES = 2_000

    def __init__(self) -> None:
        self._new: dict[Any, Any] = {}
        self._used: set[Any] = set()

    def _where(self) -> str | None:
        raise NotImplementedError

    def _read(self) -> dict[Any, Any]:
        raise NotImplementedError

    def _made(self, key: Any, value: Any) -> None:
        """Remember an entry made here, for :meth:`save` (while the store has room)."""
        if len(self._new) < self.MAX_ENTRIES:
            self._new[key] = value

    def _encode(self, data: dict[Any, Any]) -> bytes:
        """The file's bytes for ``data``: marshal data unless a subclass says otherwise."""
        return marshal.dumps(data)

    def save(self) -> None:
        """Add what was made here to the file (no-op when nothing is new)."""
        if not self._new:
            return
        save_recent(self._where(), self._read, self._used, self._new, self.MAX_ENTRIES, self._encode)
        self._new = {}


class CodeStore(RecentStore):
    """Compiled code of the functions ncclsleuth generates, by their source, kept on disk.

    The parser generates small functions: one ``__init__`` per event class, one fill per
    line shape (grammar.Template, grammar.fixed_fill).  Compiling them took 19 ms of a
    1M-line job (120 compiles), and every worker process compiled most of them again.
    The code depends only on the source text and the Python version, so it is kept like
    Python's own ``__pycache__``: marshal data in the user's private cache folder (the
    trust is the same: that folder is used only if it is this user's and no one else
    can write to it, see :func:`cache_dir`), one file per Python build.

    The file is an index (a key of each source, :func:`code_key` -> where its entry is) and the entries
    after it (:func:`pack_code`); a start reads the index, then only the entries it asks for,
    by offset, from the file it opened (a save replaces the file by another, so the offsets
    stay true for the one open), and each entry holds its source, compared before its code is
    used.  Loaded whole as one marshal value, the store cost every start in proportion to
    what earlier runs had compiled: 7.6 ms for the 1,496 functions a day of reading
    different logs had kept (2.7 MB; a 200-line paste asks for ~190 of them), against 3.5 ms
    read by offset (fresh processes, median of 40).
    """

    #: functions kept (a 16,384-rank job makes ~200)
    MAX_ENTRIES = 2_000

    def __init__(self) -> None:
        super().__init__()
        #: key of a source (:func:`code_key`) -> (offset, size) of its entry in the file; None before the first lookup
        self._index: dict[int, tuple[int, int]] | None = None
        self._file: OffsetFile | None = None
        self._code: dict[str, CodeType] = {}

    def _where(self) -> str | None:
        return _code_path()

    def _read(self) -> dict[Any, Any]:
        return _read_code()

    def _encode(self, data: dict[Any, Any]) -> bytes:
        return pack_code(data)

    def save(self) -> None:
        path = _code_path()
        if self._new and path:  # the whole-marshal file of earlier versions, read by none now
            remove_quietly(path[:-len(".bin")] + ".marshal")
        super().save()

    def compile(self, source: str, filename: str, mode: str = "exec") -> CodeType:
        """``compile(source, filename, mode)``, from disk when it was compiled before.

        ``mode`` "exec" (a module's statements, as ever, with this module's ``annotations``
        future) or "eval" (an expression, compiled as the interpreter compiles one that ``eval``
        is given: no future inherited).  An expression is kept under its source behind
        :data:`EVAL_MARK`: no source passed to ``compile`` holds a NUL character, so it never
        meets the statements of the same text."""
        keyed = source if mode == "exec" else EVAL_MARK + source
        code = self._code.get(keyed)
        if code is not None:
            return code
        if self._index is None:
            self._open()
        key = code_key(keyed)
        code = self._kept(key, keyed)
        if code is None:
            # an expression: flags 0, dont_inherit (positional: the tests count compiles by this name)
            code = compile(source, filename, "exec") if mode == "exec" else compile(source, filename, mode, 0, True)
            self._made(key, marshal.dumps((keyed, code)))
        else:
            self._used.add(key)
        self._code[keyed] = code
        return code

    def _open(self, whole: int | None = None) -> None:
        """Read the index of the file (:class:`OffsetFile`: ``whole``)."""
        self._file = OffsetFile(_code_path(), _HEAD, _index_size, whole)
        self._index = _index_of(self._file.front) or {}

    def load_all(self) -> None:
        """Read the whole file now (``serve``, before it forks its workers: a request then reads
        no file, and the workers share what was read)."""
        self._open(sys.maxsize)

    def _kept(self, key: int, source: str) -> CodeType | None:
        """The code of ``source`` in the file (None when it is not there or not sound)."""
        at = _entry_at(self._index, key) if self._index else None
        data = self._file.read(*at) if at is not None and self._file is not None else None
        return _code_of(data, source) if data is not None else None


#: what the code store puts before the source of an expression (``CodeStore.compile``'s "eval")
EVAL_MARK = "\0eval\0"
#: the code store's file: magic, the index's size, the index (marshal), the entries
_MAGIC = b"nscode2\0"
_HEAD = len(_MAGIC) + 4
#: the most index bytes read (2,000 entries take ~65 KB; a bigger one is damage)
_MAX_INDEX = 1 << 20


def code_key(source: str) -> int:
    """A source's key in the code store: CRC-32 and Adler-32 of its UTF-8 bytes, as one integer
    (the entry holds the source too, compared before its code is used)."""
    data = source.encode("utf-8", "surrogatepass")
    return zlib.crc32(data) << 32 | zlib.adler32(data)


def pack_code(entries: dict[int, bytes]) -> bytes:
    """The code store's file for ``entries`` (:func:`code_key` of a source -> marshal of (source, code))."""

    def index(base: int) -> dict[int, tuple[int, int]]:  # where each entry is, the first at ``base``
        out, at = {}, base
        for key, data in entries.items():
            out[key] = (at, len(data))
            at += len(data)
        return out

    size = len(marshal.dumps(index(0)))  # marshal writes an int below 2**31 in 4 bytes: a size per key
    head = marshal.dumps(index(_HEAD + size))
    if len(head) != size or size > _MAX_INDEX:
        raise ValueError("code store index does not fit")  # save_recent then keeps nothing
    return b"".join([_MAGIC, size.to_bytes(4, "little"), head, *entries.values()])


def _index_size(head: bytes) -> int:
    """The size of the index a code store file's first bytes announce (0: not such a file)."""
    return head_count(head, _MAGIC, _MAX_INDEX)


def _index_of(data: bytes) -> dict[int, tuple[int, int]] | None:
    """The index at the start of a code store file (``data``: its first bytes, at least the
    index), or None when the file is not one (another format, damage)."""
    size = _index_size(data)
    if not size or len(data) < _HEAD + size:
        return None
    index = unmarshal(data[_HEAD:_HEAD + size])
    return index if isinstance(index, dict) else None


def _entry_at(index: dict[int, tuple[int, int]], key: int) -> tuple[int, int] | None:
    """Where the index says ``key``'s entry is, or None (absent, or not an (offset, size) pair).

    Checked when looked up, not for the whole index at every start (0.16 ms for 430 entries,
    0.6 ms for a full store); an entry found is still checked itself (:func:`_code_of`)."""
    at = index.get(key)
    if type(at) is tuple and len(at) == 2:
        offset, size = at
        if type(offset) is int and type(size) is int and offset >= 0 and size >= 0:
            return at
    return None


def _code_of(data: bytes, source: str) -> CodeType | None:
    """The code object in an entry of the store when it is the one of ``source``, else None."""
    got = unmarshal(data)
    if type(got) is not tuple or len(got) != 2 or got[0] != source or type(got[1]) is not CodeType:
        return None
    return got[1]


def _code_path() -> str | None:
    folder = cache_dir()
    if folder is None:
        return None
    return os.path.join(folder, f"code-{sys.implementation.cache_tag}-{sys.hexversion:x}.bin")


def _read_code() -> dict[int, bytes]:
    """Every entry of the code store file (key of a source -> its entry's bytes, each checked
    when it is used, :func:`_code_of`); empty when there is none or it is not one."""
    f = OffsetFile(_code_path(), _HEAD, _index_size, sys.maxsize)
    index = _index_of(f.front) or {}
    entries = {k: f.read(*at) for k in index if type(k) is int and (at := _entry_at(index, k)) is not None}
    return {k: data for k, data in entries.items() if data is not None}


def unmarshal(data: bytes, bad: Any = None) -> Any:
    """``marshal.loads(data)``, or ``bad`` where the bytes are not marshal data (a cache file
    damaged, cut short or of another format): every store reads its entries through this."""
    try:
        return marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return bad


def read_marshal(path: str | None) -> Any:
    """The marshal data in ``path``, or None when there is none or it cannot be read."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return unmarshal(data)


def save_recent(path: str | None, stored: Any, used: set[Any], new: dict[Any, Any], limit: int,
                encode: Callable[[dict[Any, Any]], bytes]) -> None:
    """Add ``new`` entries to the bounded store at ``path`` (see :func:`merge_recent`;
    ``stored()`` reads what is there, ``encode`` writes it).  Workers save at the same time:
    read-merge-write under a lock.  A value marshal cannot write keeps nothing and loses
    nothing."""
    if path is None or not new:
        return
    with locked(path + ".lock"):
        data = merge_recent(stored(), used, new, limit)
        try:
            write_atomic(path, encode(data))
        except ValueError:
            pass


#: the process's code store (grammar fills and event constructors share it)
CODE = CodeStore()


def keep_blob(name: str, data: bytes) -> str | None:
    """Store ``data`` in the cache folder as ``<name>-<digest>.bin`` (once: the name is its
    content's) and return the path, removing the blobs of the same name with other content;
    None when there is no cache folder or it cannot be written.  For the parts of a
    :func:`derived` table that are read a few at a time (:func:`read_at`), not loaded whole."""
    folder = cache_dir()
    if folder is None:
        return None
    path = os.path.join(folder, f"{name}-{digest(data)}.bin")
    try:
        if os.path.getsize(path) == len(data):
            return path
    except OSError:
        pass
    write_atomic(path, data)
    _remove_others(path, f"{name}-", ".bin")
    try:
        return path if os.path.getsize(path) == len(data) else None
    except OSError:
        return None


def read_at(path: str, offset: int, size: int) -> bytes | None:
    """``size`` bytes at ``offset`` of a :func:`keep_blob` file; None when they cannot be read."""
    try:
        with open(path, "rb") as f:
            data = pread(f.fileno(), size, offset)
    except OSError:
        return None
    return data if len(data) == size else None


def derived(name: str, sources: list[str], build: Any, version: Any = 1) -> Any:
    """``build()``'s value, kept as marshal data while none of ``sources`` changed.

    For tables derived from data files that ship with ncclsleuth (the knowledge base's
    lookup index, the NCCL catalog's regex buckets): building them costs 50-250 ms, loading
    them ~5 ms.  The value must hold only types marshal writes (str, int, tuples, lists,
    dicts, ...); the key is the files' paths, sizes and mtimes, the ``version`` of the
    builder and the Python build (marshal's format is the interpreter's).
    """
    found, value = kept(name, sources, version)
    if found:
        return value
    value = build()
    keep(name, sources, value, version)
    return value


def _derived_key(name: str, sources: list[str], version: Any) -> tuple[bytes, str, str] | None:
    """(key, file, stem) of a derived value: None when a source cannot be read or there is
    no cache folder."""
    manifest = []
    for p in sources:
        try:
            st = os.stat(p)
        except OSError:
            return None
        manifest.append((p, st.st_size, st.st_mtime_ns))
    key = repr((name, version, sys.hexversion, manifest)).encode()
    folder = cache_dir()
    if folder is None:
        return None
    # named by the sources' paths too: the tables of two installs or checkouts (a benchmark
    # alternating two builds, the tests' own knowledge folders) do not replace each other
    stem = f"{name}-{digest(repr(sources).encode())[:8]}-"
    return key, os.path.join(folder, f"{stem}{digest(key)}.marshal"), stem


def is_kept(name: str, sources: list[str], version: Any = 1) -> bool:
    """Whether :func:`keep` stored a value for these sources unchanged (its file is there), without
    reading it: a few stats."""
    where = _derived_key(name, sources, version)
    return where is not None and os.path.isfile(where[1])


def kept(name: str, sources: list[str], version: Any = 1) -> tuple[bool, Any]:
    """(True, value) as :func:`keep` stored it for these sources unchanged, else (False, None)."""
    where = _derived_key(name, sources, version)
    if where is None:
        return False, None
    key, path, _ = where
    stored = read_marshal(path)
    if isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key:
        return True, stored[1]
    return False, None


def keep(name: str, sources: list[str], value: Any, version: Any = 1) -> None:
    """Store ``value`` for :func:`kept` (nothing when marshal cannot write it), replacing
    what was kept for the same sources before they changed."""
    where = _derived_key(name, sources, version)
    if where is None:
        return
    key, path, stem = where
    try:
        data = marshal.dumps((key, value))
    except ValueError:  # a type marshal cannot write: not kept
        return
    _remove_others(path, stem, ".marshal")  # the tables of these files before they changed
    write_atomic(path, data)
