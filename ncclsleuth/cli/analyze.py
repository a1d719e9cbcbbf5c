"""``ncclsleuth analyze``: why the job that wrote these logs failed or is slow."""
from __future__ import annotations

import sys

import click

from ..renderers import RENDERERS, render
from ..util.gcpause import paused
from . import allow_fast_exit, guard, main
from .options import (
    echo_notices,
    engine_options,
    exit_for,
    fail_on_option,
    no_color_option,
    options_for,
    redact_option,
    require_read,
    rule_options,
    scheduler_option,
    user_errors,
    write_output,
)


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(sorted(RENDERERS)), default="terminal", show_default=True)
@rule_options
@fail_on_option("warning")
@engine_options
@scheduler_option
@click.option("--quiet", "-q", is_flag=True, help="Print only the verdict line.")
@redact_option
@click.option("--max-chars", type=click.IntRange(200, None), default=None,
              help="Markdown/Slack: trim the answer to this many characters (default 4000).")
@no_color_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to this file instead of stdout.")
@guard
@paused()  # the report and its rendering too: a gc pass over a 16k-rank model costs ~1 s
def analyze(paths: tuple[str, ...], fmt: str, rule_dirs: tuple[str, ...], keep_going: bool, fail_on: str,
            no_cache: bool, jobs: int | None, scheduler: str | None, quiet: bool, redact: bool,
            max_chars: int | None, no_color: bool, output: str | None) -> None:
    """Say why the job that wrote PATHS (files, folders, s3://... URLs, - for stdin) failed or is slow."""
    from .. import api
    from .progress import progress_for

    with progress_for(enabled=sys.stderr.isatty() and sys.stdout.isatty() and fmt == "terminal") as tick:
        options = options_for(rule_dirs, keep_going, jobs=jobs, no_cache=no_cache, scheduler=scheduler,
                              progress=tick)
        with user_errors():  # the rule pack loads while the workers parse
            report = api.analyze(list(paths), options)
    require_read(report.files_read, report.notices)
    echo_notices(report.notices)
    opts: dict[str, object] = {"quiet": True} if quiet and fmt == "terminal" else {}
    if max_chars is not None and fmt in ("markdown", "slack"):
        opts["max_chars"] = max_chars
    redactor = None
    if redact:
        from ..report.redact import Redactor, redact_text
        from ..report.redact import redact as redact_report

        report = redact_report(report, redactor := Redactor())
    text = render(fmt, report, color=not no_color and output is None and sys.stdout.isatty(), **opts)
    if redactor is not None:
        text = redact_text(text, redactor)
    if output:
        write_output(output, text)
    else:
        click.echo(text, nl=not text.endswith("\n"))
    allow_fast_exit()  # everything is written: no need to free the model object by object
    exit_for(report, fail_on)
