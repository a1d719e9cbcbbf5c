"""The message grammar and its shape cache.

``messages.lark`` (Lark, LALR) is the single source of truth for what a message means.
Parsing every line with it would cost tens of microseconds a line, and NCCL logs are
extremely repetitive: the same ``Channel NN/M : a[b] -> c[d] via ...`` shape on every
rank and channel.  So :class:`ShapeCache` parses the first line of each *shape* (the
message with its digit runs masked) with Lark, remembers where each field's token sat
in terms of the literal/digit segments of the line, and for later lines of that shape
rebuilds the same fields from the new line's segments without calling Lark.

A token boundary that falls inside a digit run cannot be replayed; such a shape is
marked uncacheable and always parsed.

Templates are a pure function of the grammar, so they are also kept on disk (in the
per-user cache folder, named by a digest of the grammar and of this module, read a
shape at a time: :class:`TemplateStore`): a
later run on the same kinds of lines neither imports Lark nor parses with it, which
is most of a chat-ops bot's start-up.  ``--no-cache`` bypasses both caches.
"""
from __future__ import annotations

import os
import re
import sys
from bisect import bisect_right
from typing import TYPE_CHECKING, Any

from ...util.cache import (
    CODE,
    OffsetFile,
    cache_dir,
    digest,
    head_count,
    locked,
    merge_recent,
    remove_quietly,
    unmarshal,
    write_atomic,
)
from ...util.rxstore import RX, rx

try:  # CPython's BLAKE2 without hashlib, whose OpenSSL binding costs ~3 ms to import at every start
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - not CPython
    from hashlib import blake2b as _blake2b

if TYPE_CHECKING:
    from lark import Lark, Tree

_HERE = os.path.dirname(os.path.abspath(__file__))
_GRAMMAR = os.path.join(_HERE, "messages.lark")
# Value runs masked in a shape: explicit hex (pointers, commIds) and digit runs.
_DIGITS = rx(r"(0x[0-9a-fA-F]+|\d+)")
# The same runs (tests/test_shape_cache.py compares them), written to start with a character
# set: the regex engine then skips to the next digit in C instead of trying the alternation at
# every character (a 200-character PyTorch line: 13 -> 2 us ASCII, 6 us not).  In ASCII text
# [0-9] is \d.
_RUNS_ASCII = rx(r"([0-9](?:(?<=0)x[0-9a-fA-F]+|[0-9]*))")
_RUNS = rx(r"(\d(?:(?<=0)x[0-9a-fA-F]+|\d*))")


def value_runs(text: str) -> list[str]:
    """``text`` split at its value runs (``_DIGITS``): literal, run, literal, ..., literal."""
    return (_RUNS_ASCII if text.isascii() else _RUNS).split(text)

RawFields = dict[str, Any]  # name -> str | list[str]


_parser: Lark | None = None


def parser() -> Lark:
    """The compiled LALR parser (compiled once, cached on disk by Lark)."""
    global _parser
    if _parser is None:
        from lark import Lark

        folder = cache_dir()
        opts: dict[str, Any] = {"parser": "lalr", "lexer": "contextual"}
        try:
            _parser = Lark.open(_GRAMMAR, cache=os.path.join(folder, "grammar.lark.cache"),
                                **opts) if folder else Lark.open(_GRAMMAR, **opts)
        except OSError:  # cache file not writable: compile in memory
            _parser = Lark.open(_GRAMMAR, **opts)
    return _parser


def _lark_error() -> type[Exception]:
    from lark.exceptions import LarkError

    return LarkError


# --------------------------------------------------------------------------- tree -> raw


def raw_of(tree: Tree) -> tuple[str, dict[str, Any]]:
    """Flatten a parse tree into ``(kind, {field: Token | [Token, ...]})``."""
    from lark import Tree

    msg = tree.children[0] if tree.data == "start" else tree
    assert isinstance(msg, Tree)
    fields: dict[str, Any] = {}
    kind = str(msg.data)
    if kind in _WRAPPERS:  # e.g. sock_err: SOCKFN ":" <the real message rule>
        inner = next(c for c in msg.children if isinstance(c, Tree))
        kind = str(inner.data)
    _collect(msg, fields)
    return kind, fields


_WRAPPERS = frozenset({"sock_err"})


def _collect(t: Tree, fields: dict[str, Any]) -> None:
    from lark import Token

    for c in t.children:
        if isinstance(c, Token):
            fields.setdefault("_" + c.type.lower(), c)
            continue
        name = str(c.data)
        if name.startswith("f_"):
            fields[name[2:]] = c.children[0]
        elif name.startswith("l_"):
            fields[name[2:]] = [x for x in c.children if isinstance(x, Token)]
        else:
            _collect(c, fields)


# --------------------------------------------------------------------------- shape cache


#: uses of a template before its fill is compiled (see Template)
COMPILE_AFTER = 2
#: rules whose events depend on the parser's state (tracebacks, torchrun failure blocks):
#: never rebuilt from a whole-line template
STATEFUL_RULES = frozenset({"failure_block_head", "failure_field", "exception"})


class Template:
    """Where each field's text lies, as (seg_start, off_start, seg_end, off_end) over the
    value-run split of the text.  Used for message shapes (ShapeCache) and whole NCCL lines.

    ``fill(parts)`` rebuilds the fields.  Its first call reads the spans (``_cut``, a few
    microseconds slower a line); from the ``COMPILE_AFTER``-th on it is generated code,
    one expression per field.  A compile costs 100-300 us and many shapes occur once
    (a 1M-line job: 15 of 52 line templates, and each rank's init lines), so compiling
    at first sight was wasted there, and every worker process paid it again.  Parsing
    that job in one process: 618 ms with 2, 624 ms with 1 (compile at once), 625 ms with 8.
    """

    __slots__ = ("kind", "spans", "fill", "_uses")

    def __init__(self, kind: str, spans: dict[str, Any]) -> None:
        self.kind = kind
        self.spans = spans
        self._uses = 0
        self.fill = self._first_fills

    def _first_fills(self, parts: list[str]) -> dict[str, Any]:
        self._uses += 1
        if self._uses >= COMPILE_AFTER:
            self.fill = _compile_fill(self.spans)
        return self.read(parts)

    def read(self, parts: list[str]) -> dict[str, Any]:
        """The fields, by reading the spans: what the generated fill computes."""
        return {name: [_cut(parts, x) for x in sp] if isinstance(sp, list) else _cut(parts, sp)
                for name, sp in self.spans.items()}


def _cut(p: list[str], sp: tuple[int, int, int, int | None]) -> str:
    """The text of one span, as the generated code (``_cut_expr``) computes it."""
    i, oi, j, oj = sp
    if i == j:
        return p[i][oi:oj]
    return p[i][oi:] + "".join(p[i + 1:j]) + (p[j] if oj is None else p[j][:oj])


class _Uncacheable(Exception):
    pass


def _span(starts: list[int], parts: list[str], s: int, e: int) -> tuple[int, int, int, int | None]:
    i = bisect_right(starts, s) - 1
    oi = s - starts[i]
    if i % 2 and oi:
        raise _Uncacheable
    j = bisect_right(starts, e - 1) - 1 if e > s else i
    oj: int | None = e - starts[j]
    if j % 2:
        if oj != len(parts[j]):
            raise _Uncacheable
        oj = None
    return i, oi, j, oj


def _template(kind: str, fields: dict[str, Any], parts: list[str], offset: int = 0,
              extra: dict[str, tuple[int, int]] | None = None) -> Template:
    """Spans of the grammar's tokens (shifted by ``offset``) and of ``extra`` (start, end) pairs."""
    starts, pos = [], 0
    for p in parts:
        starts.append(pos)
        pos += len(p)
    spans: dict[str, Any] = {name: _span(starts, parts, a, b) for name, (a, b) in (extra or {}).items()}
    for name, v in fields.items():
        if isinstance(v, list):
            spans[name] = [_span(starts, parts, t.start_pos + offset, t.end_pos + offset) for t in v]
        else:
            spans[name] = _span(starts, parts, v.start_pos + offset, v.end_pos + offset)
    return Template(kind, spans)


_MISS: Any = object()


class ShapeCache:
    """Parse message texts, reusing the parse of the first text of each shape.

    ``parse(text)`` returns ``(kind, fields)`` with fields as plain strings (or lists of
    strings), or ``None`` when the grammar does not accept the text.
    """

    def __init__(self, enabled: bool = True, max_shapes: int = 200_000, store: bool = True) -> None:
        """``store``: also use (and add to) the templates kept on disk (see the module doc)."""
        self.enabled = enabled
        self.max_shapes = max_shapes
        self._shapes: dict[str, Any] = {}
        #: whole-line shape -> Template | None, shared by the files parsed with this cache
        self.line_templates: dict[str, Template | None] = {}
        #: position-exact line shape (bytes) -> (rule, generated slice fill, absolute field spans)
        self.fixed_templates: dict[bytes, Any] = {}
        #: position-exact line shape -> lines met so far, until its fill is compiled
        self.fixed_seen: dict[bytes, int] = {}
        #: retention set -> position-exact line shape -> plan (ncclsleuth.parse.fastpath)
        self.plan_tables: dict[Any, dict[bytes, Any]] = {}
        #: position-exact shape of other lines -> learned plan, and lines met until it is learned
        #: (ncclsleuth.parse.learned)
        self.learned: dict[bytes, Any] = {}
        self.learn_seen: dict[int, list[Any]] = {}
        #: position-exact shape of step-timing lines -> learned plan, and lines met until then
        #: (``FileParser._step_event``: those lines are sampled apart from the others)
        self.step_plans: dict[bytes, Any] = {}
        self.step_seen: dict[int, list[Any]] = {}
        #: (prefix, plain line) shapes of a prefixed NCCL INFO line -> whether its plain line's plan,
        #: dressed with the prefix's fields, makes what the full parser does (ncclsleuth.parse.prefixed)
        self.dressed: dict[tuple[bytes, bytes], bool] = {}
        #: learnings tried (makers and learned plans: ``learned.MAX_LEARNINGS`` at most)
        self.learnings = 0
        self.hits = self.misses = self.parses = 0
        self._store: TemplateStore | None = TemplateStore() if store and enabled else None

    def parse(self, text: str) -> tuple[str, RawFields] | None:
        if not self.enabled:
            return _parse_plain(text)
        parts = value_runs(text)
        key = "\x00".join(parts[0::2]) if len(parts) > 1 else text
        tpl = self._shapes.get(key, _MISS)
        if tpl is _MISS and self._store is not None:
            tpl = self._store.get("shapes", key)
            if tpl is not _MISS:
                self._remember(key, tpl, learned=False)
        if tpl is not _MISS:
            self.hits += 1
            if tpl is None:
                return None
            if tpl is False:  # known-uncacheable shape
                return _parse_plain(text)
            return tpl.kind, tpl.fill(parts)
        self.misses += 1
        self.parses += 1
        try:
            tree = parser().parse(text)
        except _lark_error():
            self._remember(key, None)
            return None
        kind, fields = raw_of(tree)
        try:
            tpl = _template(kind, fields, parts)
        except _Uncacheable:
            self._remember(key, False)
        else:
            self._remember(key, tpl)
        return kind, _stringify(fields)

    def line_template(self, text: str, parts: list[str], key: str) -> Template | None:
        """The whole-line template of a plain NCCL INFO line shape (from disk, or made now)."""
        if self._store is not None:
            tpl = self._store.get("lines", key)
            if tpl is not _MISS:
                return tpl
        tpl = line_template(text, parts)
        if self._store is not None:
            self._store.learn("lines", key, tpl)
        return tpl

    def line_fields(self, text: str) -> tuple[str, RawFields] | None:
        """``(rule, fields)`` of a plain ``host:pid:tid [dev] NCCL INFO`` line from its whole-line
        template (``_host``, ``_pid``, ``_tid``, ``_dev`` among the fields), or None.

        Two levels: a position-exact key (bytes.translate, ~0.2 us) whose fill is plain
        slices, then the value-run split (~4 us) whose fill concatenates runs.  Rules whose
        events depend on the parser's state (``STATEFUL_RULES``) get no template.
        """
        ascii_line = text.isascii()
        if ascii_line:
            fkey = info_key(text)
            hit = self.fixed_templates.get(fkey)
            if hit is not None:
                return hit[0], hit[1](text)
        parts, key = split_line(text)
        tpl = self.line_templates.get(key, _MISS)
        if tpl is _MISS:
            tpl = self.line_template(text, parts, key) if self.enabled else None
            if tpl is not None and (tpl.kind in STATEFUL_RULES or tpl.kind.startswith("ws_")):
                tpl = None
            if len(self.line_templates) < 50_000:
                self.line_templates[key] = tpl
        if tpl is None:
            return None
        if ascii_line:
            self._learn_fixed(fkey, tpl, parts)
        return tpl.kind, tpl.fill(parts)

    def _learn_fixed(self, fkey: bytes, tpl: Template, parts: list[str]) -> None:
        """Count a position-exact shape's lines; at the ``COMPILE_AFTER``-th, compile its
        fill (most such shapes are met a handful of times: see :class:`Template`)."""
        seen = self.fixed_seen.get(fkey, 0) + 1
        if seen >= COMPILE_AFTER and len(self.fixed_templates) < 100_000:
            self.fixed_templates[fkey] = (tpl.kind, fixed_fill(tpl, parts), fixed_spans(tpl, parts))
            self.fixed_seen.pop(fkey, None)
        elif len(self.fixed_seen) < 100_000:
            self.fixed_seen[fkey] = seen

    def load_all(self) -> None:
        """Read the templates and the compiled code on disk whole, now (see ``TemplateStore.load_all``)."""
        if self._store is not None:
            self._store.load_all()
        CODE.load_all()

    def save(self) -> None:
        """Add what this cache learned to the templates on disk, the code compiled for
        them and the regexes compiled at import (no-op if nothing new)."""
        if self._store is not None:
            self._store.save()
        CODE.save()
        RX.save()

    def _remember(self, key: str, value: Any, learned: bool = True) -> None:
        if len(self._shapes) < self.max_shapes:
            self._shapes[key] = value
            if learned and self._store is not None:
                self._store.learn("shapes", key, value)


class TemplateStore:
    """Templates on disk, per table (``shapes``, ``lines``): a shape's digest (:func:`disk_key`)
    -> None | False | [kind, spans], as the in-memory caches hold them.

    The file (:func:`_pack`) is a key table sorted for a binary search, then the entries in
    each table's order of use; a process reads the key table on its first lookup and then one
    entry per shape it meets, by offset, from the file it opened (a save renames a new file
    over it: the open one stays whole).  Saved by :meth:`save` with a write-then-rename, merged
    with what another process saved meanwhile, the least recently used dropped past
    ``MAX_ENTRIES`` per table (:func:`~ncclsleuth.util.cache.merge_recent`).  A file, or an
    entry, that cannot be read is ignored.

    The whole store was a JSON file parsed by every start: 3.1 ms at the 1,049 shapes a day
    of reading different logs had kept, 22 ms once both tables are full (8,000), while a
    200-line paste looks up ~10 shapes and a 64-rank job ~50.
    """

    #: entries kept per table (a 16,384-rank job learns ~70)
    MAX_ENTRIES = 4_000

    def __init__(self) -> None:
        #: the file's key records (``_pack``), None before the first lookup
        self._keys: bytes | None = None
        self._file: OffsetFile | None = None
        self._new: dict[str, dict[str, Any]] = {"shapes": {}, "lines": {}}
        self._used: dict[str, set[str]] = {"shapes": set(), "lines": set()}

    def get(self, table: str, key: str) -> Any:
        """Template | None | False (as the in-memory caches hold them), or _MISS."""
        if self._keys is None:
            self._open()
        key = disk_key(key)
        raw = self._entry(table, key)
        if raw is not _MISS:
            self._used[table].add(key)
        if raw is _MISS or raw is None or raw is False:
            return raw
        try:
            kind, spans = raw
            return Template(kind, {str(n): _stored_span(v) for n, v in spans.items()})
        except (TypeError, ValueError, AttributeError, RecursionError):  # not what save() writes: ignore it
            return _MISS

    def _open(self, whole: int = 0) -> None:
        """Read the key table of the file (:class:`~ncclsleuth.util.cache.OffsetFile`: the
        entries by offset, or a file of ``whole`` bytes or less read whole)."""
        self._file = OffsetFile(_store_path(), _HEAD, lambda head: _count(head) * _RECORD, whole)
        n = _count(self._file.front)
        keys = self._file.front[_HEAD:_HEAD + n * _RECORD]
        self._keys = keys if len(keys) == n * _RECORD else b""

    def load_all(self) -> None:
        """Read the whole file now (``serve``, before it forks its workers: a request then reads
        no file, and the workers share what was read)."""
        self._open(sys.maxsize)

    def _entry(self, table: str, key: str) -> Any:
        """The stored value of ``key`` in ``table`` (None and False are values), or _MISS."""
        at = _find(self._keys or b"", _TABLES[table] + bytes.fromhex(key))
        data = self._file.read(*at) if at is not None and self._file is not None else None
        return _MISS if data is None else unmarshal(data, _MISS)

    def learn(self, table: str, key: str, value: Any) -> None:
        if len(self._new[table]) < self.MAX_ENTRIES:
            self._new[table][disk_key(key)] = value if value is None or value is False else [value.kind, value.spans]

    def save(self) -> None:
        if not any(self._new.values()):
            return
        path = _store_path()
        if path is None:
            return
        with locked(path + ".lock"):  # workers save at the same time: read-merge-write under a lock
            data = _read_store()
            for table, new in self._new.items():
                data[table] = merge_recent(data[table], self._used[table], new, self.MAX_ENTRIES)
            self._new = {"shapes": {}, "lines": {}}
            try:
                write_atomic(path, _pack(data))
            except ValueError:  # a value marshal cannot write: nothing saved
                pass
        remove_quietly(path[:-len(".bin")] + ".json")  # the JSON file of earlier versions, read by none now
        _prune(path)


#: the templates file: magic, the number of entries, their key records sorted, then the entries
_MAGIC = b"nstpl01\0"
_HEAD = len(_MAGIC) + 4
#: a key record: table (1 byte), the shape's digest (16), the entry's offset (4) and size (4)
_RECORD = 25
_TABLES = {"shapes": b"\x00", "lines": b"\x01"}
#: entries a file may hold (two full tables); a bigger count is damage
_MAX_COUNT = 1 << 16


def _count(head: bytes) -> int:
    """The number of entries a templates file's first bytes announce (0: not such a file)."""
    return head_count(head, _MAGIC, _MAX_COUNT)


def _find(keys: bytes, probe: bytes) -> tuple[int, int] | None:
    """(offset, size) of the entry whose table and digest are ``probe`` (17 bytes), by binary
    search in the sorted key records."""
    lo, hi = 0, len(keys) // _RECORD
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid * _RECORD:mid * _RECORD + 17] < probe:
            lo = mid + 1
        else:
            hi = mid
    at = lo * _RECORD
    return _where(keys, at) if keys[at:at + 17] == probe else None


def _where(keys: bytes, at: int) -> tuple[int, int]:
    """(offset, size) of the entry of the key record at ``at``."""
    return int.from_bytes(keys[at + 17:at + 21], "little"), int.from_bytes(keys[at + 21:at + 25], "little")


def _pack(data: dict[str, dict[str, Any]]) -> bytes:
    """The templates file of ``data`` (table -> digest -> value, each table in its order of use)."""
    import marshal

    entries = [(_TABLES[t] + bytes.fromhex(k), marshal.dumps(v)) for t in _TABLES for k, v in data[t].items()]
    records, at = [], _HEAD + len(entries) * _RECORD
    for key, value in entries:
        records.append(key + at.to_bytes(4, "little") + len(value).to_bytes(4, "little"))
        at += len(value)
    records.sort()
    return b"".join([_MAGIC, len(entries).to_bytes(4, "little"), *records, *(v for _, v in entries)])


def disk_key(key: str) -> str:
    """A shape as the templates file keys it: its BLAKE2b digest (16 bytes, hex).

    A shape is a line's text with its values masked, as long as the line: a 16,384-rank job's
    long lines (``Trees``, ring dumps) gave ~170 shapes of ~2,500 characters, written with a
    6-byte ``\\u0000`` for each masked value, so a cache of ~400 templates was a 1.2 MB file
    that every start parsed (3.3 ms of a ~100 ms answer to a pasted excerpt; 1.1 ms keyed by
    digest), and it grew towards ``MAX_ENTRIES`` with every job read.  Cryptographic, since
    the shapes come from the logs: no line can be made to take another shape's template."""
    return _blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


#: template files of other grammar versions kept (two installed versions used in turn
#: keep theirs); older ones are deleted
KEEP_STORES = 4


def _prune(path: str) -> None:
    folder = os.path.dirname(path)
    try:
        old = sorted((e for e in os.scandir(folder)
                      if e.name.startswith("templates-") and e.name.endswith((".bin", ".json"))),
                     key=lambda e: e.stat().st_mtime, reverse=True)[KEEP_STORES:]
        for e in old:
            os.unlink(e.path)
            if os.path.exists(e.path + ".lock"):  # its lock file goes with it
                os.unlink(e.path + ".lock")
    except OSError:
        pass


def _stored_span(v: Any) -> Any:
    """A span from the templates file, checked: the fill function is generated from these
    numbers.  A span is four integers (the last may be None), or a list of spans."""
    if isinstance(v, (tuple, list)) and len(v) == 4 and all(type(x) is int for x in v[:3]) \
            and (v[3] is None or type(v[3]) is int):
        return tuple(v)
    if isinstance(v, list) and all(isinstance(x, (tuple, list)) for x in v):
        return [_stored_span(x) for x in v]
    raise ValueError(v)


_STORE_PATH: list[str | None] = []


def _store_path() -> str | None:
    """``templates-<digest>.bin``: the digest covers the grammar and this module, whose
    code decides what a template holds, so a changed grammar never reads old templates."""
    if not _STORE_PATH:
        folder = cache_dir()
        if folder is None:
            _STORE_PATH.append(None)
        else:
            key = digest(_read_bytes(_GRAMMAR), _read_bytes(os.path.abspath(__file__)))
            _STORE_PATH.append(os.path.join(folder, f"templates-{key}.bin"))
    return _STORE_PATH[0]


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _read_store() -> dict[str, dict[str, Any]]:
    """Every entry of the templates file, per table in its order of use (entries that cannot
    be read left out); empty tables when there is no file or it is not one."""
    store = TemplateStore()
    store.load_all()
    keys = store._keys or b""
    names = {v: k for k, v in _TABLES.items()}
    out: dict[str, dict[str, Any]] = {"shapes": {}, "lines": {}}
    for i in sorted(range(0, len(keys), _RECORD), key=lambda i: _where(keys, i)):  # the file's order of use
        data = store._file.read(*_where(keys, i)) if store._file is not None else None
        value = _MISS if data is None or keys[i:i + 1] not in names else unmarshal(data, _MISS)
        if value is not _MISS:
            out[names[keys[i:i + 1]]][keys[i + 1:i + 17].hex()] = value
    return out


def _stringify(fields: dict[str, Any]) -> RawFields:
    return {k: [str(t) for t in v] if isinstance(v, list) else str(v) for k, v in fields.items()}


def _parse_plain(text: str) -> tuple[str, RawFields] | None:
    try:
        tree = parser().parse(text)
    except _lark_error():
        return None
    kind, fields = raw_of(tree)
    return kind, _stringify(fields)


# --------------------------------------------------------------------------- whole-line templates

#: The plain NCCL prefix (no launcher wrapper, no timestamp): the common case worth a fast path.
#: The host is a hostname and there are no backticks: a line pasted with chat mark-up
#: (`...`, **...**, > quotes) goes through the envelope, which strips it.
SIMPLE_NCCL_LINE = rx(r"([\w.-]+):(\d+):(\d+) \[(\d+)\] NCCL INFO ([^\s`][^`]*)")


def _cut_expr(sp: tuple[int, int, int, int | None]) -> str:
    i, oi, j, oj = sp
    if i == j:
        if oi == 0 and oj is None:
            return f"p[{i}]"
        return f"p[{i}][{oi}:{'' if oj is None else oj}]"
    head = f"p[{i}]" if oi == 0 else f"p[{i}][{oi}:]"
    # runs in between: a slice joined, not a chain of '+' (a span over the 16,384 ranks
    # of a desync report made a chain the compiler recursed into until RecursionError)
    mid = "" if j == i + 1 else f"+p[{i + 1}]" if j == i + 2 else f"+''.join(p[{i + 1}:{j}])"
    tail = f"+p[{j}]" if oj is None else f"+p[{j}][:{oj}]"
    return head + mid + tail


def _compile_fill(spans: dict[str, Any]) -> Any:
    items = []
    for name, sp in spans.items():
        expr = "[" + ", ".join(_cut_expr(x) for x in sp) + "]" if isinstance(sp, list) else _cut_expr(sp)
        items.append(f"{name!r}: {expr}")
    src = "def fill(p):\n    return {" + ", ".join(items) + "}\n"
    ns: dict[str, Any] = {}
    exec(CODE.compile(src, "<template>"), ns)  # noqa: S102 - generated from span integers only
    return ns["fill"]


def line_template(text: str, parts: list[str]) -> Template | None:
    """A template for a plain ``host:pid:tid [dev] NCCL INFO message`` line, if it has one."""
    m = SIMPLE_NCCL_LINE.fullmatch(text)
    if m is None:
        return None
    body, offset = m.group(5), m.start(5)
    try:
        tree = parser().parse(body)
    except _lark_error():
        return None
    rule, fields = raw_of(tree)
    extra = {name: (m.start(i), m.end(i)) for i, name in enumerate(("_host", "_pid", "_tid", "_dev"), 1)}
    try:
        return _template(rule, fields, parts, offset, extra)
    except _Uncacheable:
        return None


def split_line(text: str) -> tuple[list[str], str]:
    """The value-run split of a line and its shape key."""
    parts = value_runs(text)
    return parts, "\x00".join(parts[0::2])


# Digits become NUL, a byte the readers remove from text, so no literal character can
# collide with a masked digit (a '#' could: "4127#" would reuse the template of "41271").
DIGITS_MASK = bytes.maketrans(b"0123456789", b"\0\0\0\0\0\0\0\0\0\0")


def fixed_key(text: str) -> bytes:
    """Shape key that keeps every character's position (digits become NUL): ASCII lines only."""
    return text.encode().translate(DIGITS_MASK)


#: a hex value run as :func:`value_runs` cuts it: ``0x`` and hex digits, from a ``0`` no run holds
#: (a ``0`` after a digit belongs to that digit's run; one after a hex run's letter, to that run).
#: Written to start with the literal ``0x`` (the look-behind after it): the engine then skips
#: to the next ``0x`` in C, 1.8 against 5.2 us for a ``ncclCommInitRank`` line
_HEX_RUN = rx(rb"0x(?<![0-9]0x)[0-9a-fA-F]+")


def _hex_mask(m: re.Match[bytes]) -> bytes:
    return b"\x80" * (m.end() - m.start())


def info_key(text: str) -> bytes:
    """:func:`fixed_key` with each hex run (a pointer, a commId) masked too, by ``0x80`` bytes:
    the key of the plain NCCL INFO lines' position-exact templates and plans (ASCII lines only).

    ``comm 0x55f6e5fcdc29 rank 5238 ...`` prints a new pointer on every line: with its hex
    letters in the key, each such line (48,000 of an 8,000-rank job's init) was a shape of its
    own and took the value-run split.  No ASCII character is ``0x80``, and hex runs and digit
    runs never touch (each takes the other's characters), so the key still fixes where every
    value run starts and ends: what a position-exact fill needs.

    The fast path's makers (``fastpath.MADE``) learn from lines of such a key by changing their
    digits: a template's field holds whole runs, so a field with a hex run in it moves with the
    run's ``0`` and is cut whole (the builder reads no hex letter: no fix in ``parse/build.py``
    looks into one).  The learned plans of other lines (:mod:`..learned`) keep :func:`fixed_key`:
    there a message's own code reads its values, and a hex letter could decide what it means; but
    an NCCL INFO line behind a launcher's prefix, a plain line's message, is learned by this key.
    """
    b = text.encode()
    if b"0x" in b:
        b = _HEX_RUN.sub(_hex_mask, b)
    return b.translate(DIGITS_MASK)


def fixed_spans(tpl: Template, parts: list[str]) -> dict[str, Any]:
    """Each field's absolute (start, end) in lines of this position-exact shape (a list of
    them for list fields): what :func:`fixed_fill` slices, and what the analyze fast path
    (:mod:`ncclsleuth.parse.fastpath`) cuts without making the fields."""
    starts, pos = [], 0
    for p in parts:
        starts.append(pos)
        pos += len(p)

    def cut(sp: tuple[int, int, int, int | None]) -> tuple[int, int]:
        i, oi, j, oj = sp
        return starts[i] + oi, starts[j] + (len(parts[j]) if oj is None else oj)

    return {name: [cut(x) for x in sp] if isinstance(sp, list) else cut(sp) for name, sp in tpl.spans.items()}


def fixed_fill(tpl: Template, parts: list[str]) -> Any:
    """A fill function with absolute slices for lines whose digit runs have these lengths."""
    items = []
    for name, sp in fixed_spans(tpl, parts).items():
        expr = "[" + ", ".join(f"t[{a}:{b}]" for a, b in sp) + "]" if isinstance(sp, list) else f"t[{sp[0]}:{sp[1]}]"
        items.append(f"{name!r}: {expr}")
    ns: dict[str, Any] = {}
    exec(CODE.compile("def fill(t):\n    return {" + ", ".join(items) + "}\n", "<fixed-template>"), ns)  # noqa: S102
    return ns["fill"]
