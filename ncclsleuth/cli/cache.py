"""``ncclsleuth cache warm``: what a first run makes and keeps, made now (a container image)."""
from __future__ import annotations

import click

from . import UserError, guard, main
from .options import config_option, options_for, settings, user_errors


@main.group("cache", epilog="""\b
Examples:
  ncclsleuth cache warm                     # while building a container image
""")
def cache_group() -> None:
    """The cache folder: the tables, grammar and code a first run makes and keeps for later runs."""


@cache_group.command("warm", epilog="""\b
Examples:
  ncclsleuth cache warm                     # in a Dockerfile, as the user that runs ncclsleuth
  ncclsleuth cache warm sample-job/         # ... and the line shapes of a log of the jobs to come
  XDG_CACHE_HOME=/opt/cache ncclsleuth cache warm   # a cache folder baked into the image
""")
@click.argument("samples", nargs=-1, type=click.Path(exists=True, dir_okay=True))
@config_option
@guard
def cache_warm(samples: tuple[str, ...], config: str | None) -> None:
    """Make the rule pack, the knowledge table, the grammar and the NCCL catalog's index now, and
    keep them: a run on a fresh cache folder (a new container) makes them first (~0.5 s).  With
    SAMPLES (logs of the kind the jobs write), the templates of their line shapes too: they are
    analysed, the report dropped, and the command exits 0 whatever they hold."""
    from ..api import warm
    from ..util.cache import cache_dir

    try:
        with user_errors():  # a broken rule file of the configuration, an unreadable sample: one line
            done = warm(options_for(config=settings(config), jobs=1), samples)
    except OSError as exc:
        raise UserError(f"cache warm: {exc}") from exc
    for what, seconds in done:
        click.echo(f"{what:<16} {seconds:6.3f} s")
    click.echo(f"kept in {cache_dir()}")
