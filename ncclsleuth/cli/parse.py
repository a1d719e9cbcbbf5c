"""``ncclsleuth parse``: the typed events of every line."""
from __future__ import annotations

import sys

import click

from . import UserError, guard, main
from .options import limit_options


@main.command(epilog="""\b
Examples:
  ncclsleuth parse rank0.log --kinds comm_init,watchdog_timeout
  ncclsleuth parse logs/ --format table | less -S
""")
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "table"]), default="jsonl", show_default=True)
@click.option("--kinds", default=None, help="Comma-separated event kinds to print (default: all).")
@click.option("--no-cache", is_flag=True, help="Parse every line with the grammar (no shape cache).")
@limit_options
@guard
def parse(paths: tuple[str, ...], fmt: str, kinds: str | None, no_cache: bool) -> None:
    """Print the typed events of PATHS (files, folders, - for stdin)."""
    from .. import api
    from ..renderers.events import print_table, write_jsonl

    wanted = set(kinds.split(",")) if kinds else None
    run = api.events(list(paths), api.Options(cache=not no_cache))
    selected = (ev for ev in run if wanted is None or ev.kind in wanted)
    if fmt == "jsonl":
        write_jsonl(selected, sys.stdout)
    else:
        print_table(selected)
    if not run.files_read:
        why = "; ".join(f"{n.path}: {n.message}" for n in run.notices) or "no readable input"
        raise UserError(f"nothing could be read ({why})")
    for n in run.notices:
        click.echo(f"ncclsleuth: {n.path}: {n.message}", err=True)
