"""Events as ``ncclsleuth parse`` prints them: one JSON object per line, or a table."""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO

from ..events import Event

#: envelope fields the table shows in columns of their own (or not at all)
_ENVELOPE = {"kind", "source", "line", "text", "host", "pid", "tid", "dev", "level", "ts", "rank"}


def write_jsonl(events: Iterable[Event], out: IO[str]) -> None:
    for ev in events:
        out.write(json.dumps(ev.to_dict(), ensure_ascii=False) + "\n")


def print_table(events: Iterable[Event]) -> None:
    """A rich table on the terminal: file:line, kind, level, host and the typed fields."""
    from rich.console import Console
    from rich.table import Table

    t = Table("file:line", "kind", "level", "host", "fields")
    for ev in events:
        d = ev.to_dict()
        fields = ", ".join(f"{k}={v}" for k, v in d.items() if k not in _ENVELOPE)
        t.add_row(f"{ev.source}:{ev.line}", ev.kind, ev.level or "", ev.host or "", fields[:160])
    Console().print(t)
