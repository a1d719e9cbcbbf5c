"""Share runs of work between this process and forked worker processes; results in order.

``--jobs N`` is this process plus N-1 workers forked from it.  Whoever is free claims
the next run (:class:`Claims`), so no process idles while runs are left, and this
process's own share is never pickled.  A worker sends each result back through its
own pipe as soon as it is done; this process reads the pipes only when it needs the
next result in input order, so results can arrive in any order and still merge in
input order.

Why not ``multiprocessing`` or ``concurrent.futures``, measured on a 1M-line job
(64 files, 2 cores):

* ``ProcessPoolExecutor`` sends every task and result through a manager thread in
  this process, which needs the GIL from this process's own parsing: workers sat
  1-4 ms idle between runs.
* ``import multiprocessing`` plus a ``Value``, ``Lock`` and ``Queue`` took ~15 ms
  before the first worker started, 3% of the whole ``--jobs 2`` run, all of it
  before any parallel work.

What this costs: fork only (no Windows: ``available()`` is False there and callers
parse in one process), and a small protocol, tested in tests/test_parallel.py.

Failure handling: a worker that raises or dies simply stops sending.  When every
worker has gone (end of file on every pipe), any run that never came back is parsed
in this process: a bug then raises here with its own traceback, and a worker killed
by the OOM killer costs time, not results.
"""
from __future__ import annotations

import os
import select
import struct
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

#: frame header on a worker's pipe: run index, payload length
_HEADER = struct.Struct("<IQ")
#: seconds between checks for a lost lock token while waiting (see Claims.next)
_LOCK_CHECK_S = 1.0


def available() -> bool:
    """Workers need ``os.fork`` (Linux, macOS, BSD)."""
    return hasattr(os, "fork")


class Claims:
    """Indices 0..n-1, each handed out once, across this process and its forked workers.

    The next index is 4 bytes of anonymous shared memory, inherited by fork.  The lock
    around it is one byte in a pipe: a process reads the byte to enter and writes it
    back to leave (a read of one byte is atomic, and blocks while another process holds
    it).  This process, which must never hang, waits with a timeout and puts the byte
    back if every worker has gone while one held it (killed inside the few
    microseconds of the critical section).
    """

    def __init__(self, n: int) -> None:
        import mmap

        self.n = n
        self._mem = mmap.mmap(-1, 4)
        self._r, self._w = os.pipe()
        os.write(self._w, b".")

    def next(self, workers_gone: Callable[[], bool] | None = None) -> int | None:
        """The next unclaimed index, or None when all are claimed."""
        if workers_gone is None:
            os.read(self._r, 1)
        else:
            while not select.select([self._r], [], [], _LOCK_CHECK_S)[0]:
                if workers_gone():
                    os.write(self._w, b".")
            os.read(self._r, 1)
        try:
            i = int.from_bytes(self._mem[:4], "little")
            if i < self.n:
                self._mem[:4] = (i + 1).to_bytes(4, "little")
        finally:
            os.write(self._w, b".")
        return i if i < self.n else None

    def close(self) -> None:
        os.close(self._r)
        os.close(self._w)
        self._mem.close()


def _worker(claims: Claims, work: Callable[[int], Any], fd: int, done: Callable[[], None] | None,
            parent: int) -> None:
    """Body of a forked worker: claim, work, send; a writer thread does the sending.

    The pipe holds 64 KB and a result can be larger: written from this thread, a send
    would wait for the parent to read, which it does only between its own runs.  The
    writer thread waits instead, while this thread parses on.  A worker whose parent
    has gone (killed by a scheduler) stops at its next run instead of parsing on.
    """
    import pickle
    import queue
    import threading

    pending: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def writer() -> None:
        try:
            while (frame := pending.get()) is not None:
                view = memoryview(frame)
                while view:
                    view = view[os.write(fd, view):]
        except OSError:  # the parent closed its end (it stopped early): nothing more to send
            pass

    sender = threading.Thread(target=writer, daemon=True)
    sender.start()
    try:
        while os.getppid() == parent and (i := claims.next()) is not None:
            data = pickle.dumps(work(i), protocol=pickle.HIGHEST_PROTOCOL)
            pending.put(_HEADER.pack(i, len(data)) + data)
        if done is not None:
            done()
    finally:
        pending.put(None)
        sender.join()


class _Inbox:
    """This process's end of the workers' pipes: complete frames, decoded, by run index."""

    def __init__(self, fds: list[int]) -> None:
        self.open = {fd: bytearray() for fd in fds}
        for fd in fds:
            os.set_blocking(fd, False)

    def partial(self) -> bool:
        """A frame has begun to arrive and is not complete: its worker has finished that run
        and its writer thread is sending the rest (see :func:`_collect`)."""
        return any(self.open.values())

    def receive(self, timeout: float, into: dict[int, Any]) -> None:
        """Read what the pipes hold (waiting up to ``timeout`` s for something) into ``into``."""
        if not self.open:
            return
        ready, _, _ = select.select(list(self.open), [], [], timeout)
        for fd in ready:
            buf = self.open[fd]
            while True:
                try:
                    chunk = os.read(fd, 1 << 20)
                except BlockingIOError:
                    break
                if not chunk:  # the worker has gone; a partial frame in buf is lost
                    del self.open[fd]
                    os.close(fd)
                    break
                buf += chunk
            self._frames(buf, into)

    @staticmethod
    def _frames(buf: bytearray, into: dict[int, Any]) -> None:
        import pickle

        pos = 0
        while len(buf) - pos >= _HEADER.size:
            i, size = _HEADER.unpack_from(buf, pos)
            end = pos + _HEADER.size + size
            if end > len(buf):
                break
            into[i] = pickle.loads(memoryview(buf)[pos + _HEADER.size:end])
            pos = end
        del buf[:pos]

    def close(self) -> None:
        for fd in self.open:
            os.close(fd)
        self.open.clear()


def run_in_order(n: int, work: Callable[[int], Any], workers: int, meanwhile: Callable[[], None] | None = None,
                 worker_done: Callable[[], None] | None = None) -> Generator[Any, None, None]:
    """``work(i)`` for i in 0..n-1, yielded in order, computed here and in ``workers``
    forked processes.  ``meanwhile()`` runs here once the workers have started;
    ``worker_done()`` runs in each worker after its last run (saving what it learned).

    ``work`` must be a pure function of ``i`` whose result pickles: a run whose result
    never comes back is computed again here.  Closed before its last result is out (the caller
    stopped early, an error), it stops the workers; once every result is out, closed or run to
    its end, the workers have ``REAP_WAIT_S`` to finish ``worker_done``.
    """
    claims = Claims(n)
    me = os.getpid()
    pids: list[int] = []
    inbox = _Inbox([])
    handed = 0  # results yielded (all n: the caller may close, the workers still finish)
    try:
        fds: list[int] = []

        def worker(w: int) -> None:  # its runs are redone by the parent where it fails
            for fd in fds:  # the earlier workers' pipes
                os.close(fd)
            _worker(claims, work, w, worker_done, me)

        for _ in range(workers):
            forked = _fork(worker)
            if forked is None:  # no more processes or memory: go on with the workers started
                break
            pids.append(forked[0])
            fds.append(forked[1])
        inbox = _Inbox(fds)
        if meanwhile is not None:
            meanwhile()
        for got in _collect(n, work, claims, inbox):
            handed += 1
            yield got
    finally:
        inbox.close()
        _reap(pids, stop=handed < n)
        claims.close()


def _collect(n: int, work: Callable[[int], Any], claims: Claims, inbox: _Inbox) -> Iterator[Any]:
    """Results 0..n-1 in order: this process claims and computes runs itself whenever
    the next result is not in, and waits only when every run is claimed.

    A result that has begun to arrive is read whole before this process claims a run: a
    piece of the 8,000-rank file (bench/targets.py) is ~2 MB pickled, and a frame left half
    read waited in the pipe, its writer blocked, through the runs claimed meanwhile (piece 2
    done at 0.67 s, read at 1.07 s, after two more pieces parsed here), the assembly of the
    model held up behind it.  The build of that file with ``--jobs 2``: 1.94 -> 1.88 s (medians
    of 6, with :func:`_widen`)."""
    ready: dict[int, Any] = {}

    def gone() -> bool:
        return not inbox.open

    for k in range(n):
        while k not in ready:
            inbox.receive(0, ready)
            while k not in ready and inbox.partial():  # a finished run on its way: take it first
                inbox.receive(_LOCK_CHECK_S, ready)
            if k in ready:
                break
            i = claims.next(gone)
            if i is not None:
                ready[i] = work(i)
            elif gone():  # every run is claimed and no worker is left to send k
                ready[k] = work(k)
            else:
                inbox.receive(_LOCK_CHECK_S, ready)
        yield ready.pop(k)


#: the pipe size asked for on Linux (its default is 64 KB; unprivileged processes may ask up
#: to /proc/sys/fs/pipe-max-size, 1 MB by default)
PIPE_BYTES = 1 << 20


def _widen(fd: int) -> None:
    """Make a worker's pipe hold a result of ``PIPE_BYTES`` (Linux): a 2 MB result then crosses
    in two writes, each a wait of the worker's writer thread for the GIL (up to 5 ms: the worker's
    main thread is parsing its next run), not 32.  Elsewhere, or where refused, it stays as it is."""
    import fcntl

    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only (Python 3.10+)
    if setsize is None:
        return
    try:
        fcntl.fcntl(fd, setsize, PIPE_BYTES)
    except OSError:  # above the system's limit: keep the default
        pass


#: seconds the workers have to finish ``worker_done`` (saving what they learned) once every
#: result is in, before they are stopped: a save takes milliseconds, under a lock another
#: process may hold as long
REAP_WAIT_S = 5.0


def _reap(pids: Sequence[int], stop: bool) -> None:
    """Wait for every worker; ``stop``: end those still running first (an error here,
    or the caller stopped early), instead of letting them finish ``worker_done``; else
    they have up to ``REAP_WAIT_S`` for it (this process must never hang)."""
    import signal
    import time

    deadline = time.monotonic() + (0 if stop else REAP_WAIT_S)
    for pid in pids:
        try:
            while os.waitpid(pid, os.WNOHANG)[0] == 0:
                if time.monotonic() >= deadline:
                    os.kill(pid, signal.SIGTERM)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.002)
        except (ChildProcessError, ProcessLookupError):
            pass


#: seconds a child of :func:`run_beside` may take, both steps (a first run's tables take ~1 s; past
#: this it is stopped and the caller does what it did not)
BESIDE_WAIT_S = 120.0


class Beside:
    """A forked child of :func:`run_beside` whose first step is done and whose second may still
    run: :meth:`join` waits for it (once; later calls say the same)."""

    def __init__(self, pid: int, r: int, deadline: float) -> None:
        self._pid: int | None = pid
        self._r = r
        self._deadline = deadline
        self._ok = False

    def _first_done(self) -> bool:
        """Wait for the first step's byte (or the child's end, or the deadline)."""
        import time

        ready = select.select([self._r], [], [], max(0.0, self._deadline - time.monotonic()))[0]
        return bool(ready) and os.read(self._r, 1) == b"1"

    def join(self, stop: bool = False) -> bool:
        """Wait for the child's end (up to its deadline, then stop it; ``stop``: stop it now):
        whether its second step returned too (it exited 0)."""
        import time

        pid = self._pid
        if pid is None:
            return self._ok
        self._pid = None
        ended: list[int] = []
        wait = 0.0 if stop else max(0.0, self._deadline - time.monotonic())
        try:  # its pipe's write end closes as it exits: this process wakes at once
            ended = select.select([self._r], [], [], wait)[0]
        finally:
            os.close(self._r)
            if not ended:  # too long, or this process was interrupted meanwhile
                _reap([pid], stop=True)
        self._ok = bool(ended) and os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        return self._ok


def run_beside(first: Callable[[], object], then: Callable[[], object] = lambda: None,
               wait_s: float = BESIDE_WAIT_S) -> Beside | None:
    """``first()`` then ``then()`` in a forked child; this process waits for ``first`` only, and
    for ``then`` where it calls :meth:`Beside.join`.  For work whose value is what it leaves on
    disk (a first run's tables, kept in the cache folder): the memory it takes and frees is the
    child's, not this process's to keep (the allocators keep what a process freed: a first run's
    4.5 MB of YAML left ~25 MiB more resident), and ``then`` runs while this process goes on.

    None where ``first`` did not return in the child (it raised, or took past ``wait_s``: the child
    is stopped), where there is no fork, or where other threads run (a lock one of them held would
    stay held in the child): the caller does the work here.  The child writes nothing to this
    process's output and runs no exit handler."""
    import threading
    import time

    if not available() or threading.active_count() > 1:
        return None

    def quietly(w: int) -> None:
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        sys.stdout = sys.stderr = open(os.devnull, "w")
        first()
        os.write(w, b"1")
        then()

    forked = _fork(quietly)
    if forked is None:
        return None
    child = Beside(*forked, time.monotonic() + wait_s)
    try:
        done = child._first_done()
    except BaseException:
        child.join(stop=True)  # interrupted: stopped and reaped
        raise
    if not done:
        child.join()
        return None
    return child


def _fork(body: Callable[[int], object]) -> tuple[int, int] | None:
    """A forked child that runs ``body(w)`` (``w``: the write end of a pipe to this process) and
    exits, 0 where it returned, 1 where it raised, never returning into the caller's code; here
    (its pid, the pipe's read end), or None where the system gave no process (nothing left open)."""
    r, w = os.pipe()
    _widen(w)
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:
        code = 1
        try:
            os.close(r)
            body(w)
            code = 0
        except BaseException:  # noqa: BLE001, S110 - the exit code says it
            pass
        finally:
            os._exit(code)
    os.close(w)
    return pid, r
