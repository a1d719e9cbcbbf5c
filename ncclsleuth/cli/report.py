"""``ncclsleuth report``: a self-contained post-mortem (HTML or Markdown) of a job."""
from __future__ import annotations

from pathlib import Path

import click

from . import guard, main
from .options import (
    echo_notices,
    engine_options,
    exit_for,
    fail_on_option,
    options_for,
    redact_option,
    require_read,
    rule_options,
    user_errors,
    write_output,
)


@main.command("report")
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write here; .html/.htm gives HTML, .md/.markdown gives Markdown (default: HTML on stdout).")
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default=None,
              help="Override the format the output suffix implies.")
@redact_option
@rule_options
@fail_on_option("never")
@engine_options
@guard
def report_cmd(paths: tuple[str, ...], output: str | None, fmt: str | None, redact: bool, rule_dirs: tuple[str, ...],
               keep_going: bool, fail_on: str, no_cache: bool, jobs: int | None) -> None:
    """Write a post-mortem of the job that wrote PATHS: verdict, findings, summary, topology, init timeline."""
    from .. import api
    from ..renderers import render

    if fmt is None:
        suffix = Path(output).suffix.lower() if output else ".html"
        fmt = "markdown" if suffix in (".md", ".markdown") else "html"
    with user_errors():
        report = api.analyze(list(paths), options_for(rule_dirs, keep_going, jobs=jobs, no_cache=no_cache,
                                                      with_figures=True))
    require_read(report.files_read, report.notices)
    echo_notices(report.notices)
    redactor = None
    if redact:
        from ..report.redact import Redactor, redact_text
        from ..report.redact import redact as do_redact

        report = do_redact(report, redactor := Redactor())  # the figures too, with the same placeholders
    if fmt == "markdown":
        text = render("markdown", report, postmortem=True, figures=report.figures)
    else:
        text = render("html", report, figures=report.figures)
    if redactor is not None:
        text = redact_text(text, redactor)
    if output:
        write_output(output, text)
        click.echo(f"ncclsleuth: wrote {output}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))
    exit_for(report, fail_on)
