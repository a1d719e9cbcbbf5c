"""Helpers every stage may use: the per-user cache folder and its files, the gc pause, the
listing of a YAML data folder, the bounded tables, a field of a /proc file."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

V = TypeVar("V")

#: ``(n, work)`` -> ``work(0)``, ..., ``work(n - 1)`` in order, some of them computed in other
#: processes (``ncclsleuth.parallel.rulestep`` makes one, ``ncclsleuth.rules.ranking`` uses it)
Spread = Callable[[int, Callable[[int], Any]], Iterator[Any]]


def bounded_put(table: dict[Any, V], bound: int, key: Any, value: V) -> V:
    """``table[key] = value``, the table emptied first where it holds ``bound`` entries: the one
    policy of the process-wide tables that remember values and shapes for reuse (the values that
    repeat are soon back, a hostile input cannot make one grow without end).  ``value``."""
    if len(table) >= bound:
        table.clear()
    table[key] = value
    return value


def proc_field(path: str, key: str) -> str | None:
    """The first value after ``key`` (``"VmRSS:"``) on its line of a Linux /proc file such as
    ``/proc/self/status`` or ``/proc/meminfo``; None where the file or the line is not there."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(key):
                    parts = line.split()
                    return parts[1] if len(parts) > 1 else None
    except OSError:
        pass
    return None


def yaml_files(folder: str | os.PathLike[str]) -> list[str]:
    """Every ``*.yaml`` under ``folder``, as ``sorted(Path(folder).rglob("*.yaml"))`` lists
    them (any entry so named, symlinked folders not entered, sorted part by part), as strings.

    Every start lists the rule pack and the knowledge base (~190 files): pathlib's ``rglob``
    and the sort of its Paths took ~1 ms of a ~60 ms chat-ops answer, ``os.scandir`` ~0.25 ms.
    """
    out: list[str] = []
    stack = [str(Path(folder))]  # the root written as the Paths would write it
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:  # as rglob: a folder that cannot be listed has nothing in it
            continue
        with entries:
            for entry in entries:
                if entry.name.endswith(".yaml"):
                    out.append(entry.path)
                try:
                    inside = entry.is_dir() and not entry.is_symlink()
                except OSError:
                    inside = False
                if inside:
                    stack.append(entry.path)
    out.sort(key=lambda p: p.split(os.sep))
    return out
