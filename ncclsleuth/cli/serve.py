"""``ncclsleuth serve``: the analyzer over HTTP (:mod:`ncclsleuth.serve`)."""
from __future__ import annotations

from typing import Any

import click

from . import guard, main
from .options import config_option, load_rules, rule_options, settings

_MB = 1024 * 1024


def listen_url(address: tuple[Any, ...]) -> str:
    """``http://host:port`` of a bound server address (a host given as bytes is decoded)."""
    host, port = address[0], address[1]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return f"http://{host}:{port}"


@main.command("serve", epilog="""\b
Examples:
  ncclsleuth serve --port 8080
  curl --data-binary @rank0.log localhost:8080/analyze
  curl --data-binary @rank0.log 'localhost:8080/analyze?format=markdown&redact=0'
""")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback by default; the API has no authentication).")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="0: any free port.")
@click.option("--max-bytes", default=50 * _MB, show_default=True, type=click.IntRange(1, None),
              help="Largest request body (and decompressed body) accepted; larger gets 413.")
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, type=click.FloatRange(0.1, None),
              help="Seconds one analysis may take; at that point its worker is killed and the client gets 504.")
@click.option("--workers", default=4, show_default=True, type=click.IntRange(1, 256),
              help="Worker processes: analyses run at once.")
@click.option("--queue", default=64, show_default=True, type=click.IntRange(0, 100_000),
              help="Requests that may wait for a free worker; more get 503.")
@click.option("--queue-timeout", default=60.0, show_default=True, type=click.FloatRange(0.0, None),
              help="Seconds a request may wait for a free worker before it gets 503.")
@click.option("--read-timeout", default=10.0, show_default=True, type=click.FloatRange(0.1, None),
              help="Seconds of silence tolerated from a client while its request is read (idle keep-alive too).")
@click.option("--request-timeout", default=60.0, show_default=True, type=click.FloatRange(0.1, None),
              help="Seconds a client has to send a whole request (headers and body).")
@click.option("--max-connections", default=256, show_default=True, type=click.IntRange(1, 100_000),
              help="Connections served at once; more get 503 at once.")
@click.option("--worker-memory", default=2048, show_default=True, type=click.IntRange(0, None), metavar="MB",
              help="Memory one worker may add to what it starts with (0: no cap); an analysis needing more gets 413.")
@click.option("--access-log/--no-access-log", default=True, show_default=True,
              help="One line per request on stderr: client, method, path, status, bytes, ms (never the body).")
@rule_options
@config_option
@guard
def serve_cmd(host: str, port: int, max_bytes: int, timeout_s: float, workers: int, queue: int,
              queue_timeout: float, read_timeout: float, request_timeout: float, max_connections: int,
              worker_memory: int, access_log: bool, rule_dirs: tuple[str, ...], keep_going: bool,
              config: str | None) -> None:
    """Serve the analyzer over HTTP: POST /analyze, GET /rules, GET /healthz.

    Answers 400 for a malformed request or parameter, 405 for a method a path does not
    take, 413 for a body too large, 415 for an encoding it cannot decode, 422 for a body
    that is not a log, 503 when busy, 504 when an analysis takes too long (its worker is
    killed). SIGTERM (or Ctrl-C) stops it at once.
    """
    from ..serve import make_server

    log = (lambda line: click.echo(f"ncclsleuth serve: {line}", err=True)) if access_log else None
    rules = load_rules(rule_dirs, keep_going, config=settings(config))
    srv = make_server(host, port, rules=rules, max_bytes=max_bytes, timeout_s=timeout_s, workers=workers, queue=queue,
                      queue_timeout=queue_timeout, read_timeout=read_timeout, request_timeout=request_timeout,
                      max_connections=max_connections, worker_memory=worker_memory * _MB, access_log=log)
    stop_on_sigterm()
    click.echo(f"ncclsleuth: serving on {listen_url(srv.server_address)} (POST /analyze, GET /rules, GET /healthz)",
               err=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.shutdown_all()


def stop_on_sigterm() -> None:
    """SIGTERM (what systemd, Kubernetes and ``kill`` send) stops the server as Ctrl-C does."""
    import signal

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
