"""Every line of many inputs as events, streaming, in file order (``ncclsleuth parse``).

The line-at-a-time path: every line becomes an event (``text`` ones included) with its
catalog id, as opposed to the block-reading fast path of the model
(:func:`ncclsleuth.model.build.parse_one`), which keeps only what rules look at.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field

from ..events import Event
from ..ingest.decode import LineReader
from ..ingest.sources import InputFile, Notice, discover
from ..util.classes import dataclass
from .grammar import ShapeCache
from .lines import FileParser


def parse_file(inp: InputFile, cache: ShapeCache) -> tuple[Iterator[Event], LineReader]:
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

    def __iter__(self) -> Iterator[Event]:
        found = discover(self.paths)
        self.notices.extend(found.notices)
        shapes = ShapeCache(enabled=self.cache)
        for inp in found.files:
            events, reader = parse_file(inp, shapes)
            yield from events
            self.notices.extend(reader.notices)
            if reader.lines or not reader.notices:
                self.files_read += 1
        shapes.save()


def iter_events(paths: list[str], cache: bool = True) -> EventRun:
    """All events of ``paths`` in file order, streaming."""
    return EventRun(paths, cache)
