"""``watch`` (follow a starting job live) and ``diff`` (what changed between a good and a bad run)."""
from __future__ import annotations

import json
import sys
import time

import click

from .cli import UserError, _guard, main
from .exitcodes import EXIT_FINDINGS, EXIT_OK

_SEV = {"info": 0, "warning": 1, "error": 2}


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    from .watch import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
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
                   "jsonl: each new finding as one JSON line as soon as it appears; terminal/json/markdown: "
                   "the analyze renderers (with --once, or when the watch stops).")
@click.option("--exit-on", type=click.Choice(["error", "warning", "never"]), default="never", show_default=True,
              help="Stop with exit code 1 at the first finding of this severity or above.")
@click.option("--timeout", default=None, callback=_duration, help="Stop after this long (e.g. 30m).")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable), used with the shipped pack.")
@click.option("--keep-going", is_flag=True, help="Skip malformed rule files instead of stopping.")
@click.option("--no-color", is_flag=True, help="Plain terminal output.")
@_guard
def watch(paths: tuple[str, ...], interval: float, silence: float, once: bool, fmt: str, exit_on: str,
          timeout: float | None, rule_dirs: tuple[str, ...], keep_going: bool, no_color: bool) -> None:
    """Follow the logs of a starting job (files or folders) and diagnose as lines arrive.

    New files in the folders are picked up as ranks start; only appended bytes are read;
    a file that is rotated (new inode) or truncated is re-read from its start. Polling,
    not inotify (the optional 'watchdog' package is not used): following 1,000 files
    costs a stat per file per poll. Ctrl-C stops and prints the verdict.
    """
    from .cli_analyze import _load
    from .renderers import render
    from .watch import Watcher

    rules = _load(rule_dirs, keep_going)
    out = sys.stdout
    color = not no_color and sys.stdout.isatty()
    t0 = time.time()

    def emit_jsonl(fd) -> None:  # type: ignore[no-untyped-def]
        out.write(json.dumps({"t": round(time.time() - t0, 3), **fd.to_dict()}, ensure_ascii=False) + "\n")
        out.flush()

    def emit_plain(fd) -> None:  # type: ignore[no-untyped-def]
        out.write(f"[{time.strftime('%H:%M:%S')}] {fd.severity.upper()} {fd.rule_id}: {fd.title}\n")
        out.flush()

    live_tty = fmt == "live" and sys.stdout.isatty() and not once
    stream = {"jsonl": emit_jsonl, "live": None if live_tty else emit_plain}.get(fmt)
    w = Watcher(list(paths), rules=rules, silence=silence or 0.0, on_finding=None if once else stream)
    threshold = _SEV.get(exit_on)

    def final(code_from_findings: bool = True) -> None:
        rep = w.current_report()
        if fmt in ("terminal", "json", "markdown") or (fmt == "live" and once):
            text = render("terminal" if fmt == "live" else fmt, rep, color=color)
            click.echo(text, nl=not text.endswith("\n"))
        elif fmt == "jsonl" and once:
            for fd in rep.findings:
                emit_jsonl(fd)
        elif fmt == "live":
            v = rep.verdict
            click.echo(f"ncclsleuth watch: {v.severity.upper()} [{v.rule_id}] {v.title}" if v
                       else "ncclsleuth watch: no problem found so far")
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

        live = Live(w.renderable(), console=Console(no_color=no_color), refresh_per_second=4, transient=False)
        live.start()
    try:
        while True:
            started = time.monotonic()
            new = w.poll()
            if live is not None:
                live.update(w.renderable())
            if threshold is not None and any(_SEV.get(fd.severity, 0) >= threshold for fd in new):
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


@main.command()
@click.argument("good")
@click.argument("bad")
@click.option("--format", "fmt", type=click.Choice(["terminal", "json", "markdown"]), default="terminal",
              show_default=True)
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable), used with the shipped pack.")
@click.option("--no-color", is_flag=True, help="Plain terminal output.")
@_guard
def diff(good: str, bad: str, fmt: str, rule_dirs: tuple[str, ...], no_color: bool) -> None:
    """What changed between a GOOD and a BAD run (files or folders), most suspicious first.

    Versions, NCCL_* settings as NCCL echoed them, bootstrap interface and network,
    IB devices, GPUDirect RDMA, channels and rings, init time per phase, nccl-tests
    bandwidth, and findings present in one run only. A change that the BAD run's
    findings point at (e.g. a wrong interface -> NCCL_SOCKET_IFNAME) comes first.
    Exit code 1 when something changed, 0 when the runs look the same.
    """
    from .cli_analyze import _load
    from .diff import diff_runs, render_json, render_markdown, render_terminal

    rules = _load(rule_dirs, keep_going=True)
    result = diff_runs(good, bad, rules)
    for side, run in (("good", result.good), ("bad", result.bad)):
        if not run.files_read:
            raise UserError(f"nothing could be read in the {side} run {run.path!r}")
    if fmt == "json":
        text = render_json(result)
    elif fmt == "markdown":
        text = render_markdown(result)
    else:
        text = render_terminal(result, color=not no_color and sys.stdout.isatty())
    click.echo(text, nl=not text.endswith("\n"))
    sys.exit(EXIT_FINDINGS if result.changes else EXIT_OK)
