"""What each message means: the knowledge base under ``knowledge/`` (data, not code).

Every entry records, for one message format of NCCL, PyTorch distributed or a neighbour
(gloo, aws-ofi-nccl, RCCL, nccl-tests, the kernel and driver), what the code that prints
it was doing: the subsystem, whether the line is a root cause (and of which category), a
symptom, context or benign, the fix, and the code it was read from.  Rules reason over
these meanings (``fact: known_message``); they do not repeat them.

The YAML is parsed once and kept as JSON in the per-user cache while no file changes
(parsing 1.5 MB of YAML costs ~0.6 s; the JSON ~20 ms), and only when a run meets a
problem line: a log without WARN or error lines never loads it.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..util import yaml_files
from ..util.cache import cache_dir, derived, is_kept, keep, keep_blob, read_at, unmarshal
from ..util.classes import dataclass
from .identify import (
    NUMBER_RUN,
    TORCH_FORMATS,
    FormatIndex,
    Identifier,
    Known,
    literal_numbers,
    literal_parts,
    torch_formats,
)
from .schema import KnowledgeError, validate_file

__all__ = ["NUMBER_RUN", "Identifier", "KnowledgeBase", "KnowledgeError", "Known", "Meaning", "default_dir", "explain",
           "explain_warn", "identifier", "load", "norm_file", "numbers", "pattern_reads_digits", "reads_digits"]


@dataclass(frozen=True)
class Meaning:
    """One message's meaning, with the context variant that applied already folded in."""

    id: str
    source: str
    format: str
    function: str
    subsystem: str
    role: str  # cause | symptom | context | benign | unknown
    categories: tuple[str, ...]
    severity: str  # error | warning | info
    meaning: str
    why: str
    fix: str
    ref: str
    files: tuple[str, ...] = ()

    @property
    def category(self) -> str | None:
        """The root-cause category (a symptom's most likely cause)."""
        return self.categories[0] if self.categories else None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "subsystem": self.subsystem, "role": self.role,
                "category": self.category, "severity": self.severity, "meaning": self.meaning,
                "fix": self.fix, "ref": self.ref}


def norm_file(path: str) -> str:
    """A source path as NCCL prints it in a WARN prefix: relative to ``src/``.

    NCCL prints ``misc/socket.cc``; the catalog says ``src/misc/socket.cc``; RCCL builds
    print ``/long/build/path/src/init.cc``.  All three become ``misc/socket.cc``-style.
    """
    i = path.rfind("/src/")
    if i >= 0:
        return path[i + 5:]
    return path[4:] if path.startswith("src/") else path


#: the keys of an entry a run uses (``example`` is for the tests, ``format`` for the index)
_KEEP = ("id", "format", "files", "function", "subsystem", "role", "category", "severity", "meaning", "why", "fix",
         "ref", "context")


def _by_id(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        source = doc.get("source", "")
        for e in doc.get("entries") or ():
            e = {k: e[k] for k in _KEEP if k in e}
            e["source"] = source
            e["_files"] = tuple(norm_file(f) for f in e.get("files") or ())
            out.setdefault(str(e["id"]), []).append(e)
    return out


def _flat(v: Any) -> str:
    """A folded YAML text as one line."""
    return " ".join(str(v or "").split())


def _cats(v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    return tuple(v) if isinstance(v, list) else (str(v),)


class KnowledgeBase:
    """Entries by id; :meth:`lookup` picks the entry for the file and the context variant."""

    def __init__(self, docs: list[dict[str, Any]] | None = None,
                 packed: Mapping[str, bytes | tuple[int, int]] | None = None, blob: str | None = None,
                 folder: str | None = None) -> None:
        """From parsed files (``docs``) or from a :func:`_table` (``packed``: each id's entries
        as marshal data, decoded when the id is looked up: a run meets a handful of ids; or
        where they are in the file ``blob``, as (offset, size), read when looked up)."""
        self._by_id: dict[str, list[dict[str, Any]]] = _by_id(docs or []) if packed is None else {}
        self._packed = packed or {}
        self._blob, self._folder = blob, folder
        self._compiled: dict[str, re.Pattern[str]] = {}
        self._meanings: dict[tuple[str, str | None, str | None, tuple[bool, ...]], Meaning] = {}
        self._by_message: dict[str, tuple[str, ...]] = {}
        self._digits: dict[str, bool] = {}

    def _entries(self, key: str) -> list[dict[str, Any]] | None:
        got = self._by_id.get(key)
        if got is None and key in self._packed:
            kept = self._packed[key]
            data = kept if isinstance(kept, bytes) else read_at(self._blob or "", *kept)
            got = unmarshal(data) if data is not None else None
            if not isinstance(got, list):  # the blob went away or was damaged under a running process: the files
                docs = _docs(self._folder or str(default_dir()))
                self._by_id.update(_by_id([docs[p] for p in sorted(docs)]))
                self._packed = {}
                return self._by_id.get(key)
            self._by_id[key] = got
        return got

    def __len__(self) -> int:
        return sum(len(self._entries(k) or ()) for k in self.ids())

    def __contains__(self, key: str) -> bool:
        return key in self._by_id or key in self._packed

    def ids(self) -> list[str]:
        return sorted(set(self._by_id) | set(self._packed))

    def source_of(self, key: str) -> str | None:
        cands = self._entries(key)
        return str(cands[0]["source"]) if cands else None

    def formats(self) -> list[tuple[str, str, str]]:
        """(source, id, format) of every entry."""
        return [(str(e["source"]), key, str(e.get("format", "")))
                for key in self.ids() for e in self._entries(key) or ()]

    def lookup(self, key: str, *, file: str | None = None, message: str = "",
               phase: str | None = None) -> Meaning | None:
        """The meaning of message ``key`` printed from ``file`` (a WARN prefix path), with
        the first context variant whose ``when`` holds for ``message`` and ``phase``."""
        cands = self._entries(key)
        if not cands:
            return None
        f = norm_file(file) if file else None
        # the meaning depends on the message text only through the variants' message patterns:
        # one lookup per (id, file, phase, which patterns hold), not per problem line (a
        # 1,600-rank job has ~10,000, each unique by its rank)
        memo = (key, f, phase, tuple(self._rx(v).search(message) is not None for v in self._patterns(key, cands)))
        hit = self._meanings.get(memo)
        if hit is None:
            hit = self._meanings[memo] = self._lookup(key, cands, f, message, phase)
        return hit

    def _patterns(self, key: str, cands: list[dict[str, Any]]) -> tuple[str, ...]:
        """The ``message`` patterns of the context variants of ``key``'s entries."""
        got = self._by_message.get(key)
        if got is None:
            got = self._by_message[key] = tuple(dict.fromkeys(
                str(v["when"]["message"]) for e in cands for v in e.get("context") or ()
                if "message" in (v.get("when") or {})))
        return got

    def reads_digits(self, key: str) -> bool:
        """Whether a context variant of message ``key`` may tell two lines apart by the digits of
        a number of three or more (:func:`pattern_reads_digits`): then a meaning found for one line
        is not one for every line of its shape with other such numbers."""
        got = self._digits.get(key)
        if got is None:
            cands = self._entries(key) or []
            got = self._digits[key] = any(map(pattern_reads_digits, self._patterns(key, cands)))
        return got

    def _rx(self, pattern: str) -> re.Pattern[str]:
        rx = self._compiled.get(pattern)
        if rx is None:
            rx = self._compiled[pattern] = re.compile(pattern)
        return rx

    def _lookup(self, key: str, cands: list[dict[str, Any]], f: str | None, message: str,
                phase: str | None) -> Meaning:
        entry = cands[0]
        if f is not None and len(cands) > 1:
            entry = next((e for e in cands if f in e["_files"]), next((e for e in cands if not e["_files"]), entry))
        fields: dict[str, Any] = {k: entry.get(k) for k in ("role", "category", "severity", "meaning", "fix")}
        for variant in entry.get("context") or ():
            if self._holds(variant.get("when") or {}, f, message, phase):
                fields.update({k: variant[k] for k in fields if k in variant})
                break
        return Meaning(id=key, source=entry["source"], format=entry.get("format", ""),
                       function=entry.get("function", ""), subsystem=entry.get("subsystem", ""),
                       role=str(fields["role"]), categories=_cats(fields["category"]),
                       severity=str(fields["severity"]), meaning=_flat(fields["meaning"]), why=_flat(entry.get("why")),
                       fix=str(fields["fix"] or "").strip(), ref=_flat(entry.get("ref")),
                       files=tuple(entry.get("files") or ()))

    def _holds(self, when: dict[str, Any], file: str | None, message: str, phase: str | None) -> bool:
        for k, v in when.items():
            if k == "message":
                if self._rx(v).search(message) is None:
                    return False
            elif k == "phase":
                if phase != v:
                    return False
            elif k == "file":
                if file is None or norm_file(str(v)) != file:
                    return False
        return True


#: characters of a regex that match themselves, and that are no digit
_PLAIN = frozenset(chr(c) for c in range(32, 127)) - set("0123456789.^$*+?{}[]|()\\")


def pattern_reads_digits(pattern: str) -> bool:
    """Whether a ``message`` pattern may match differently in two lines that differ only in a
    number of three or more digits: it has ``\\d``, a class or a quantifier near a digit, a run of
    three or more digits (``errno: 113``), or a digit that is not held between two plain
    characters (``Error 80[34]``, ``1: DOWN`` at its start).  ``SeqNum=1, `` reads a number of
    one digit, which a line of any other number does not hold there."""
    if "\\d" in pattern:
        return True
    for m in re.finditer(r"[0-9]+", pattern):
        a, b = m.span()
        if b - a >= 3 or a == 0 or b == len(pattern):
            return True
        if pattern[a - 1] not in _PLAIN or pattern[b] not in _PLAIN or (a >= 2 and pattern[a - 2] == "\\"):
            return True
    return False


def reads_digits(key: str, folder: str | None = None) -> bool:
    """:meth:`KnowledgeBase.reads_digits` of the knowledge base of ``folder``."""
    return load(folder).reads_digits(key)


def numbers(folder: str | None = None) -> frozenset[str]:
    """The runs of three or more digits that a format of a message in the catalogs or the knowledge
    base, or a context pattern of its entries, holds as text (``119`` of ``Xid ...: 119``, ``113`` of
    ``errno: 113``): the numbers a line is told apart by (:func:`literal_numbers`)."""
    if folder is None:  # asked for every problem line a cache of meanings keys: no path made each time
        return _default_numbers(os.environ.get("NCCLSLEUTH_KNOWLEDGE"))
    return _numbers(str(Path(folder)))


@lru_cache(maxsize=4)
def _default_numbers(env: str | None) -> frozenset[str]:
    return _numbers(str(_default_dir(env)))


@lru_cache(maxsize=4)
def _numbers(folder: str) -> frozenset[str]:
    return frozenset(_table(folder)["numbers"])


def _where(folder: str | Path | None) -> str:
    """The knowledge folder ``folder`` names, or the default one (:func:`default_dir`), as the
    caches key it."""
    return str(Path(folder) if folder else default_dir())


def default_dir() -> Path:
    """``knowledge/`` of a source checkout, else the copy shipped in the package."""
    return _default_dir(os.environ.get("NCCLSLEUTH_KNOWLEDGE"))


@lru_cache(maxsize=4)
def _default_dir(env: str | None) -> Path:
    """Per value of the variable: every line a run explains asks (56,000 lines of a
    16,384-rank job paid a path resolve and two stats each, 15 s)."""
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    for cand in (here.parent.parent / "knowledge", here.parent / "_knowledge"):
        if cand.is_dir():
            return cand
    return here.parent.parent / "knowledge"


def load(folder: str | Path | None = None, check: bool = False) -> KnowledgeBase:  # noqa: D417
    """The knowledge base of ``folder`` (default: the shipped one), from the cache when no
    file changed.  ``check`` validates every file (the tests and ``kb_check`` do; a run
    trusts the shipped data)."""
    return _load(_where(folder), check)


@lru_cache(maxsize=4)
def _load(folder: str, check: bool) -> KnowledgeBase:
    if check:  # the tests: every file parsed and validated, no cache
        docs = _docs(folder)
        for path, doc in docs.items():
            validate_file(doc, path)
        return KnowledgeBase([docs[p] for p in sorted(docs)])
    table = _table(folder)
    return KnowledgeBase(packed=table.get("index") or table["by_id"], blob=table.get("blob"), folder=folder)


def _docs(folder: str) -> dict[str, Any]:
    from ..util.yamldocs import read_yaml  # not on a warm start: the index is kept

    return {p: read_yaml(Path(p)) for p in yaml_files(folder)}


#: bump when the table's layout changes
TABLE_VERSION = 6


@lru_cache(maxsize=4)
def _table(folder: str) -> dict[str, Any]:
    """What a run needs of the knowledge base, built once per change of its files: the
    entries by id and the other sources' formats as literal parts for :class:`Identifier`.

    Kept as marshal data (``util.cache.derived``): 4.5 MB of YAML parse in ~1 s and make
    ~2,900 entries; loading the table costs a few ms, which is what a chat-ops answer
    with one WARN line pays.  The entries (3 MB of marshal data, 3.5 MB once loaded) are
    kept apart in a blob (``util.cache.keep_blob``) and read by offset when an id is looked
    up: a run looks up a handful, and every process that explained a line held all of them.
    """
    sources = _sources(folder)

    def build() -> dict[str, Any]:
        import marshal

        docs = _docs(folder)
        kb = KnowledgeBase([docs[p] for p in sorted(docs)])
        catalog = torch_formats()
        others = [("torch", key, fmt) for key, fmt in catalog if key not in kb or kb.source_of(key) == "torch"]
        # the other sources' formats, and PyTorch messages that the catalog lacks (TORCH-<slug>)
        in_catalog = {key for key, _ in catalog}
        others += [(src, key, fmt) for src, key, fmt in kb.formats()
                   if src != "nccl" and not (src == "torch" and key in in_catalog)]
        return {"by_id": {key: marshal.dumps(kb._entries(key)) for key in kb.ids()},
                "others": FormatIndex.prepare([(src, key, literal_parts(fmt)) for src, key, fmt in others]),
                "numbers": _told_apart_by(kb, [fmt for _, _, fmt in others])}

    def build_with_blob() -> dict[str, Any]:
        table = build()
        index, parts, at = {}, [], 0
        for key, data in table["by_id"].items():
            index[key] = (at, len(data))
            parts.append(data)
            at += len(data)
        blob = keep_blob("knowledge", b"".join(parts))
        if blob is None:  # no cache folder: the entries stay in the table
            return table
        return {"index": index, "blob": blob, "blob_size": at, "others": table["others"],
                "numbers": table["numbers"]}

    table: dict[str, Any] = derived("knowledge", sources, build_with_blob, TABLE_VERSION)
    if "blob" in table and not _blob_there(table["blob"], table["blob_size"]):  # removed since
        table = build_with_blob()
        keep("knowledge", sources, table, TABLE_VERSION)
    return table


def _told_apart_by(kb: KnowledgeBase, formats: list[str]) -> list[str]:
    """:func:`numbers`, of the NCCL catalog, ``formats`` (the other sources') and ``kb``'s patterns."""
    from ..parse import catalog  # the NCCL catalog: read when the table is made, not by a run

    found: set[str] = set()
    for fmt in [*(f.format for f in catalog.by_id().values()), *formats]:
        found |= literal_numbers(fmt)
    for key in kb.ids():
        for pattern in kb._patterns(key, kb._entries(key) or []):
            found.update(NUMBER_RUN.findall(pattern))
    return sorted(found)


def _sources(folder: str) -> list[str]:
    """The files the knowledge table is made of (:func:`_table`)."""
    return [*yaml_files(folder), str(TORCH_FORMATS)]


def prepare(folder: str | Path | None = None) -> None:
    """Make the knowledge table now where none is kept for its files (a first run, a changed
    knowledge base), while the job model is small: reading its 4.5 MB of YAML took ~11 MB more at
    the peak of a first run on the 8,000-rank file when it came after the parse (the memory it
    freed stayed the process's).  Where a table is kept, nothing is read: a few stats, once a
    process (a server answers many questions)."""
    _prepare(_where(folder))


@lru_cache(maxsize=4)
def _prepare(folder: str) -> None:
    if not table_kept(folder):
        _table(folder)


def table_kept(folder: str | Path | None = None) -> bool:
    """Whether the cache folder keeps the knowledge table of ``folder``'s files as they are (a few
    stats; a yes is remembered for the process and that cache folder): where it does not, a run is
    a first run."""
    where = (_where(folder), cache_dir())
    if where in _KEPT:
        return True
    if is_kept("knowledge", _sources(where[0]), TABLE_VERSION):
        _KEPT.add(where)
        return True
    return False


#: (knowledge folder, cache folder) where this process found the table kept
_KEPT: set[tuple[str, str | None]] = set()


def _blob_there(path: str, size: int) -> bool:
    try:
        return os.path.getsize(path) == size
    except OSError:
        return False


@lru_cache(maxsize=4)
def identifier(folder: str | None = None) -> Identifier:
    """Lines -> message ids: NCCL's catalog, PyTorch's, and the other sources' formats."""
    return Identifier.from_prepared(_table(_where(folder))["others"])


def explain(text: str, phase: str | None = None, folder: str | None = None) -> tuple[Known, Meaning] | None:
    """What a problem line means: the message identified, and its meaning in this context."""
    return _meaning(identifier(folder).identify(text), phase, folder)


def explain_warn(message: str, phase: str | None = None, folder: str | None = None) -> tuple[Known, Meaning] | None:
    """What an NCCL WARN message quoted without its prefix means (``Event.inner``: PyTorch's
    ``Last error:``, XLA's ``Last NCCL warning``, a line pasted without the word NCCL)."""
    return _meaning(identifier(folder).identify_warn(message), phase, folder)


def _meaning(known: Known | None, phase: str | None, folder: str | None) -> tuple[Known, Meaning] | None:
    if known is None:
        return None
    meaning = load(folder).lookup(known.id, file=known.file, message=known.message, phase=phase)
    return (known, meaning) if meaning is not None else None
