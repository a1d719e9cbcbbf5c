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
  XDG_CACHE_HOME=/opt/cache ncclsleuth cache warm   # a cache folder baked into the image
""")
@config_option
@guard
def cache_warm(config: str | None) -> None:
    """Make the rule pack, the knowledge table, the grammar and the NCCL catalog's index now, and
    keep them: a run on a fresh cache folder (a new container) makes them first (~0.5 s)."""
    from ..api import warm
    from ..util.cache import cache_dir

    try:
        with user_errors():  # a broken rule file of the configuration: one line
            done = warm(options_for(config=settings(config)))
    except OSError as exc:
        raise UserError(f"cache warm: {exc}") from exc
    for what, seconds in done:
        click.echo(f"{what:<16} {seconds:6.3f} s")
    click.echo(f"kept in {cache_dir()}")
