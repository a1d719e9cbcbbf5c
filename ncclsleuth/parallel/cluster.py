"""Dask as the engine: parse the files of a (very) large job on a cluster, merge here.

``ncclsleuth analyze s3://bucket/job --scheduler tcp://host:8786`` (or ``local:N``
for a :class:`dask.distributed.LocalCluster` of N worker processes) lists the inputs
lazily on the client, sends them to the workers in batches (``client.map`` over
batches of :class:`~ncclsleuth.ingest.sources.InputFile`), and each task returns the compact
per-file :class:`~ncclsleuth.model.job.JobModel` of each of its files (aggregates and the
events the rules look at; never the raw lines).  Results are taken as they complete
(``as_completed``), held in a reorder buffer, and handed to
:func:`ncclsleuth.api.build_model` strictly in input order, which merges them one
by one: the report is byte-identical to a single-machine run.

Memory on the client stays bounded: at most ``window`` batches are in flight or
waiting in the reorder buffer, and the listing is consumed only as fast as the
cluster works through it.

Workers need ncclsleuth installed and must see the inputs: object-store URLs work
anywhere (storage options resolved on the client travel with each input, and
credentials come from the workers' environment); local paths must exist on every
worker (a shared file system), which ``local:N`` always satisfies.

dask is imported only when this engine runs.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import field
from typing import Any

from ..ingest.remote import INSTALL_HINT, LazyDiscovery, anchored
from ..ingest.sources import EngineError, InputFile, MissingDependency, Notice
from ..util.classes import dataclass

#: files per task: amortises the ~1 ms scheduling cost of a task over several small rank logs
BATCH_FILES = 16
#: batch by bytes too, so one task is never a huge amount of work
BATCH_BYTES = 64 << 20


def require_dask() -> None:
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        raise MissingDependency(f"--scheduler needs dask[distributed]: {INSTALL_HINT}") from None


def parse_batch(files: list[InputFile], cache: bool) -> list[tuple[Any, list[Notice], bool]]:
    """Worker side: ``parse_one`` over a batch; only the compact per-file results travel back."""
    from ..model.build import parse_one

    return [parse_one(f, cache) for f in files]


def parse_scheduler(spec: str) -> tuple[str, int | None]:
    """``local:N`` -> ("local", N); ``tcp://host:8786`` (any dask address) -> (address, None)."""
    if spec == "local" or spec.startswith("local:"):
        n = spec.partition(":")[2] or "0"
        if not n.isdecimal():
            raise ValueError(f"--scheduler {spec!r}: expected local:N with N worker processes")
        return "local", int(n) or None
    if "://" not in spec:
        raise ValueError(f"--scheduler {spec!r}: expected tcp://host:port (or another dask address) or local:N")
    return spec, None


@dataclass
class DaskSource:
    """Per-file results from a Dask cluster, in input order (the ``engine`` hook of ``build_model``)."""

    paths: list[str]
    cache: bool
    scheduler: str
    storage_options: dict[str, Any] | None = None
    batch_files: int = BATCH_FILES
    window: int | None = None
    on_progress: Callable[[int, int, float], None] | None = None
    found: LazyDiscovery = field(init=False)
    stats: dict[str, float] = field(default_factory=dict)
    _client: Any = field(default=None, init=False, repr=False)
    _cluster: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.found = LazyDiscovery(self.paths, self.storage_options)

    @property
    def notices(self) -> list[Notice]:
        return self.found.notices

    # ------------------------------------------------------------------ cluster

    def _connect(self) -> Any:
        require_dask()
        from dask.distributed import Client, LocalCluster

        address, n = parse_scheduler(self.scheduler)
        if address == "local":
            self._cluster = LocalCluster(n_workers=n, processes=True, threads_per_worker=1,
                                         dashboard_address=":0", host="127.0.0.1")
            self._client = Client(self._cluster)
        else:
            try:
                self._client = Client(address, timeout="30s")
            except (OSError, TimeoutError) as exc:
                raise EngineError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    # ------------------------------------------------------------------ work

    def _batches(self) -> Iterator[list[InputFile]]:
        batch: list[InputFile] = []
        size = 0
        for f in self.found:
            if f.path == "-":
                raise EngineError("standard input (-) cannot be read by a cluster; save it to a file")
            batch.append(anchored(f))  # workers may run in another folder
            size += getattr(f, "size", None) or 0
            if len(batch) >= self.batch_files or size >= BATCH_BYTES:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def __iter__(self) -> Iterator[tuple[Any, list[Notice], bool]]:
        from dask.distributed import as_completed

        client = self._client or self._connect()
        workers = max(1, sum(client.nthreads().values()))
        window = self.window or max(4, workers * 4)
        batches = self._batches()
        done: dict[int, list[Any]] = {}  # reorder buffer: batch index -> results
        index_of: dict[Any, int] = {}
        ac = as_completed()
        next_submit = next_yield = 0
        files = lines = 0
        start = time.monotonic()
        exhausted = False
        buffered = 0

        def refill() -> None:
            nonlocal next_submit, exhausted
            room = window - (next_submit - next_yield)
            group: list[list[InputFile]] = []
            while not exhausted and len(group) < room:
                b = next(batches, None)
                if b is None:
                    exhausted = True
                else:
                    group.append(b)
            if group:
                futs = client.map(parse_batch, group, cache=self.cache, pure=False)
                for fut in futs:
                    index_of[fut.key] = next_submit
                    next_submit += 1
                    ac.add(fut)

        refill()
        while next_yield < next_submit:
            fut = next(ac)
            done[index_of.pop(fut.key)] = fut.result()
            fut.release()
            buffered = max(buffered, len(done) - (next_yield in done))
            while next_yield in done:
                for result in done.pop(next_yield):
                    files += 1
                    lines += getattr(result[0], "lines", 0)
                    yield result
                next_yield += 1
                if self.on_progress is not None:
                    elapsed = time.monotonic() - start
                    self.on_progress(files, lines, lines / elapsed if elapsed else 0.0)
            refill()
        self.stats = {"files": files, "lines": lines, "seconds": time.monotonic() - start,
                      "workers": workers, "batches": next_submit,
                      "max_buffered": buffered}


def dask_engine(scheduler: str, storage_options: dict[str, Any] | None = None, batch_files: int = BATCH_FILES,
                on_progress: Callable[[int, int, float], None] | None = None
                ) -> Callable[[list[str], bool], DaskSource]:
    """An ``engine`` for :func:`ncclsleuth.api.build_model` that runs on a Dask cluster."""
    require_dask()
    parse_scheduler(scheduler)

    def engine(paths: list[str], cache: bool) -> DaskSource:
        return DaskSource(list(paths), cache, scheduler, storage_options, batch_files, on_progress=on_progress)

    return engine
