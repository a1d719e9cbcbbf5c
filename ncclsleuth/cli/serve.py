"""``ncclsleuth serve``: the analyzer over HTTP (:mod:`ncclsleuth.serve`)."""
from __future__ import annotations

from typing import Any

import click

from . import guard, main
from .options import config_option, load_rules, rule_options, settings


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
@click.option("--port", default=8080, show_default=True, type=int)
@click.option("--max-bytes", default=50 * 1024 * 1024, show_default=True, type=int,
              help="Largest request body (and decompressed body) accepted; larger gets 413.")
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, type=float,
              help="Seconds one analysis may take; longer gets 504.")
@click.option("--workers", default=4, show_default=True, type=int, help="Analyses run at once; more get 503.")
@click.option("--access-log/--no-access-log", default=True, show_default=True,
              help="One line per request on stderr: client, method, path, status, bytes, ms (never the body).")
@rule_options
@config_option
@guard
def serve_cmd(host: str, port: int, max_bytes: int, timeout_s: float, workers: int, access_log: bool,
              rule_dirs: tuple[str, ...], keep_going: bool, config: str | None) -> None:
    """Serve the analyzer over HTTP: POST /analyze, GET /rules, GET /healthz.

    Answers 405 for a method a path does not take, 413 for a body too large, 422 for a
    body that is not a log, 503 when busy, 504 when an analysis takes too long. SIGTERM
    (or Ctrl-C) stops it at once.
    """
    from ..serve import make_server

    log = (lambda line: click.echo(f"ncclsleuth serve: {line}", err=True)) if access_log else None
    rules = load_rules(rule_dirs, keep_going, config=settings(config))
    srv = make_server(host, port, rules=rules, max_bytes=max_bytes, timeout_s=timeout_s, workers=workers,
                      access_log=log)
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
