"""A small HTTP API on the standard library (``ncclsleuth serve``).

* ``POST /analyze``: the body is log text (or gzip: ``Content-Encoding: gzip`` or the
  gzip magic bytes); the answer is the JSON report, or Markdown / Slack Block Kit with
  ``?format=markdown|slack`` (``&max_chars=N``).  Redaction is ON unless ``?redact=0``.
* ``GET /rules``: ids, names, titles, categories, severities of the loaded rules.
* ``GET /healthz``: ``{"status": "ok"}``.

Safety: binds loopback by default; bodies over ``max_bytes`` (also after gzip
decompression) get 413; each analysis runs in a bounded worker pool with a time
limit (504 when exceeded, 503 when all workers are busy); requests never touch the
file system: the body is read from memory, as a file of that content would be.
"""
from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import __version__

DEFAULT_MAX_BYTES = 50 * 1024 * 1024
SOURCE_NAME = "<request>"


class TooLarge(Exception):
    pass


class NotALog(Exception):
    """The body holds no line of NCCL, PyTorch distributed or nccl-tests (422)."""


#: path -> the methods it answers (405 with ``Allow`` for the others)
ROUTES = {"/analyze": ("POST",), "/rules": ("GET", "HEAD"), "/healthz": ("GET", "HEAD")}


def decode_body(raw: bytes, encoding: str | None, max_bytes: int) -> bytes:
    """The request bytes, gunzipped when asked or when they start with the gzip magic."""
    if (encoding or "").lower().strip() in ("gzip", "x-gzip") or raw[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = d.decompress(raw, max_bytes + 1)
        if len(out) > max_bytes or d.unconsumed_tail:
            raise TooLarge(f"decompressed body is larger than {max_bytes} bytes")
        return out
    return raw


def analyze_bytes(data: bytes, rules: list[Any], source: str = SOURCE_NAME) -> Any:
    """Bytes of one log -> Report, entirely in memory, through the orchestrator (the same
    reading and parsing as a file of that content; a UTF-8 byte-order mark is dropped)."""
    from . import api

    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    options = api.Options(rules=rules, jobs=1, shared_cache=False)  # requests run in threads at once
    return api.analyze(api.memory_sources({source: data}), options)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], *, rules: list[Any], max_bytes: int = DEFAULT_MAX_BYTES,
                 timeout_s: float = 60.0, workers: int = 4, access_log: Any = None) -> None:
        super().__init__(addr, Handler)
        #: called with one line per answer (None: no access log)
        self.access_log = access_log
        self.rules = rules
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ncclsleuth-analyze")
        self.slots = threading.BoundedSemaphore(workers)

    def shutdown_all(self) -> None:
        self.server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


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
        path = urlsplit(self.path).path if getattr(self, "path", None) else "-"
        log(f'{self.client_address[0]} "{getattr(self, "command", "-")} {path}" {status} {size}{ms}')

    def parse_request(self) -> bool:
        self._started = time.monotonic()
        return super().parse_request()

    def _not_allowed(self, path: str) -> bool:
        """405 for a known path asked with a method it does not answer."""
        allowed = ROUTES.get(path)
        if allowed is None or self.command in allowed:
            return False
        self.close_connection = True
        body = json.dumps({"error": f"{path} answers {', '.join(allowed)}, not {self.command}",
                           "status": 405}) + "\n"
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, body, extra={"Allow": ", ".join(allowed)})
        return True

    # ------------------------------------------------------------------ helpers
    def _send(self, status: int, body: str, ctype: str = "application/json; charset=utf-8",
              extra: dict[str, str] | None = None) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.access_line(int(status), len(data) if self.command != "HEAD" else 0)

    def _error(self, status: HTTPStatus, message: str) -> None:
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

    do_HEAD = do_GET  # noqa: N815 - the same answer without the body (_send)

    def _other(self) -> None:
        path = urlsplit(self.path).path
        if not self._not_allowed(path):
            self._error(HTTPStatus.NOT_FOUND, f"no route {path} (POST /analyze, GET /rules, GET /healthz)")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other  # noqa: N815

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        if self._not_allowed(url.path):
            return
        if url.path != "/analyze":
            self._error(HTTPStatus.NOT_FOUND, f"no route {url.path}")
            return
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        fmt = q.get("format", "json")
        if fmt not in ("json", "markdown", "slack"):
            self._error(HTTPStatus.BAD_REQUEST, "format must be json, markdown or slack")
            return
        length = self.headers.get("Content-Length")
        if length is None:
            self._error(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
            return
        try:
            n = int(length)
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, "bad Content-Length")
            return
        if n > self.server.max_bytes:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body larger than {self.server.max_bytes} bytes")
            return
        raw = self.rfile.read(n)
        try:
            data = decode_body(raw, self.headers.get("Content-Encoding"), self.server.max_bytes)
        except TooLarge as exc:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(exc))
            return
        except (zlib.error, OSError, EOFError, gzip.BadGzipFile) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"bad gzip body: {exc}")
            return
        if not self.server.slots.acquire(blocking=False):
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "all analysis workers are busy, retry later")
            return
        redact = q.get("redact", "1").lower() not in ("0", "false", "no", "off")
        try:
            max_chars = int(q["max_chars"]) if "max_chars" in q else None
        except ValueError:
            self.server.slots.release()
            self._error(HTTPStatus.BAD_REQUEST, "max_chars must be an integer")
            return
        fut = self.server.pool.submit(self._work, data, fmt, redact, max_chars)
        fut.add_done_callback(lambda _f: self.server.slots.release())
        try:
            text = fut.result(timeout=self.server.timeout_s)
        except NotALog as exc:
            self._error(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc))
            return
        except FutureTimeout:
            # the worker cannot be killed; its slot frees itself when it ends
            self._error(HTTPStatus.GATEWAY_TIMEOUT, f"analysis took longer than {self.server.timeout_s:g} s")
            return
        except Exception as exc:  # noqa: BLE001 - reported to the client, never a traceback
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            return
        ctype = {"json": "application/json", "slack": "application/json", "markdown": "text/markdown"}[fmt]
        self._send(200, text, ctype + "; charset=utf-8")

    def _work(self, data: bytes, fmt: str, redact: bool, max_chars: int | None) -> str:
        from .renderers import render

        report = analyze_bytes(data, self.server.rules)
        refuse_non_log(report)
        if redact:
            from .report.redact import redact as do_redact

            report = do_redact(report)
        opts: dict[str, Any] = {"max_chars": max_chars} if max_chars is not None and fmt != "json" else {}
        return render(fmt, report, **opts)


def refuse_non_log(report: Any) -> None:
    """:class:`NotALog` (422) for a body with nothing NCCL, PyTorch or nccl-tests wrote."""
    if not report.is_log:
        from .report import HOW_TO_GET_A_LOG, NOT_A_LOG

        raise NotALog(f"{NOT_A_LOG}. {HOW_TO_GET_A_LOG}")


def make_server(host: str = "127.0.0.1", port: int = 8080, *, rules: list[Any] | None = None,
                max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = 60.0, workers: int = 4,
                access_log: Any = None, config: Any = None) -> Server:
    """A ready :class:`Server` (call ``serve_forever``); port 0 picks a free one.

    ``config``: the project's rule configuration (``api.Options.config``) the rules are
    loaded with; ``access_log``: called with one line per answer."""
    if rules is None:
        from . import api

        rules = api.load_rules(api.Options(config=config))
    return Server((host, port), rules=rules, max_bytes=max_bytes, timeout_s=timeout_s, workers=workers,
                  access_log=access_log)
