"""Regexes compiled once per Python build, not once per process.

``re.compile`` parses a pattern and generates its matcher code in Python (``re._parser``,
``re._compiler``); only the last step, ``_sre.compile`` of that code, is in C.  The
patterns ncclsleuth builds at import (the grammar's anchors and prefilter keywords, the
block readers', the envelope's) took ~25 ms of a ~100 ms chat-ops answer, on every start,
for the same result each time.  :func:`rx` keeps the generated code in the per-user
cache folder (like :class:`~ncclsleuth.util.cache.CodeStore` keeps compiled functions,
with the same trust: a folder only this user can write) and hands it to ``_sre.compile``
on later starts.

What is kept is checked when it is made: the pattern built from the kept code must equal
``re.compile``'s (a compiled pattern compares its flags and matcher code), else nothing is
kept and ``re.compile`` is used; the file is per Python build (the code format is the
interpreter's), and ``_sre`` validates the code it is given.  Any failure falls back to
``re.compile``: the cache changes how fast a pattern is made, never what it matches.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Any, AnyStr

from .cache import CODE, RecentStore, cache_dir, read_marshal

try:  # CPython's regex engine; elsewhere (or if its internals move) plain re.compile
    import _sre  # type: ignore[import-not-found]
    from re import _compiler, _parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - not CPython
    _sre = None

_DEBUG = int(re.DEBUG)  # a plain int: ``int & RegexFlag`` builds an enum member on every call
#: (pattern, flags) -> the arguments of ``_sre.compile`` after the pattern
Entry = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]


class RegexStore(RecentStore):
    """Generated matcher code by (pattern, flags), loaded from disk on first use."""

    #: patterns kept (ncclsleuth compiles ~200 at import; user rules add theirs)
    MAX_ENTRIES = 1_000

    def __init__(self) -> None:
        super().__init__()
        self._kept: dict[tuple[str | bytes, int], Entry] | None = None
        #: what this process compiled (a pattern asked for again is not rebuilt)
        self._patterns: dict[tuple[str | bytes, int], re.Pattern[Any]] = {}

    def compile(self, pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
        """``re.compile(pattern, flags)``, from the kept code when this build made it before."""
        flags = int(flags)
        if _sre is None or flags & _DEBUG:
            return re.compile(pattern, flags)
        key = (pattern, flags)
        made = self._patterns.get(key)
        if made is not None:
            return made
        if self._kept is None:
            self._kept = _read()
        entry = self._kept.get(key)
        if entry is not None:
            try:
                compiled: re.Pattern[AnyStr] = _sre.compile(pattern, *entry)
                if key not in self._new:
                    self._used.add(key)
                self._patterns[key] = compiled
                return compiled
            except (TypeError, ValueError, RuntimeError, OverflowError):
                del self._kept[key]
        compiled = re.compile(pattern, flags)
        entry = _entry(pattern, flags, compiled)
        if entry is not None and len(self._new) < self.MAX_ENTRIES:
            self._kept[key] = entry
            self._made(key, entry)
        self._patterns[key] = compiled
        return compiled

    def _where(self) -> str | None:
        return _path()

    def _read(self) -> dict[Any, Any]:
        return _read()


def _entry(pattern: str | bytes, flags: int, compiled: re.Pattern[Any]) -> Entry | None:
    """The ``_sre.compile`` arguments that rebuild ``compiled`` (as ``re._compiler.compile``
    makes them), or None when they do not rebuild an equal pattern."""
    try:
        p = _parser.parse(pattern, flags)
        code = _compiler._code(p, flags)
        groupindex = dict(p.state.groupdict)
        indexgroup: list[str | None] = [None] * p.state.groups
        for k, i in groupindex.items():
            indexgroup[i] = k
        # plain ints: the opcodes are an int subclass, which marshal does not write
        entry: Entry = (int(flags | p.state.flags), [int(c) for c in code], int(p.state.groups - 1), groupindex,
                        tuple(indexgroup))
        again = _sre.compile(pattern, *entry)
    except Exception:  # noqa: BLE001 - internals of another Python version: not kept
        return None
    same = again == compiled and again.groupindex == compiled.groupindex and again.groups == compiled.groups
    return entry if same else None


def _path() -> str | None:
    folder = cache_dir()
    if folder is None:
        return None
    return os.path.join(folder, f"regex-{sys.implementation.cache_tag}-{sys.hexversion:x}-{_sre.MAGIC}.marshal")


def _read() -> dict[Any, Entry]:
    """The kept entries, each checked for shape; else empty."""
    data = read_marshal(_path())
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if _well_formed(k, v)}


def _well_formed(key: Any, value: Any) -> bool:
    return (type(key) is tuple and len(key) == 2 and type(key[0]) in (str, bytes) and type(key[1]) is int
            and type(value) is tuple and len(value) == 5 and type(value[0]) is int and type(value[1]) is list
            and type(value[2]) is int and type(value[3]) is dict and type(value[4]) is tuple)


#: the process's regex store
RX = RegexStore()


def rx(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile`` for the patterns ncclsleuth makes at import: see the module docstring."""
    return RX.compile(pattern, flags)


def keep_compiled() -> None:
    """Save the code and the regexes compiled since the parse saved them (the classes of the
    rules' findings and of the renderers are made after it: 15 functions compiled again by
    every start of ``analyze``)."""
    CODE.save()
    RX.save()
