"""An engine for inputs anywhere (object-store URLs through fsspec, and local paths):
per-file results in input order, read in this process or in a process pool, with the
listing consumed lazily (the pool gets inputs as they are listed)."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field
from typing import Any

from ..ingest.remote import LazyDiscovery
from ..ingest.sources import InputFile, Notice
from ..model.build import parse_one
from ..util.classes import dataclass


def _parse_task(args: tuple[InputFile, bool]):  # type: ignore[no-untyped-def]
    return parse_one(*args)


@dataclass
class RemoteSource:
    """Per-file results for :func:`ncclsleuth.api.build_model` (its ``engine`` hook), in input order.

    Reads in this process, or in ``jobs`` worker processes; the listing is consumed
    lazily (the pool gets inputs as they are listed).
    """

    paths: list[str]
    cache: bool = True
    jobs: int = 1
    storage_options: dict[str, Any] | None = None
    found: LazyDiscovery = field(init=False)

    def __post_init__(self) -> None:
        self.found = LazyDiscovery(self.paths, self.storage_options)

    @property
    def notices(self) -> list[Notice]:
        return self.found.notices

    def __iter__(self) -> Iterator[Any]:
        if self.jobs <= 1:
            for f in self.found:
                yield parse_one(f, self.cache)
            return
        import concurrent.futures as cf
        from collections import deque

        with cf.ProcessPoolExecutor(max_workers=self.jobs) as pool:
            window: deque[cf.Future[Any]] = deque()
            for f in self.found:
                window.append(pool.submit(_parse_task, (f, self.cache)))
                if len(window) >= self.jobs * 8:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()


def remote_engine(jobs: int = 1, storage_options: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    """An ``engine`` for :func:`~ncclsleuth.api.build_model` reading URLs (and local paths)."""

    def engine(paths: list[str], cache: bool) -> RemoteSource:
        return RemoteSource(list(paths), cache, jobs, storage_options)

    return engine
