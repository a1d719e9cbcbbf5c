"""``ncclsleuth topology``: rings, trees and transport hops per communicator."""
from __future__ import annotations

import click

from . import UserError, guard, main
from .options import engine_options, options_for, require_read


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--export", "export_to", type=click.Path(dir_okay=False), default=None,
              help="Write the largest communicator's graph: .graphml or .dot")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@engine_options
@guard
def topology(paths: tuple[str, ...], export_to: str | None, fmt: str, no_cache: bool, jobs: int | None) -> None:
    """Rings, trees and transport hops per communicator, with what looks wrong."""
    from .. import api
    from ..model.topology import analyze_topology, export
    from ..renderers.topology import render

    built = api.build(list(paths), options_for(jobs=jobs, no_cache=no_cache))
    require_read(built.files_read, [n.to_dict() for n in built.notices], "read")
    tops = analyze_topology(built.model)
    click.echo(render(tops, fmt))
    if export_to and tops:
        from ..util.atomic import atomic_path

        try:
            with atomic_path(export_to) as tmp:  # the old graph stays whole on a full disk or a kill
                export(tops[0], tmp)
        except OSError as exc:
            raise UserError(f"cannot write {export_to}: {exc.strerror or exc}") from None
        click.echo(f"graph of {tops[0].comm} written to {export_to}", err=True)
