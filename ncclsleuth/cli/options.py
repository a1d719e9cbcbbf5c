"""The options commands share, declared once, and what turns them into :class:`ncclsleuth.api.Options`."""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from . import UserError
from .exitcodes import EXIT_FINDINGS, EXIT_OK

if TYPE_CHECKING:
    from .. import api
    from ..report import Report
    from ..rules.schema import Rule

F = TypeVar("F", bound=Callable[..., Any])
SEVERITIES = ["info", "warning", "error", "never"]


def _stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def apply(fn: F) -> F:
        for d in reversed(decorators):
            fn = d(fn)
        return fn

    return apply


#: --rules DIR (repeatable) and --keep-going
rule_options = _stack(
    click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False),
                 help="Extra rule folder (repeatable), used with the shipped pack."),
    click.option("--keep-going", is_flag=True, help="Skip malformed rule files instead of stopping."),
)
#: --rules DIR only (the commands that show rules, where a broken file is skipped anyway)
rule_dirs_option = click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False))


def fail_on_option(default: str) -> Callable[[F], F]:
    return click.option("--fail-on", type=click.Choice(SEVERITIES), default=default, show_default=True,
                        help="Exit 1 when a finding at or above this severity exists.")


#: --jobs/-j, --no-cache: how inputs are read
engine_options = _stack(
    click.option("--no-cache", is_flag=True, help="Parse every line with the grammar (no shape cache)."),
    click.option("--jobs", "-j", type=click.IntRange(1, 256), default=None,
                 help="Processes parsing files: this one and N-1 forked workers (default: the machine's cores; "
                      "one process where there is no fork)."),
)
scheduler_option = click.option(
    "--scheduler", default=None, metavar="ADDRESS",
    help="Parse on a Dask cluster: tcp://host:8786, or local:N for N local worker processes "
         "(needs pip install 'ncclsleuth[dask]').")
redact_option = click.option("--redact", is_flag=True,
                             help="Replace hostnames, IPs, GIDs, user names, pod names by stable placeholders.")
no_color_option = click.option("--no-color", is_flag=True, help="Plain terminal output.")


def options_for(rule_dirs: Sequence[str] = (), keep_going: bool = False, *, jobs: int | None = None,
                no_cache: bool = False, scheduler: str | None = None, default_rules: bool = True,
                **kw: Any) -> api.Options:
    """The api options of a command's flags; skipped rule files are reported on stderr."""
    from .. import api

    return api.Options(jobs=jobs, scheduler=scheduler, cache=not no_cache, rule_dirs=tuple(rule_dirs),
                       default_rules=default_rules, keep_going=keep_going, on_rule_error=_skipped, **kw)


def _skipped(e: Exception) -> None:
    click.echo(f"ncclsleuth: rule error: {e} (skipped)", err=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """A broken rule file, an unusable engine or store: one line and exit 2, not a traceback."""
    from ..ingest.sources import EngineError
    from ..rules.schema import RuleError

    try:
        yield
    except RuleError as exc:
        raise UserError(f"{exc} (use --keep-going to skip broken rule files)") from None
    except EngineError as exc:
        raise UserError(str(exc)) from None


def load_rules(rule_dirs: Sequence[str] = (), keep_going: bool = False, default_rules: bool = True) -> list[Rule]:
    """The rules of these flags, loaded now (commands that need them before reading any log)."""
    from .. import api

    with user_errors():
        return api.load_rules(options_for(rule_dirs, keep_going, default_rules=default_rules))


def write_output(path: str, text: str) -> None:
    """Write a report to ``path`` atomically (the old file stays whole on a full disk or a
    kill); a failure is one line and exit 2."""
    from ..util.atomic import write_file

    try:
        write_file(path, text)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def echo_notices(notices: Sequence[dict[str, str]]) -> None:
    for n in notices:
        click.echo(f"ncclsleuth: {n['path']}: {n['message']}", err=True)


def require_read(files_read: int, notices: Sequence[dict[str, str]], what: str = "analysed") -> None:
    """Exit 2 with the reasons when no input could be read."""
    if not files_read:
        why = "; ".join(f"{n['path']}: {n['message']}" for n in notices) or "no readable log in the given paths"
        raise UserError(f"nothing could be {what} ({why})")


def exit_for(report: Report, fail_on: str) -> None:
    """Exit 1 when a finding at or above ``fail_on`` exists, else 0."""
    if fail_on != "never":
        from ..rules.schema import Severity

        threshold = Severity.parse(fail_on)
        if any(Severity.parse(f.severity) >= threshold for f in report.findings):
            sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)
