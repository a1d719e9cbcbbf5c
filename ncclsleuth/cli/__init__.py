"""Command line: a thin click layer over :mod:`ncclsleuth.api` (ingest -> parse -> model ->
rules -> report), one module per command, the options they share declared once
(:mod:`.options`).

Exit codes (one place, see :mod:`.exitcodes`): 0 nothing at or above ``--fail-on``, 1
findings, 2 usage or input error, 3 not a log.  Bad input never produces a Python traceback unless
``--debug`` asks for one.
"""
from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from .. import __version__
from ..util.gcpause import paused
from .exitcodes import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE


class UserError(click.ClickException):
    """An error the user can fix: one line on stderr, exit 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"ncclsleuth: error: {self.format_message()}", err=True)


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn unexpected exceptions into one clear line (a traceback only with --debug)."""

    @wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        try:
            return fn(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(EXIT_OK)
        except KeyboardInterrupt:
            click.echo("ncclsleuth: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:  # noqa: BLE001 - last line of defence, by design
            if ctx.find_root().params.get("debug"):
                raise
            click.echo(f"ncclsleuth: internal error: {type(exc).__name__}: {exc} (run with --debug for details)",
                       err=True)
            ctx.exit(EXIT_USAGE)

    return inner


def model_command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A command that builds job models (``analyze``, ``diff``, ``topology``, ``report``): the cyclic
    collector paused for all of it (a pass over a 16,384-rank model costs ~1 s, and one came
    whenever a build's own pause ended before the rule step, the graphs or the page), and once it
    has returned or exited, its output written, the process may end without teardown
    (:func:`allow_fast_exit`).  An exception is no such end: :func:`guard` reports it and the
    process exits as usual."""

    @wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        with paused():
            try:
                out = fn(*args, **kwargs)
            except SystemExit:
                allow_fast_exit()
                raise
            allow_fast_exit()
            return out

    return inner


#: command name -> module of this package that defines it (imported when the command is asked for)
COMMAND_MODULES = {
    "analyze": "analyze", "parse": "parse", "rules": "rules", "explain": "rules", "topology": "topology",
    "report": "report", "serve": "serve", "watch": "watch", "diff": "diff", "config": "config",
    "events": "rules", "completion": "completion", "cache": "cache",
}


class _LazyGroup(click.Group):
    """Imports a command's module only when that command runs (or help lists them all).

    ``ncclsleuth analyze`` imported the report, serve, watch and diff commands too, with
    pathlib and datetime: ~2 ms of every start, which a chat-ops bot pays per question.
    ``help`` and the tests list them all (:func:`register_commands`).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        register_commands()
        return super().list_commands(ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list with each summary whole (click cuts them at ~45 characters)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=200)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            import importlib

            importlib.import_module(f"{__package__}.{module}")  # registers on import
        return super().get_command(ctx, cmd_name)


#: the cyclic collector was turned off for start-up by the console script (``ncclsleuth.__main__``):
#: the group's callback, which click runs once the command is found and before its options are
#: read, turns it on again
_COLLECTOR_PAUSED = [False]


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``--version``: the version, and whether the prefilter's long scans run on RE2 (the fast
    extra) or on Python's ``re``: a benchmark or a slow run on a big log is read with it."""
    if not value or ctx.resilient_parsing:
        return
    from ..parse.anchors import PREFILTER_BYTES

    click.echo(f"ncclsleuth, version {__version__}")
    click.echo(f"prefilter of big logs: {PREFILTER_BYTES.status()}")
    ctx.exit()


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog="""\b
Examples:
  ncclsleuth analyze logs/                  # why the job that wrote logs/ failed
  ncclsleuth report logs/ -o pm.html        # a post-mortem page
  ncclsleuth watch runs/job-4812/           # follow a starting job
  ncclsleuth explain NET001                 # what a rule checks and how to fix it

Exit codes: 0 nothing at or above --fail-on, 1 findings, 2 usage or input error,
3 not a log (no NCCL, PyTorch distributed or nccl-tests line). Shell completion:
eval "$(ncclsleuth completion bash)" (zsh, fish: see 'ncclsleuth completion --help').
""")
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and which engine scans big logs, and exit.")
@click.option("--debug", is_flag=True, help="Show Python tracebacks of internal errors.")
def main(debug: bool) -> None:
    """Say why a multi-node NCCL / PyTorch distributed job failed or is slow."""
    if _COLLECTOR_PAUSED[0]:  # start-up is over: the command runs with the collector as it was
        _COLLECTOR_PAUSED[0] = False
        gc.enable()


#: set by a command that built a job model and has written all its output (see entry)
_FAST_EXIT = [False]
#: set by :func:`entry`: the process ends when the command returns
_EXITS = [False]


def allow_fast_exit() -> None:
    """Called once a command that built a job model has written its output (:func:`model_command`):
    the process may end without teardown.

    Where it will (:func:`_can_exit_fast`), the objects alive now are moved out of the cyclic
    collector's reach (``gc.freeze``): the collector, paused for the command, is turned on again as
    its exit unwinds (``util.gcpause.paused``), and the first allocation then ran a full pass over
    the job model, for nothing, before the exit: 0.07-0.11 s of ``--jobs 1`` on the 8,000-rank file
    (4.6 s), 0.17 s of its ``--jobs 2`` (3.3 s), 0.07 s on 4,096 per-rank files.  Not where the
    interpreter shuts down as usual: a frozen object is never collected, its finalizer never run."""
    _FAST_EXIT[0] = True
    if _EXITS[0] and _can_exit_fast():  # the console script's process, not a caller's (tests, library use)
        gc.freeze()


def _can_exit_fast() -> bool:
    """Whether nothing is left to clean up: no Dask client or remote file system loaded, no child
    process of ``multiprocessing`` running (see :func:`entry`)."""
    if "distributed" in sys.modules or "fsspec" in sys.modules:
        return False
    mp = sys.modules.get("multiprocessing")
    return mp is None or not mp.active_children()


def entry(collector_paused: bool = False) -> None:
    """The console script: the CLI, then (after ``analyze``) an exit that skips freeing
    objects one by one.  ``collector_paused``: the caller turned the cyclic collector off
    for start-up, to be turned on when the command starts (see ``ncclsleuth.__main__``).

    After ``analyze`` of a 16,384-rank job the interpreter's shutdown (a last gc pass and
    ~10^7 deallocations) took ~1 s after the report was out.  Only a command that asked
    for it, and only where nothing is left to clean up (no child processes, no Dask
    client), exits immediately; every other command exits as usual.
    """
    code: Any = 0
    _COLLECTOR_PAUSED[0] = collector_paused
    _EXITS[0] = True
    try:
        main(standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
    if not isinstance(code, int):  # None or a message, as sys.exit would treat them
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    if not _FAST_EXIT[0] or not _can_exit_fast():
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # closed or broken pipe: nothing more can be said
        pass
    os._exit(code)


def register_commands() -> None:
    """Attach every command defined in other modules (help, tests, library use)."""
    import importlib

    for module in sorted(set(COMMAND_MODULES.values())):
        importlib.import_module(f"{__package__}.{module}")  # registers on import

__all__ = ["main", "UserError", "EXIT_OK", "EXIT_FINDINGS", "EXIT_USAGE"]
