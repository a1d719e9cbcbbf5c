"""``ncclsleuth serve``: the analyzer over HTTP (:mod:`ncclsleuth.serve`)."""
from __future__ import annotations

from typing import Any

import click

from . import guard, main


def listen_url(address: tuple[Any, ...]) -> str:
    """``http://host:port`` of a bound server address (a host given as bytes is decoded)."""
    host, port = address[0], address[1]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return f"http://{host}:{port}"


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback by default; the API has no authentication).")
@click.option("--port", default=8080, show_default=True, type=int)
@click.option("--max-bytes", default=50 * 1024 * 1024, show_default=True, type=int,
              help="Largest request body (and decompressed body) accepted; larger gets 413.")
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, type=float,
              help="Seconds one analysis may take; longer gets 504.")
@click.option("--workers", default=4, show_default=True, type=int, help="Analyses run at once; more get 503.")
@guard
def serve_cmd(host: str, port: int, max_bytes: int, timeout_s: float, workers: int) -> None:
    """Serve the analyzer over HTTP: POST /analyze, GET /rules, GET /healthz."""
    from ..serve import make_server

    srv = make_server(host, port, max_bytes=max_bytes, timeout_s=timeout_s, workers=workers)
    click.echo(f"ncclsleuth: serving on {listen_url(srv.server_address)} (POST /analyze, GET /rules, GET /healthz)",
               err=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.shutdown_all()
