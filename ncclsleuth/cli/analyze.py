"""``ncclsleuth analyze``: why the job that wrote these logs failed or is slow."""
from __future__ import annotations

import sys
from collections.abc import Iterable

import click

from ..renderers import RENDERERS, render, render_chunks
from ..util.rxstore import keep_compiled
from . import guard, main, model_command
from .options import (
    color_option,
    config_option,
    echo_notices,
    echo_text,
    engine_options,
    exit_for,
    fail_on_option,
    options_for,
    output_format,
    redact_option,
    require_read,
    rule_options,
    scheduler_option,
    settings,
    terminal_width,
    use_color,
    user_errors,
    write_output,
)


@main.command(epilog="""\b
Examples:
  ncclsleuth analyze logs/                          # a folder of per-rank files
  ncclsleuth analyze slurm-4812.out -q              # one line: severity, [category], verdict
  ncclsleuth analyze logs/ -o verdict.json          # the format from the suffix (.json .md .html .txt)
  ncclsleuth analyze logs/ --fail-on error --redact --format markdown
""")
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(sorted(RENDERERS)), default=None,
              help="Output format [default: terminal, or what the -o suffix says; config: format]")
@rule_options
@fail_on_option("warning")
@engine_options
@scheduler_option
@click.option("--quiet", "-q", is_flag=True, help="Print only the verdict: one line, never wrapped.")
@redact_option
@click.option("--max-chars", type=click.IntRange(200, None), default=None,
              help="Markdown/Slack: trim the answer to this many characters (default 4000).")
@color_option
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the report to this file; its suffix picks the format (.json .md .html .txt).")
@config_option
@guard
@model_command  # the report and its rendering too, paused; then no teardown
def analyze(paths: tuple[str, ...], fmt: str | None, rule_dirs: tuple[str, ...], keep_going: bool,
            fail_on: str | None, no_cache: bool, jobs: int | None, scheduler: str | None, quiet: bool,
            redact: bool | None, max_chars: int | None, color: str, no_color: bool, output: str | None,
            config: str | None) -> None:
    """Say why the job that wrote PATHS (files, folders, URLs like s3://bucket/run/, - for stdin) failed or is slow."""
    from .. import api
    from .progress import progress_for

    cfg = settings(config)
    fmt = output_format(fmt or cfg.get("format"), output, "terminal", sorted(RENDERERS))
    with progress_for(enabled=sys.stderr.isatty() and not quiet) as bar:
        options = options_for(rule_dirs, keep_going, jobs=jobs, no_cache=no_cache, scheduler=scheduler,
                              config=cfg, progress=bar.tick if bar else None,
                              on_inputs=bar.inputs if bar else None)
        with user_errors():  # the rule pack loads while the workers parse
            report = api.analyze(list(paths), options)
    require_read(report.files_read, report.notices)
    echo_notices(report.notices)
    opts: dict[str, object] = {}
    if fmt == "terminal":
        opts = {"quiet": quiet, "width": terminal_width(to_file=output is not None)}
    if max_chars is not None and fmt in ("markdown", "slack"):
        opts["max_chars"] = max_chars
    redactor = None
    if cfg.redact(redact):
        from ..report.redact import Redactor, redact_text
        from ..report.redact import redact as redact_report

        report = redact_report(report, redactor := Redactor())
    colored = use_color(color, no_color, to_file=output is not None)
    if redactor is None:  # written as it is made: a JSON report is never held whole
        pieces: Iterable[str] = render_chunks(fmt, report, color=colored, **opts)
    else:  # the whole text: the redaction's last pass reads it all
        pieces = (redact_text(render(fmt, report, color=colored, **opts), redactor),)
    if output:
        write_output(output, pieces)
    else:
        echo_text(pieces, colored)
    keep_compiled()  # the code of the classes the rules and the renderer made, for the next start
    exit_for(report, cfg.fail_on(fail_on, "warning"))
