"""``ncclsleuth serve``: the analyzer over HTTP (:mod:`ncclsleuth.serve`)."""
from __future__ import annotations

from typing import Any

import click

from . import guard, main

_MB = 1024 * 1024


def listen_url(address: tuple[Any, ...]) -> str:
    """``http://host:port`` of a bound server address (a host given as bytes is decoded)."""
    host, port = address[0], address[1]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return f"http://{host}:{port}"


@main.command("serve")
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
@guard
def serve_cmd(host: str, port: int, max_bytes: int, timeout_s: float, workers: int, queue: int,
              queue_timeout: float, read_timeout: float, request_timeout: float, max_connections: int,
              worker_memory: int) -> None:
    """Serve the analyzer over HTTP: POST /analyze, GET /rules, GET /healthz."""
    from ..serve import make_server

    srv = make_server(host, port, max_bytes=max_bytes, timeout_s=timeout_s, workers=workers, queue=queue,
                      queue_timeout=queue_timeout, read_timeout=read_timeout, request_timeout=request_timeout,
                      max_connections=max_connections,
                      worker_memory=worker_memory * _MB)
    click.echo(f"ncclsleuth: serving on {listen_url(srv.server_address)} (POST /analyze, GET /rules, GET /healthz)",
               err=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.shutdown_all()
