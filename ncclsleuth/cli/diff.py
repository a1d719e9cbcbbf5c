"""``ncclsleuth diff``: what changed between a good and a bad run, most suspicious first."""
from __future__ import annotations

import sys

import click

from . import UserError, guard, main, model_command
from .exitcodes import EXIT_FINDINGS, EXIT_OK
from .options import (
    color_option,
    config_option,
    engine_options,
    options_for,
    redact_option,
    rule_options,
    settings,
    use_color,
    user_errors,
)


@main.command(epilog="""\b
Examples:
  ncclsleuth diff runs/good/ runs/bad/
  ncclsleuth diff good.log bad.log --format markdown > changes.md
""")
@click.argument("good")
@click.argument("bad")
@click.option("--format", "fmt", type=click.Choice(["terminal", "json", "markdown"]), default="terminal",
              show_default=True)
@rule_options
@engine_options
@redact_option
@color_option
@config_option
@guard
@model_command  # two models, their rule steps and the comparison
def diff(good: str, bad: str, fmt: str, rule_dirs: tuple[str, ...], keep_going: bool, no_cache: bool,
         jobs: int | None, redact: bool, color: str, no_color: bool, config: str | None) -> None:
    """What changed between a GOOD and a BAD run (files or folders), most suspicious first.

    Versions, NCCL_* settings as NCCL echoed them, bootstrap interface and network,
    IB devices, GPUDirect RDMA, channels and rings, init time per phase, nccl-tests
    bandwidth, and findings present in one run only. A change that the BAD run's
    findings point at (e.g. a wrong interface -> NCCL_SOCKET_IFNAME) comes first.
    Exit code 1 when something changed, 0 when the runs look the same.
    """
    from .. import api
    from ..renderers.diff import render

    with user_errors():
        result = api.diff([good], [bad], options_for(rule_dirs, keep_going=keep_going, jobs=jobs, no_cache=no_cache,
                                                     config=settings(config)))
    for side, run in (("good", result.good), ("bad", result.bad)):
        if not run.files_read:
            raise UserError(f"nothing could be read in the {side} run {run.path!r}")
    redactor = None
    if redact:  # one table for both runs: a host keeps its placeholder on both sides
        from ..report.redact import Redactor, redact_diff, redact_text

        result = redact_diff(result, redactor := Redactor())
    colored = use_color(color, no_color)
    text = render(result, fmt, color=colored)
    if redactor is not None:
        text = redact_text(text, redactor)
    click.echo(text, nl=not text.endswith("\n"), color=colored)
    sys.exit(EXIT_FINDINGS if result.changes else EXIT_OK)
