"""A progress bar on stderr for long analyses: files and bytes done of the total, ETA.

The inputs are known once they are discovered (``api.Options.on_inputs``): the bar
counts their bytes (a finished file is done; a compressed file counts its size on disk)
and files.  It appears after ``delay`` seconds, so a quick run prints nothing extra;
a timer starts it, so one long file shows it too (its bar moves when the file is done).
Shown only when stderr is a terminal (the CLI decides), never in the output itself.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class Bar:
    """What ``api.Options`` calls: ``inputs`` once with the files, ``tick`` per part merged."""

    def __init__(self, delay: float, console: Any = None) -> None:
        self.delay = delay
        self.console = console
        self.sizes: dict[str, int] = {}
        self.total_files = 0
        self.done_files = 0
        self.lock = threading.Lock()
        self.progress: Any = None
        self.task: Any = None
        self.timer: threading.Timer | None = None
        self.stopped = False
        self.pending = 0  # bytes done before the bar appeared

    def inputs(self, files: Sequence[Any]) -> None:
        for f in files:
            path = getattr(f, "path", str(f))
            data = getattr(f, "data", None)
            try:
                size = len(data) if isinstance(data, bytes) else os.stat(path).st_size
            except OSError:
                size = 0
            self.sizes[path] = max(1, size)
        self.total_files = len(files)
        if self.delay <= 0:  # at once, not from a timer thread that a short run can finish before
            self._start()
            return
        self.timer = threading.Timer(self.delay, self._start)
        self.timer.daemon = True
        self.timer.start()

    def tick(self, part: Any) -> None:
        sources = list(getattr(part, "sources", ()))
        with self.lock:
            self.done_files += len(sources) or 1
            done = sum(self.sizes.get(s, 0) for s in sources)
            if self.progress is not None:
                self.progress.update(self.task, advance=done, files=self._files())
            else:
                self.pending += done

    def _files(self) -> str:
        return f"{self.done_files:,}/{self.total_files:,} files"

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        with self.lock:
            if self.stopped:
                return
            self.progress = Progress(TextColumn("reading"), BarColumn(), TaskProgressColumn(),
                                     TextColumn("{task.fields[files]}"), TextColumn("ETA"), TimeRemainingColumn(),
                                     console=self.console or Console(stderr=True), transient=True)
            self.task = self.progress.add_task("", total=sum(self.sizes.values()) or 1,
                                               completed=self.pending, files=self._files())
            self.progress.start()

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            if self.timer is not None:
                self.timer.cancel()
            if self.progress is not None:
                self.progress.stop()


#: seconds before the bar appears: a run shorter than this prints nothing extra
DELAY = 2.0


@contextmanager
def progress_for(enabled: bool, delay: float | None = None, console: Any = None) -> Iterator[Bar | None]:
    """A :class:`Bar` while the block runs (None when not ``enabled``)."""
    if not enabled:
        yield None
        return
    bar = Bar(DELAY if delay is None else delay, console)
    try:
        yield bar
    finally:
        bar.stop()
