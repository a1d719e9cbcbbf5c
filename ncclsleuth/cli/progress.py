"""A progress bar on stderr for long analyses (files done, lines/s); silent otherwise.

Shown only when both stdout and stderr are terminals and the output is the terminal
view, so it never mixes into JSON or piped output.  It appears after two seconds, so
a quick run prints nothing extra.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def progress_for(enabled: bool, delay: float = 2.0) -> Iterator[Callable[[Any], None] | None]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    start = time.monotonic()
    state = {"files": 0, "lines": 0}
    prog: Progress | None = None
    task = None

    def tick(part: Any) -> None:
        nonlocal prog, task
        state["files"] += len(getattr(part, "sources", ())) or 1  # a worker's part is a run of files
        state["lines"] += getattr(part, "lines", 0)
        elapsed = time.monotonic() - start
        if prog is None and elapsed >= delay:
            prog = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
            prog.start()
            task = prog.add_task("")
        if prog is not None and task is not None:
            rate = state["lines"] / elapsed if elapsed else 0
            prog.update(task, description=f"{state['files']} files, {state['lines']:,} lines, {rate:,.0f} lines/s")

    try:
        yield tick
    finally:
        if prog is not None:
            prog.stop()
