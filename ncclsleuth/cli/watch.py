"""``ncclsleuth watch``: follow a starting job live (:mod:`ncclsleuth.live`) and diagnose as lines arrive."""
from __future__ import annotations

import sys
import time
from typing import Any

import click

from . import UserError, guard, main
from .exitcodes import EXIT_FINDINGS, EXIT_OK
from .options import (
    color_option,
    config_option,
    limit_options,
    load_rules,
    redact_option,
    rule_options,
    settings,
    terminal_width,
    use_color,
)

_SEV = {"info": 0, "warning": 1, "error": 2}


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    from ..live import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


class _Shown:
    """What watch prints, redacted with one table for the whole watch when ``--redact`` asks
    (placeholders stay stable as new findings and hosts appear)."""

    def __init__(self, redact: bool) -> None:
        from ..report.redact import Redactor

        self.r = Redactor() if redact else None

    def finding(self, fd: Any) -> Any:
        from ..report.redact import redact_finding

        return fd if self.r is None else redact_finding(fd, self.r)

    def report(self, rep: Any) -> Any:
        from ..report.redact import redact

        return rep if self.r is None else redact(rep, self.r)

    def plain(self, obj: Any) -> Any:
        """A plain structure (what changed in a finding: its previous message, hosts) redacted."""
        from ..report.redact import redact_plain

        return obj if self.r is None else redact_plain(obj, self.r)

    def text(self, text: str) -> str:
        from ..report.redact import redact_text

        return text if self.r is None else redact_text(text, self.r)

    def view(self, w: Any) -> Any:
        """The live view (its state and findings redacted before rich lays them out)."""
        if self.r is None:
            return w.renderable()
        from ..renderers.live import render_status
        from ..report.redact import redact_plain

        return render_status(redact_plain(w.status(), self.r), [self.finding(f) for f in w.findings],
                             [self.r.sub(p) for p in w.paths], w.silence)


@main.command(epilog="""\b
Examples:
  ncclsleuth watch runs/job-4812/                       # a live view of the job as it starts
  ncclsleuth watch runs/job-4812/ --format jsonl        # new / updated / resolved findings for bots
  ncclsleuth watch runs/job-4812/ --once                # the verdict now
""")
@click.argument("paths", nargs=-1, required=True)
@click.option("--interval", type=click.FloatRange(0.05, 10.0), default=0.5, show_default=True,
              help="Seconds between polls (stat of every followed file; only changed files are read).")
@click.option("--silence", default="60s", show_default=True, callback=_duration,
              help="A rank with no line for this long, while others finished NCCL init, is reported (WATCH001); "
                   "absence rules (INIT001/INIT002/TOPO002) wait until the whole job is this quiet.")
@click.option("--once", is_flag=True, help="Read what is there now, print the verdict, exit (1 if a finding "
                                           ">= warning, as analyze).")
@click.option("--format", "fmt", type=click.Choice(["live", "jsonl", "terminal", "json", "markdown"]),
              default="live", show_default=True,
              help="live: a rich view redrawn every poll (plain lines when stdout is not a terminal); "
                   "jsonl: one JSON line per event: new, updated (with what changed) or resolved, each with the "
                   "finding's stable id; terminal/json/markdown: the analyze renderers (with --once, or when the "
                   "watch stops).")
@click.option("--exit-on", type=click.Choice(["error", "warning", "never"]), default="never", show_default=True,
              help="Stop with exit code 1 at the first finding of this severity or above.")
@click.option("--timeout", default=None, callback=_duration, help="Stop after this long (e.g. 30m).")
@rule_options
@limit_options
@redact_option
@color_option
@config_option
@guard
def watch(paths: tuple[str, ...], interval: float, silence: float, once: bool, fmt: str, exit_on: str,
          timeout: float | None, rule_dirs: tuple[str, ...], keep_going: bool, redact: bool, color: str,
          no_color: bool, config: str | None) -> None:
    """Follow the logs of a starting job (files or folders) and diagnose as lines arrive.

    New files in the folders are picked up as ranks start; only appended bytes are read;
    a file that is rotated (new inode) or truncated is re-read from its start. Polling,
    not inotify (the optional 'watchdog' package is not used): following 1,000 files
    costs a stat per file per poll. Ctrl-C stops and prints the verdict.
    """
    from ..live import Watcher
    from ..renderers import render
    from ..renderers.live import finding_jsonl, finding_line, verdict_line
    from ..rules.findings import Finding

    rules = load_rules(rule_dirs, keep_going, config=settings(config))
    out = sys.stdout
    colored = use_color(color, no_color)
    t0 = time.time()
    shown = _Shown(redact)

    def emit_jsonl(event: str, fd: Finding, changed: dict[str, Any]) -> None:
        out.write(shown.text(finding_jsonl(shown.finding(fd), time.time() - t0, event, shown.plain(changed))))
        out.flush()

    def emit_plain(event: str, fd: Finding, changed: dict[str, Any]) -> None:
        out.write(shown.text(finding_line(shown.finding(fd), event)))
        out.flush()

    live_tty = fmt == "live" and sys.stdout.isatty() and not once
    stream = {"jsonl": emit_jsonl, "live": None if live_tty else emit_plain}.get(fmt)
    w = Watcher(list(paths), rules=rules, silence=silence or 0.0, on_event=None if once else stream)
    threshold = _SEV.get(exit_on)

    def final(code_from_findings: bool = True) -> None:
        rep = w.current_report()
        if fmt in ("terminal", "json", "markdown") or (fmt == "live" and once):
            opts = {"width": terminal_width()} if fmt in ("live", "terminal") else {}
            text = shown.text(render("terminal" if fmt == "live" else fmt, shown.report(rep), color=colored, **opts))
            click.echo(text, nl=not text.endswith("\n"), color=colored)
        elif fmt == "jsonl" and once:
            for fd in rep.findings:
                emit_jsonl("new", fd, {})
        elif fmt == "live":
            click.echo(shown.text(verdict_line(shown.report(rep))))
        bad = any(_SEV.get(f.severity, 0) >= 1 for f in rep.findings)
        sys.exit(EXIT_FINDINGS if code_from_findings and bad else EXIT_OK)

    if once:
        w.poll()
        if not w.files:
            raise UserError("nothing to watch: " + "; ".join(f"{n.path}: {n.message}" for n in w.notices))
        w.finish()
        w.poll(force=True)
        final()

    deadline = None if timeout is None else time.monotonic() + timeout
    stop_code: int | None = None
    live = None
    if live_tty:
        from rich.console import Console
        from rich.live import Live

        live = Live(shown.view(w), console=Console(no_color=not colored), refresh_per_second=4, transient=False)
        live.start()
    try:
        while True:
            started = time.monotonic()
            new = w.poll()
            if live is not None:
                live.update(shown.view(w))
            if threshold is not None and any(_SEV.get(fd.severity, 0) >= threshold for fd in new):
                for _ in range(3):  # a cause held back one poll (counts still arriving) is said before stopping
                    if not w.pending:
                        break
                    time.sleep(interval)
                    w.poll(force=True)
                stop_code = EXIT_FINDINGS
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None:
            live.stop()
    if stop_code is not None:
        if fmt in ("terminal", "json", "markdown", "live"):
            final()
        sys.exit(stop_code)
    final()
