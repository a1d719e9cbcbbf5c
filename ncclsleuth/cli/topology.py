"""``ncclsleuth topology``: rings, trees and transport hops per communicator."""
from __future__ import annotations

import os

import click

from . import UserError, guard, main, model_command
from .options import engine_options, options_for, require_read


@main.command(epilog="""\b
Examples:
  ncclsleuth topology logs/                         # rings, trees and hops, with what looks wrong
  ncclsleuth topology logs/ --export ring.graphml   # .graphml .dot; .svg .png with Graphviz installed
""")
@click.argument("paths", nargs=-1, required=True)
@click.option("--export", "export_to", type=click.Path(dir_okay=False), default=None,
              help="Write the largest communicator's graph: .graphml, .dot/.gv, or .svg/.png (needs Graphviz).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@engine_options
@guard
@model_command  # the build and the graphs
def topology(paths: tuple[str, ...], export_to: str | None, fmt: str, no_cache: bool, jobs: int | None) -> None:
    """Rings, trees and transport hops per communicator, with what looks wrong."""
    from .. import api
    from ..model.topology import EXPORT_SUFFIXES, ExportError, analyze_topology, export
    from ..renderers.topology import render

    if export_to:  # before reading a 2 GB log: a file we cannot write is said at once
        suffix = os.path.splitext(export_to)[1].lower()
        if suffix not in EXPORT_SUFFIXES:
            raise UserError(f"{export_to}: cannot write {suffix or 'a file without suffix'} "
                            f"(use {', '.join(EXPORT_SUFFIXES)})")
        folder = os.path.dirname(export_to) or "."
        if not os.path.isdir(folder):
            raise UserError(f"{export_to}: the folder {folder!r} does not exist")
    built = api.build(list(paths), options_for(jobs=jobs, no_cache=no_cache))
    require_read(built.files_read, [n.to_dict() for n in built.notices], "read")
    tops = analyze_topology(built.model)
    click.echo(render(tops, fmt))
    if export_to and tops:
        from ..util.atomic import atomic_path

        try:
            with atomic_path(export_to) as tmp:  # the old graph stays whole on a full disk or a kill
                try:
                    export(tops[0], tmp)
                except ExportError as exc:  # told with the name the user gave, not the temporary one
                    raise ExportError(str(exc).replace(tmp, export_to)) from None
        except ExportError as exc:
            raise UserError(str(exc)) from None
        except OSError as exc:
            raise UserError(f"{export_to}: cannot write: {exc.strerror or exc}") from None
        click.echo(f"graph of {tops[0].comm} written to {export_to}", err=True)
