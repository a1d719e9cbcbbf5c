"""A small HTTP API on the standard library (``ncclsleuth serve``), built to face hostile clients.

* ``POST /analyze``: the body is log text, plain or compressed (``Content-Encoding: gzip``,
  ``deflate``, or the gzip magic bytes); the answer is the JSON report, or Markdown / Slack
  Block Kit with ``?format=markdown|slack`` (``&max_chars=N``).  Redaction is ON unless
  ``?redact=0``.
* ``GET /rules``: ids, names, titles, categories, severities of the loaded rules.
* ``GET /healthz``: ``{"status": "ok"}``.  ``HEAD`` works on both.

What a client can and cannot do:

* Requests are parsed strictly: ``Content-Length`` must be a plain non-negative integer
  (``-1``, ``+5``, `` 5 ``, ``1_0`` get 400), a chunked body is counted against the limit as it
  arrives, both at once is refused (400), neither is 411; unknown parameters, a bad
  ``format``, ``redact`` or ``max_chars`` get 400 with the reason; other routes 404, other
  methods 405.
* Bodies over ``max_bytes`` get 413, also after decompression (every member of a
  multi-member gzip counts); ``br``, ``zstd`` and other encodings get 415; a body that is not
  text (binary, random bytes) gets 422; a truncated gzip/deflate body is analysed up to
  where it ends and the report says so (a notice, and the ``X-Ncclsleuth-Notice`` header).
* Each connection has a read timeout (``read_timeout`` seconds of silence) and a deadline for
  its whole request (``request_timeout``): slow clients are cut off, idle keep-alive
  connections closed.  At most ``max_connections`` are served at once (503 beyond), and
  request bodies held in memory are bounded by ``max_pending_bytes`` (503 beyond).
* Each analysis runs in a worker *process* with a hard deadline: at ``timeout_s`` the worker
  is killed (SIGKILL) and replaced, so a 504 frees its slot at once and a pathological body
  cannot hold the server.  ``workers`` analyses run at once, ``queue`` more may wait (for at
  most ``queue_timeout`` seconds), anything beyond gets 503.  Each worker's address space is capped
  (``worker_memory``): an analysis that needs more gets 413.
* The rule pack, the grammar and the shape cache's templates are loaded once, at start,
  in the server; workers are forked (from a single-threaded "zygote" process forked at
  start) with all of it in memory.  Requests never touch the file system: the body is
  read from memory, as a file of that content would be, and nothing is saved.

Platforms without ``fork`` run analyses in threads (no hard deadline there).
"""
from __future__ import annotations

import json
import os
import pickle
import re
import signal
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import __version__
from .util.classes import dataclass

DEFAULT_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_WORKERS = 4
#: requests that may wait for a free worker (beyond: 503), and for how long at most (then 503)
DEFAULT_QUEUE = 64
DEFAULT_QUEUE_TIMEOUT = 60.0
#: seconds of silence tolerated while a request (or the next one on a kept-alive connection) is read
DEFAULT_READ_TIMEOUT = 10.0
#: seconds a client has to send a whole request, headers and body
DEFAULT_REQUEST_TIMEOUT = 60.0
DEFAULT_MAX_CONNECTIONS = 256
#: request bodies held in memory at once, all connections together
DEFAULT_MAX_PENDING_BYTES = 1 << 30
#: address space a worker may add to what it inherits
DEFAULT_WORKER_MEMORY = 2 << 30
#: analyses a worker runs before a fresh one replaces it (its caches stay bounded)
WORKER_REQUESTS = 200
SOURCE_NAME = "<request>"
FORMATS = ("json", "markdown", "slack")
PARAMS = ("format", "redact", "max_chars")
_BOOL = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
_CTYPE = {"json": "application/json", "slack": "application/json", "markdown": "text/markdown"}
_LENGTH = re.compile(r"[0-9]{1,18}")
_CHUNK = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?\r?\n")
#: Content-Encoding values decoded here; ``br`` and ``zstd`` need libraries this project does not add
ENCODINGS = ("identity", "gzip", "x-gzip", "deflate")


class HttpError(Exception):
    """A request refused: its status and the one-line reason sent to the client."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class TooLarge(HttpError):
    def __init__(self, message: str) -> None:
        super().__init__(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, message)


class NotALog(HttpError):
    """The body holds no line of NCCL, PyTorch distributed or nccl-tests (422)."""

    def __init__(self, message: str) -> None:
        super().__init__(HTTPStatus.UNPROCESSABLE_ENTITY, message)


#: path -> the methods it answers (405 with ``Allow`` for the others)
ROUTES = {"/analyze": ("POST",), "/rules": ("GET", "HEAD"), "/healthz": ("GET", "HEAD")}


# --------------------------------------------------------------------------- request pieces


def parse_length(value: str) -> int:
    """A Content-Length: ASCII digits only (``int()`` would take ``-1``, ``+5``, `` 5 ``, ``1_0``)."""
    if not _LENGTH.fullmatch(value):
        raise HttpError(HTTPStatus.BAD_REQUEST, f"bad Content-Length {value[:40]!r}: a plain non-negative integer")
    return int(value)


def read_chunked(rfile: Any, limit: int, reserve: Callable[[int], None] = lambda n: None) -> bytes:
    """A ``Transfer-Encoding: chunked`` body, counted against ``limit`` as it arrives
    (``reserve(n)`` is called before each chunk is read, to charge a shared budget)."""
    out = bytearray()
    while True:
        line = rfile.readline(1024)
        m = _CHUNK.fullmatch(line)
        if m is None:
            raise HttpError(HTTPStatus.BAD_REQUEST, "bad chunk size line in a chunked body")
        n = int(m.group(1), 16)
        if n == 0:
            break
        if len(out) + n > limit:
            raise TooLarge(f"chunked body larger than {limit} bytes")
        reserve(n)
        data = rfile.read(n)
        if len(data) < n:
            raise HttpError(HTTPStatus.BAD_REQUEST, "chunked body ends inside a chunk")
        out += data
        if rfile.readline(3) not in (b"\r\n", b"\n"):
            raise HttpError(HTTPStatus.BAD_REQUEST, "chunk not followed by CRLF")
    for _ in range(100):  # trailer fields, until the empty line
        line = rfile.readline(8192)
        if line in (b"\r\n", b"\n", b""):
            return bytes(out)
    raise HttpError(HTTPStatus.BAD_REQUEST, "too many trailer fields")


def decode_body(raw: bytes, encoding: str | None, max_bytes: int) -> tuple[bytes, list[str]]:
    """The request bytes decoded (every gzip member; deflate as zlib or raw), and notices
    (a truncated stream: what came before its end is kept).  Over ``max_bytes`` once
    decoded: :class:`TooLarge`; an unknown encoding: 415; a corrupt stream: 400."""
    enc = (encoding or "identity").lower().strip()
    if enc not in ENCODINGS:
        raise HttpError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                        f"Content-Encoding {enc[:40]!r} is not supported (gzip, deflate or none)")
    if enc in ("gzip", "x-gzip") or (enc == "identity" and raw[:2] == b"\x1f\x8b"):
        return _inflate(raw, 16 + zlib.MAX_WBITS, max_bytes, "gzip", members=True)
    if enc == "deflate":
        try:
            return _inflate(raw, zlib.MAX_WBITS, max_bytes, "deflate")
        except HttpError as exc:
            if exc.status != HTTPStatus.BAD_REQUEST:
                raise
            return _inflate(raw, -zlib.MAX_WBITS, max_bytes, "deflate")  # raw deflate, as some clients send
    return raw, []


def _inflate(raw: bytes, wbits: int, max_bytes: int, what: str, members: bool = False) -> tuple[bytes, list[str]]:
    out = bytearray()
    notices: list[str] = []
    data = raw
    while data:
        d = zlib.decompressobj(wbits)
        try:
            out += d.decompress(data, max_bytes + 1 - len(out))
        except zlib.error as exc:
            if out and members:  # garbage after the last member (padding, a torn upload): keep what was read
                notices.append(f"{what} body: {len(data)} bytes after the last complete member could not be "
                               f"read ({exc}); the part before was analysed")
                break
            raise HttpError(HTTPStatus.BAD_REQUEST, f"bad {what} body: {exc}") from None
        if len(out) > max_bytes or d.unconsumed_tail:
            raise TooLarge(f"decompressed body is larger than {max_bytes} bytes")
        if not d.eof:
            notices.append(f"{what} body is truncated: it ends after {len(raw)} bytes, inside a compressed "
                           f"stream; the {len(out)} bytes decompressed before its end were analysed")
            break
        data = d.unused_data if members else b""
        while data[:1] == b"\0":  # zero padding between or after members (tape/block devices)
            data = data.lstrip(b"\0")
    return bytes(out), notices


def not_text(data: bytes) -> str | None:
    """Why ``data`` is not a text log (binary, random bytes), else None: the sniffing the
    file reader does (:func:`ncclsleuth.ingest.decode.text_kind`)."""
    from .ingest.decode import text_kind

    return text_kind(data[:8192])


# --------------------------------------------------------------------------- the analysis (in a worker)


@dataclass
class Job:
    """One analysis: the raw body and what the client asked."""

    body: bytes
    encoding: str | None
    fmt: str = "json"
    redact: bool = True
    max_chars: int | None = None
    max_bytes: int = DEFAULT_MAX_BYTES


@dataclass
class Answer:
    status: int
    body: str
    ctype: str = "application/json; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def analyze_bytes(data: bytes, rules: list[Any], source: str = SOURCE_NAME, shapes: Any = None) -> Any:
    """Bytes of one log -> Report, entirely in memory, through the orchestrator (the same
    reading and parsing as a file of that content; a UTF-8 byte-order mark is dropped).

    ``shapes``: the shape cache to use (the server's, loaded once); never saved."""
    from . import api

    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    options = api.Options(rules=rules, jobs=1, shared_cache=False, shapes=shapes)
    return api.analyze(api.memory_sources({source: data}), options)


def run_job(job: Job, rules: list[Any], shapes: Any = None) -> Answer:
    """Decode, check and analyse one request body; the answer to send (any status)."""
    try:
        data, notices = decode_body(job.body, job.encoding, job.max_bytes)
        why = not_text(data)
        if why:
            from .report import HOW_TO_GET_A_LOG, NOT_A_LOG

            raise NotALog(f"{NOT_A_LOG}: the body is not text ({why}). {HOW_TO_GET_A_LOG}")
        report = analyze_bytes(data, rules, shapes=shapes)
        refuse_non_log(report)
    except HttpError as exc:
        return error_answer(exc.status, str(exc))
    except MemoryError:
        return error_answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the analysis needs more memory than a worker has")
    report.notices.extend({"path": SOURCE_NAME, "message": n, "severity": "warning"} for n in notices)
    from .renderers import render

    r = None
    if job.redact:
        from .report.redact import Redactor, redact

        report = redact(report, r := Redactor())
    opts: dict[str, Any] = {"max_chars": job.max_chars} if job.max_chars is not None and job.fmt != "json" else {}
    text = render(job.fmt, report, **opts)
    if r is not None:
        from .report.redact import redact_text

        text = redact_text(text, r)
    headers = {"X-Ncclsleuth-Notice": notices[0][:300]} if notices else {}
    return Answer(200, text, _CTYPE[job.fmt] + "; charset=utf-8", headers)


def refuse_non_log(report: Any) -> None:
    """:class:`NotALog` (422) for a body with nothing NCCL, PyTorch or nccl-tests wrote."""
    if not report.is_log:
        from .report import HOW_TO_GET_A_LOG, NOT_A_LOG

        raise NotALog(f"{NOT_A_LOG}. {HOW_TO_GET_A_LOG}")


def error_answer(status: int, message: str) -> Answer:
    return Answer(int(status), json.dumps({"error": message, "status": int(status)}) + "\n")


# --------------------------------------------------------------------------- worker processes


def _send_msg(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(struct.pack("!Q", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv_msg(sock: socket.socket) -> Any:
    head = _recv_exact(sock, 8)
    if head is None:
        return None
    body = _recv_exact(sock, struct.unpack("!Q", head)[0])
    return None if body is None else pickle.loads(body)  # noqa: S301 - our own worker, over a socketpair


def _worker_loop(sock: socket.socket, work: Callable[[Job], Answer], memory: int) -> None:
    """A worker process: answer jobs until the server closes its end."""
    _limit_memory(memory)
    while True:
        job = _recv_msg(sock)
        if job is None:
            return
        try:
            answer = work(job)
        except MemoryError:
            answer = error_answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the analysis needs more memory than a "
                                  "worker has")
        except Exception as exc:  # noqa: BLE001 - reported to the client, never a traceback
            answer = error_answer(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
        _send_msg(sock, answer)


def _limit_memory(extra: int) -> None:
    """Cap this process's address space at what it has now plus ``extra`` (Linux, where it can)."""
    if extra <= 0:
        return
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = size + extra
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (ImportError, OSError, ValueError):
        pass


def _zygote(ctl: socket.socket, work: Callable[[Job], Answer], memory: int) -> None:
    """The single-threaded process workers are forked from (forking the threaded server
    could copy a lock some other thread held).  Commands on ``ctl``: ``S`` + a socket fd:
    fork a worker on it, reply its pid; ``K`` + pid: kill that worker and reap it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    children: set[int] = set()
    try:
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(ctl, 9, 1)
            except OSError:
                return
            if not msg:
                return
            if msg[:1] == b"S" and fds:
                pid = os.fork()
                if pid == 0:
                    ctl.close()
                    code = 0
                    try:
                        _worker_loop(socket.socket(fileno=fds[0]), work, memory)
                    except BaseException:  # noqa: BLE001 - a worker never returns into the zygote's loop
                        code = 1
                    os._exit(code)
                os.close(fds[0])
                children.add(pid)
                ctl.sendall(struct.pack("!q", pid))
            elif msg[:1] == b"K" and len(msg) == 9:
                pid = struct.unpack("!q", msg[1:])[0]
                if pid in children:
                    _kill(pid)
                    children.discard(pid)
                ctl.sendall(b"k")
            for fd in fds[1:] if msg[:1] == b"S" else fds:
                os.close(fd)
            _reap(children)
    finally:
        for pid in children:
            _kill(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _reap(children: set[int]) -> None:
    """Forget workers that ended on their own (their socket closed)."""
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)


class Worker:
    """The server's end of one worker process."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self.served = 0


class WorkerTimeout(Exception):
    pass


class Workers:
    """``n`` worker processes, forked from a zygote, each running one job at a time."""

    def __init__(self, n: int, work: Callable[[Job], Answer], memory: int = DEFAULT_WORKER_MEMORY,
                 max_requests: int = WORKER_REQUESTS) -> None:
        self.work = work
        self.memory = memory
        self.max_requests = max_requests
        self._ctl_lock = threading.Lock()
        self._idle: list[Worker] = []
        self._cond = threading.Condition()
        self._closed = False
        self._start_zygote()
        for _ in range(n):
            self._idle.append(self._spawn())

    def _start_zygote(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            parent.close()
            code = 0
            try:
                _zygote(child, self.work, self.memory)
            except BaseException:  # noqa: BLE001 - never return into the server's stack
                code = 1
            os._exit(code)
        child.close()
        self._ctl = parent
        self._zygote_pid = pid

    def _spawn(self) -> Worker:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with self._ctl_lock:
            try:
                socket.send_fds(self._ctl, [b"S"], [theirs.fileno()])
                reply = _recv_exact(self._ctl, 8)
            except OSError:
                reply = None
            if reply is None:  # the zygote is gone: start another (rare), then retry once
                self._restart_zygote()
                socket.send_fds(self._ctl, [b"S"], [theirs.fileno()])
                reply = _recv_exact(self._ctl, 8)
                if reply is None:
                    raise RuntimeError("cannot start an analysis worker")
        theirs.close()
        return Worker(struct.unpack("!q", reply)[0], mine)

    def _restart_zygote(self) -> None:
        self._ctl.close()
        try:
            os.waitpid(self._zygote_pid, os.WNOHANG)
        except ChildProcessError:
            pass
        self._start_zygote()

    def _kill(self, w: Worker) -> None:
        w.sock.close()
        with self._ctl_lock:
            try:
                self._ctl.sendall(b"K" + struct.pack("!q", w.pid))
                _recv_exact(self._ctl, 1)
            except OSError:
                pass

    def acquire(self, timeout: float) -> Worker | None:
        """An idle worker within ``timeout`` seconds, else None."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._idle and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    if not self._idle:
                        return None
            return None if self._closed else self._idle.pop()

    def release(self, w: Worker, replace: bool = False) -> None:
        """Give a worker back; ``replace``: it is killed and a fresh one takes its place."""
        w.served += 1
        if replace or w.served >= self.max_requests:
            self._kill(w)
            w = self._spawn()
        with self._cond:
            if self._closed:
                w.sock.close()
                return
            self._idle.append(w)
            self._cond.notify()

    def run(self, w: Worker, job: Job, timeout: float) -> Answer:
        """``job`` on worker ``w`` within ``timeout`` s (:class:`WorkerTimeout`: ``w`` must be replaced)."""
        w.sock.settimeout(timeout)
        try:
            _send_msg(w.sock, job)
            answer = _recv_msg(w.sock)
        except TimeoutError:
            raise WorkerTimeout from None
        except OSError:
            answer = None
        if answer is None:  # killed by the memory cap, a signal, a crash
            return error_answer(HTTPStatus.INTERNAL_SERVER_ERROR, "the analysis worker died (out of memory?)")
        return answer

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for w in idle:
            w.sock.close()
        self._ctl.close()  # the zygote kills what is left and exits
        try:
            os.waitpid(self._zygote_pid, 0)
        except ChildProcessError:
            pass


class ThreadWorkers:
    """Analyses in threads, where there is no fork (no hard deadline: a slow one runs on)."""

    def __init__(self, n: int, work: Callable[[Job], Answer]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.work = work
        self.pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ncclsleuth-analyze")
        self.slots = threading.BoundedSemaphore(n)

    def acquire(self, timeout: float) -> object | None:
        return object() if self.slots.acquire(timeout=timeout) else None

    def run(self, w: object, job: Job, timeout: float) -> Answer:
        from concurrent.futures import TimeoutError as FutureTimeout

        fut = self.pool.submit(self.work, job)
        try:
            return fut.result(timeout=timeout)
        except FutureTimeout:
            fut.add_done_callback(lambda _f: self.slots.release())
            raise WorkerTimeout from None

    def release(self, w: object, replace: bool = False) -> None:
        if not replace:
            self.slots.release()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


# --------------------------------------------------------------------------- the server


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    #: the listen backlog: a burst of clients waits to be accepted instead of being reset
    request_queue_size = 1024

    def __init__(self, addr: tuple[str, int], *, rules: list[Any], max_bytes: int = DEFAULT_MAX_BYTES,
                 timeout_s: float = DEFAULT_TIMEOUT_S, workers: int = DEFAULT_WORKERS, queue: int = DEFAULT_QUEUE,
                 read_timeout: float = DEFAULT_READ_TIMEOUT, request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 worker_memory: int = DEFAULT_WORKER_MEMORY, queue_timeout: float = DEFAULT_QUEUE_TIMEOUT,
                 access_log: Callable[[str], None] | None = None) -> None:
        #: called with one line per answer (None: no access log)
        self.access_log = access_log
        self.rules = rules
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.queue_timeout = queue_timeout
        self.read_timeout = read_timeout
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self.max_pending_bytes = max_pending_bytes
        self.capacity = workers + queue  # analyses running or waiting
        self._lock = threading.Lock()
        self._connections = 0
        self._inflight = 0
        self._pending_bytes = 0
        self._deadlines: dict[socket.socket, float] = {}
        self.shapes = _warm(rules)
        work = self._work
        # forked before the listening socket exists and before any thread of ours starts
        self.workers: Workers | ThreadWorkers = (Workers(workers, work, worker_memory) if hasattr(os, "fork")
                                                 else ThreadWorkers(workers, work))
        try:
            super().__init__(addr, Handler)
        except BaseException:
            self.workers.close()
            raise
        self._stop = threading.Event()
        threading.Thread(target=self._janitor, name="ncclsleuth-janitor", daemon=True).start()

    def _work(self, job: Job) -> Answer:
        return run_job(job, self.rules, self.shapes)

    # ------------------------------------------------------------------ connections
    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            full = self._connections >= self.max_connections
            if not full:
                self._connections += 1
        if full:  # answered at once, without a thread
            try:
                request.settimeout(1.0)
                body = json.dumps({"error": "too many connections, retry later", "status": 503}).encode()
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                b"Connection: close\r\nRetry-After: 1\r\nContent-Length: " + str(len(body)).encode()
                                + b"\r\n\r\n" + body)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._connections -= 1
                self._deadlines.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that vanished mid-request (reset, shut down by the janitor): nothing to print."""

    def set_deadline(self, sock: socket.socket, seconds: float | None) -> None:
        """After ``seconds`` the janitor shuts ``sock`` down (None: no deadline while it is not read)."""
        with self._lock:
            if seconds is None:
                self._deadlines.pop(sock, None)
            else:
                self._deadlines[sock] = time.monotonic() + seconds

    def _janitor(self) -> None:
        """Shut down connections past their deadline: a blocked read returns at once."""
        while not self._stop.wait(0.2):
            now = time.monotonic()
            with self._lock:
                late = [s for s, t in self._deadlines.items() if t <= now]
                for s in late:
                    del self._deadlines[s]
            for s in late:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    # ------------------------------------------------------------------ budgets
    def reserve_bytes(self, n: int) -> None:
        with self._lock:
            if self._pending_bytes + n > self.max_pending_bytes:
                raise HttpError(HTTPStatus.SERVICE_UNAVAILABLE, "too many request bytes held, retry later")
            self._pending_bytes += n

    def free_bytes(self, n: int) -> None:
        with self._lock:
            self._pending_bytes -= n

    def admit(self) -> bool:
        with self._lock:
            if self._inflight >= self.capacity:
                return False
            self._inflight += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._inflight -= 1

    def analyze(self, job: Job) -> Answer:
        """One job on a worker: 503 when none frees up in time, 504 (worker killed) past the deadline."""
        if not self.admit():
            return error_answer(HTTPStatus.SERVICE_UNAVAILABLE, "all analysis workers are busy, retry later")
        try:
            w = self.workers.acquire(self.queue_timeout)
            if w is None:
                return error_answer(HTTPStatus.SERVICE_UNAVAILABLE, "all analysis workers are busy, retry later")
            try:
                answer = self.workers.run(w, job, self.timeout_s)  # type: ignore[arg-type]
            except WorkerTimeout:
                self.workers.release(w, replace=True)  # type: ignore[arg-type]  # killed now: its slot is free
                return error_answer(HTTPStatus.GATEWAY_TIMEOUT, f"analysis took longer than {self.timeout_s:g} s")
            self.workers.release(w, replace=answer.status == 500)  # type: ignore[arg-type]
            return answer
        finally:
            self.leave()

    def shutdown_all(self) -> None:
        self._stop.set()
        self.server_close()
        self.workers.close()


def _warm(rules: list[Any]) -> Any:
    """The shape cache the workers inherit, its templates loaded, and everything an analysis
    imports or compiles lazily (grammar, renderers, redaction), by analysing a small log."""
    from .parse.grammar import ShapeCache

    shapes = ShapeCache()
    shapes.load_all()  # the templates and compiled code on disk, whole: requests then read no cache file
    sample = (b"h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
              b"h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
              b"h:1:2 [0] misc/socket.cc:540 NCCL WARN socketPollConnect: connect returned Connection refused\n"
              b"[rank0]: RuntimeError: NCCL communicator was aborted on rank 0.\n")
    for fmt in FORMATS:
        run_job(Job(sample, None, fmt, True, 1000 if fmt != "json" else None), rules, shapes)
    return shapes


class Handler(BaseHTTPRequestHandler):
    server: Server
    server_version = f"ncclsleuth/{__version__}"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # the stdlib's lines are replaced by one access line per answer (access_line)

    def access_line(self, status: int, size: int) -> None:
        """One line per answer on the server's access log: client, method, path, status,
        bytes sent, milliseconds; never the body (logs are the users' data)."""
        log = getattr(self.server, "access_log", None)
        if log is None:
            return
        started = getattr(self, "_started", None)
        ms = f" {(time.monotonic() - started) * 1000:.0f}ms" if started is not None else ""
        path = urlsplit(self.path).path[:200] if getattr(self, "path", None) else "-"
        log(f'{self.client_address[0]} "{getattr(self, "command", "-")} {path}" {status} {size}{ms}')

    def parse_request(self) -> bool:
        self._started = time.monotonic()
        return super().parse_request()

    def _not_allowed(self, path: str) -> bool:
        """405 with ``Allow`` for a known path asked with a method it does not answer."""
        allowed = ROUTES.get(path)
        if allowed is None or self.command in allowed:
            return False
        self.close_connection = True
        body = json.dumps({"error": f"{path} answers {', '.join(allowed)}, not {self.command}",
                           "status": 405}) + "\n"
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, body, headers={"Allow": ", ".join(allowed)})
        return True

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_timeout)  # each recv/send: at most this long
        self.server.set_deadline(self.connection, self.server.request_timeout)

    def handle_one_request(self) -> None:
        super().handle_one_request()
        if not self.close_connection:  # kept alive: the next request has the same deadline
            self.server.set_deadline(self.connection, self.server.request_timeout)

    def handle_expect_100(self) -> bool:
        """Refuse a too-large body before the client sends it."""
        length = self.headers.get("Content-Length")
        if length is not None and _LENGTH.fullmatch(length.strip()) and int(length) > self.server.max_bytes:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body larger than {self.server.max_bytes} bytes")
            return False
        return super().handle_expect_100()

    # ------------------------------------------------------------------ helpers
    def _send(self, status: int, body: str, ctype: str = "application/json; charset=utf-8",
              headers: dict[str, str] | None = None) -> None:
        data = body.encode("utf-8")
        self.server.set_deadline(self.connection, self.server.request_timeout)  # a client that does not read
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (headers or {}).items():
            self.send_header(k, v.replace("\r", " ").replace("\n", " "))
        if status == HTTPStatus.SERVICE_UNAVAILABLE:
            self.send_header("Retry-After", "1")
        if self.close_connection:
            self.send_header("Connection", "close")
        # logged before the body goes out: a client that has its answer finds the line written
        self.access_line(int(status), len(data) if self.command != "HEAD" else 0)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.server.set_deadline(self.connection, None)

    def _error(self, status: HTTPStatus, message: str, close: bool = True) -> None:
        if close:
            self.close_connection = True
        self._send(status, json.dumps({"error": message, "status": int(status)}) + "\n")

    # ------------------------------------------------------------------ routes
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = urlsplit(self.path).path
        if self._not_allowed(path):
            return
        if path == "/healthz":
            self._send(200, json.dumps({"status": "ok", "version": __version__}) + "\n")
        elif path == "/rules":
            rules = [{"id": r.id, "name": r.name, "title": r.title, "category": r.category,
                      "severity": r.severity.name.lower()} for r in self.server.rules]
            self._send(200, json.dumps({"rules": rules}, indent=2) + "\n")
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route {path} (POST /analyze, GET /rules, GET /healthz)")

    do_HEAD = do_GET  # noqa: N815 - stdlib name; _send writes no body for HEAD

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        if self._not_allowed(url.path):
            return
        if url.path != "/analyze":
            self._error(HTTPStatus.NOT_FOUND, f"no route {url.path} (POST /analyze, GET /rules, GET /healthz)")
            return
        try:
            job = self._job(url.query)
        except HttpError as exc:
            self._error(exc.status, str(exc))
            return
        except (TimeoutError, OSError):  # a client too slow or gone: nothing to answer
            self.close_connection = True
            return
        try:
            answer = self.server.analyze(job)
        finally:
            self.server.free_bytes(len(job.body))
        self._send(answer.status, answer.body, answer.ctype, answer.headers)

    def _other(self) -> None:
        path = urlsplit(self.path).path
        if not self._not_allowed(path):
            self._error(HTTPStatus.NOT_FOUND, f"no route {path} (POST /analyze, GET /rules, GET /healthz)")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other  # noqa: N815

    def _job(self, query: str) -> Job:
        """The request's parameters checked and its body read (strictly, within the limits)."""
        fmt, redact, max_chars = _params(query)
        encoding = self.headers.get("Content-Encoding")
        if encoding is not None and encoding.lower().strip() not in ENCODINGS:
            raise HttpError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                            f"Content-Encoding {encoding[:40]!r} is not supported (gzip, deflate or none)")
        body = self._body()
        self.server.set_deadline(self.connection, None)  # read: the analysis has its own deadline
        return Job(body, encoding, fmt, redact, max_chars, self.server.max_bytes)

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        te = self.headers.get("Transfer-Encoding")
        limit = self.server.max_bytes
        if te is not None:
            if length is not None:
                raise HttpError(HTTPStatus.BAD_REQUEST, "Content-Length and Transfer-Encoding together")
            if te.strip().lower() != "chunked":
                raise HttpError(HTTPStatus.NOT_IMPLEMENTED, f"Transfer-Encoding {te[:40]!r} is not supported")
            got = [0]

            def reserve(n: int) -> None:
                self.server.reserve_bytes(n)
                got[0] += n

            try:
                body = read_chunked(self.rfile, limit, reserve)
            except BaseException:
                self.server.free_bytes(got[0])
                raise
            self.server.free_bytes(got[0] - len(body))  # nothing else is held; exact from here on
            return body
        if length is None:
            raise HttpError(HTTPStatus.LENGTH_REQUIRED, "Content-Length (or a chunked body) is required")
        n = parse_length(length)
        if n > limit:
            raise TooLarge(f"body larger than {limit} bytes")
        self.server.reserve_bytes(n)
        try:
            body = self.rfile.read(n)
            if len(body) < n:
                raise HttpError(HTTPStatus.BAD_REQUEST, f"body ends after {len(body)} of {n} bytes")
        except BaseException:
            self.server.free_bytes(n)
            raise
        return body


def _params(query: str) -> tuple[str, bool, int | None]:
    """``format``, ``redact`` and ``max_chars`` of a query string, each checked (400 with the reason)."""
    try:
        raw = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query), max_num_fields=10)
    except ValueError as exc:
        raise HttpError(HTTPStatus.BAD_REQUEST, f"bad query string: {exc}") from None
    unknown = sorted(set(raw) - set(PARAMS))
    if unknown:
        raise HttpError(HTTPStatus.BAD_REQUEST, f"unknown parameter {unknown[0][:40]!r} ({', '.join(PARAMS)})")
    twice = [k for k, v in raw.items() if len(v) > 1]
    if twice:
        raise HttpError(HTTPStatus.BAD_REQUEST, f"parameter {twice[0]!r} given more than once")
    q = {k: v[0] for k, v in raw.items()}
    fmt = q.get("format", "json")
    if fmt not in FORMATS:
        raise HttpError(HTTPStatus.BAD_REQUEST, "format must be json, markdown or slack")
    redact = _BOOL.get(q.get("redact", "1").lower())
    if redact is None:
        raise HttpError(HTTPStatus.BAD_REQUEST, "redact must be 1 or 0 (true/false, yes/no, on/off)")
    max_chars = None
    if "max_chars" in q:
        v = q["max_chars"]
        if not _LENGTH.fullmatch(v) or not 200 <= int(v) <= 1_000_000:
            raise HttpError(HTTPStatus.BAD_REQUEST, "max_chars must be an integer from 200 to 1000000")
        max_chars = int(v)
    return fmt, redact, max_chars


def make_server(host: str = "127.0.0.1", port: int = 8080, *, rules: list[Any] | None = None, config: Any = None,
                **kw: Any) -> Server:
    """A ready :class:`Server` (call ``serve_forever``); port 0 picks a free one.  Keyword
    arguments are :class:`Server`'s limits (``max_bytes``, ``timeout_s``, ``workers``, ...)
    and ``access_log`` (called with one line per answer); ``config``: the project's rule
    configuration (``api.Options.config``) the rules are loaded with."""
    if rules is None:
        from . import api

        rules = api.load_rules(api.Options(config=config))
    return Server((host, port), rules=rules, **kw)
