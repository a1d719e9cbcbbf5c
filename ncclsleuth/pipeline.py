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


# --------------------------------------------------------------------------- analyze


def build_model(paths: list[str], cache: bool = True):  # type: ignore[no-untyped-def]
    """Parse every input into one :class:`JobModel`; returns (model, notices, files_read)."""
    from .model import JobModel

    model = JobModel()
    found = discover(paths)
    notices = list(found.notices)
    shapes = ShapeCache(enabled=cache)
    files_read = 0
    for inp in found.files:
        events, reader = parse_file(inp, shapes)
        model.add_source(inp.display)
        for ev in events:
            model.add(ev)
        model.lines += reader.lines
        notices.extend(reader.notices)
        if reader.lines or not reader.notices:
            files_read += 1
    return model, notices, files_read


def analyze(paths: list[str], rules=None, cache: bool = True):  # type: ignore[no-untyped-def]
    """The main job: paths -> :class:`~ncclsleuth.report.Report` (and how many files were read)."""
    from .rules.engine import build_report, load_rules

    if rules is None:
        rules, _ = load_rules()
    model, notices, files_read = build_model(paths, cache)
    report = build_report(model, rules, [n.to_dict() for n in notices])
    return report, files_read
