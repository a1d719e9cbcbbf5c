"""The stages wired together: discover inputs, read each file, parse it into events.

Files are independent until the model merges them, so each file is parsed on its own
(:func:`parse_file`); the analyzer and the parallel runner build on that unit.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from . import events as E
from .grammar import ShapeCache
from .ingest import InputFile, LineReader, Notice, discover
from .parse import FileParser


def parse_file(inp: InputFile, cache: ShapeCache) -> tuple[Iterator[E.Event], LineReader]:
    """Events of one input (lazy) and the reader holding its notices."""
    reader = LineReader(inp)
    fp = FileParser(inp.display, cache)
    return fp.parse_lines(reader), reader


@dataclass
class EventRun:
    """Iterable over the events of many inputs; notices fill in as files are read."""

    paths: list[str]
    cache: bool = True
    notices: list[Notice] = field(default_factory=list)
    files_read: int = 0

    def __iter__(self) -> Iterator[E.Event]:
        found = discover(self.paths)
        self.notices.extend(found.notices)
        shapes = ShapeCache(enabled=self.cache)
        for inp in found.files:
            events, reader = parse_file(inp, shapes)
            yield from events
            self.notices.extend(reader.notices)
            if reader.lines or not reader.notices:
                self.files_read += 1


def iter_events(paths: list[str], cache: bool = True) -> EventRun:
    """All events of ``paths`` in file order, streaming."""
    return EventRun(paths, cache)
