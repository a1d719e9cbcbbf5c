"""``ncclsleuth report``: a self-contained post-mortem (HTML or Markdown) of a job."""
from __future__ import annotations

import sys

import click

from . import guard, main, model_command
from .options import (
    config_option,
    echo_notices,
    engine_options,
    exit_for,
    fail_on_option,
    options_for,
    output_format,
    redact_option,
    require_read,
    rule_options,
    settings,
    user_errors,
    write_output,
)


@main.command("report", epilog="""\b
Examples:
  ncclsleuth report logs/ -o postmortem.html        # one self-contained page: no scripts, no URLs fetched
  ncclsleuth report logs/ -o postmortem.md --redact # Markdown with Mermaid ring and gantt, site names replaced
""")
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write here; .html/.htm gives HTML, .md/.markdown gives Markdown (default: HTML on stdout).")
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default=None,
              help="Override the format the output suffix implies.")
@redact_option
@rule_options
@fail_on_option("never")
@engine_options
@config_option
@guard
@model_command  # the analysis and the page
def report_cmd(paths: tuple[str, ...], output: str | None, fmt: str | None, redact: bool | None,
               rule_dirs: tuple[str, ...], keep_going: bool, fail_on: str | None, no_cache: bool, jobs: int | None,
               config: str | None) -> None:
    """Write a post-mortem of the job that wrote PATHS: verdict, findings, summary, topology, timeline."""
    from .. import api
    from ..renderers import render

    cfg = settings(config)
    fmt = output_format(fmt, output, "html", ["html", "markdown"])
    with user_errors():
        report = api.analyze(list(paths), options_for(rule_dirs, keep_going, jobs=jobs, no_cache=no_cache,
                                                      with_figures=True, config=cfg))
    require_read(report.files_read, report.notices)
    echo_notices(report.notices)
    redactor = None
    if cfg.redact(redact):
        from ..report.redact import Redactor, redact_text
        from ..report.redact import redact as do_redact

        report = do_redact(report, redactor := Redactor())  # the figures too, with the same placeholders
    header: dict[str, object] = {"command": _command_line(paths, output), "inputs": list(paths)}
    if cfg.redact(redact):  # paths and the command line name sites too
        header = {"command": "ncclsleuth report --redact", "inputs": [f"{len(paths)} input(s), names redacted"]}
    if fmt == "markdown":
        text = render("markdown", report, postmortem=True, figures=report.figures, header=header)
    else:
        text = render("html", report, figures=report.figures, header=header)
    if redactor is not None:
        text = redact_text(text, redactor)
    if output:
        write_output(output, text)
        click.echo(f"ncclsleuth: wrote {output}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))
    exit_for(report, cfg.fail_on(fail_on, "never"))


def _command_line(paths: tuple[str, ...], output: str | None) -> str:
    """The command as typed (``sys.argv`` of the console script or ``python -m``), else
    (ncclsleuth called as a library) what it amounts to."""
    import os
    import shlex

    prog = sys.argv[0] if sys.argv else ""
    if os.path.basename(prog) == "ncclsleuth" or prog.endswith(os.path.join("ncclsleuth", "__main__.py")):
        return shlex.join(["ncclsleuth", *sys.argv[1:]])
    return shlex.join(["ncclsleuth", "report", *paths, *(["-o", output] if output else [])])
