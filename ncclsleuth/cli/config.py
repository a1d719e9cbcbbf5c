"""``ncclsleuth config show``: the effective settings and where each came from."""
from __future__ import annotations

import json

import click

from . import guard, main
from .options import config_option, settings


@main.group("config")
def config_group() -> None:
    """The project configuration (.ncclsleuth.yaml, or [tool.ncclsleuth] in pyproject.toml)."""


@config_group.command("show", epilog="""\b
Examples:
  ncclsleuth config show                    # the nearest .ncclsleuth.yaml / pyproject.toml upwards
  ncclsleuth config show --config ci.yaml --format json
""")
@config_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@guard
def config_show(config: str | None, fmt: str) -> None:
    """Print the effective settings, each with the file it came from (or 'default')."""
    from ..util.config import DEFAULTS

    cfg = settings(config)
    rows = {key: cfg.effective(key) for key in DEFAULTS}
    if fmt == "json":
        click.echo(json.dumps({"file": cfg.path, "settings": {k: {"value": v, "from": src}
                                                               for k, (v, src) in rows.items()}}, indent=2))
        return
    click.echo(f"# configuration file: {cfg.path or 'none found (defaults)'}")
    width = max(map(len, rows))
    for key, (value, src) in rows.items():
        click.echo(f"{key:<{width}}  {json.dumps(value)}  # {src}")
