"""The options commands share, declared once, and what turns them into :class:`ncclsleuth.api.Options`."""
from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..util.rxstore import rx
from . import UserError
from .exitcodes import EXIT_FINDINGS, EXIT_OK

if TYPE_CHECKING:
    from .. import api
    from ..report import Report
    from ..rules.schema import Rule
    from ..util.config import Settings

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
    return click.option("--fail-on", type=click.Choice(SEVERITIES), default=None,
                        help=f"Exit 1 when a finding at or above this severity exists [default: {default}; "
                             "config: fail_on].")


#: --config FILE: the project configuration to use instead of the nearest one upwards
config_option = click.option(
    "--config", "config", type=click.Path(dir_okay=False), default=None, metavar="FILE",
    help="Settings file (.ncclsleuth.yaml or a pyproject.toml with [tool.ncclsleuth]); default: the nearest "
         "one from the current folder upwards. See 'ncclsleuth config show'.")


def settings(path: str | None = None) -> Settings:
    """The project configuration (``--config`` or the nearest file); a broken file is exit 2."""
    from ..util.config import ConfigError, load

    try:
        return load(path)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


_SIZE = rx(r"(\d+)\s*([KMGT]?)(?:i?B)?", re.I)


def _size(text: str) -> int:
    """``4G``, ``512M``, ``100000``: bytes (powers of 1024)."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        raise click.BadParameter(f"{text!r} is not a size (e.g. 8G, 512M, 100000)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2).upper()]


def _limit(name: str, convert: Callable[[str], Any]) -> Callable[[click.Context, click.Parameter, Any], None]:
    """A callback that puts a reading limit in force for this command (and its workers) and
    restores the previous one when the command ends."""

    def apply(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is None or value is False:
            return
        from ..ingest.sources import restore_limits, set_limits

        before = set_limits(**{name: value if isinstance(value, bool) else convert(value)})
        ctx.call_on_close(lambda: restore_limits(before))

    return apply


#: what reading may cost at most (defaults: ingest.sources.Limits)
limit_options = _stack(
    click.option("--max-decompressed", metavar="SIZE", expose_value=False, callback=_limit("max_decompressed", _size),
                 help="Most bytes one compressed file may decompress to (default 4G); the rest is not read."),
    click.option("--max-ratio", type=click.IntRange(1, None), expose_value=False,
                 callback=_limit("max_ratio", int),
                 help="Most bytes out per compressed byte past 256 MiB (default 1000): a decompression bomb "
                      "stops there."),
    click.option("--max-depth", type=click.IntRange(0, 100_000), expose_value=False, callback=_limit("max_depth", int),
                 help="Folder levels walked below a given folder (default 64)."),
    click.option("--follow-symlinks", is_flag=True, expose_value=False, callback=_limit("follow_symlinks", bool),
                 help="Follow symbolic links that lead out of a given folder (default: reported, not followed)."),
)

#: --jobs/-j, --no-cache: how inputs are read
engine_options = _stack(
    limit_options,
    click.option("--no-cache", is_flag=True,
                 help="Parse every line with the grammar and validate every rule file (no caches)."),
    click.option("--jobs", "-j", type=click.IntRange(1, 256), default=None,
                 help="Processes parsing files (and sharing a big job's rules): this one and N-1 forked workers "
                      "(default: the machine's cores; one process where there is no fork)."),
)
scheduler_option = click.option(
    "--scheduler", default=None, metavar="ADDRESS",
    help="Parse on a Dask cluster: tcp://host:8786, or local:N for N local worker processes "
         "(needs pip install 'ncclsleuth[dask]').")
redact_option = click.option("--redact/--no-redact", default=None,
                             help="Replace hostnames, IPs, GIDs, user names, pod names by stable placeholders "
                                  "[default: off; config: redact].")
#: --color auto|always|never (and --no-color, kept for scripts: the same as --color never)
color_option = _stack(
    click.option("--color", "color", type=click.Choice(["auto", "always", "never"]), default="auto",
                 show_default=True,
                 help="Colour: auto = on a terminal, unless NO_COLOR is set (FORCE_COLOR turns it on "
                      "when piped); always; never."),
    click.option("--no-color", is_flag=True, hidden=True, help="Same as --color never."),
)


def use_color(color: str = "auto", no_color: bool = False, to_file: bool = False, stream: Any = None) -> bool:
    """Whether to colour, by the conventions: the flag, then NO_COLOR (no-color.org: set and
    not empty turns colour off), then FORCE_COLOR (force-color.org: set and not empty turns
    it on when piped), then whether the output is a terminal.  A file (-o) is never
    coloured unless --color always asks for it."""
    import os

    if no_color or color == "never":
        return False
    if color == "always":
        return True
    if to_file or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return _isatty(stream or sys.stdout)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def terminal_width(to_file: bool = False, stream: Any = None) -> int | None:
    """The width to wrap at: the terminal's (rich measures it; COLUMNS overrides), COLUMNS
    when piped, None (no wrapping: one line stays one line) for a pipe or a file."""
    import os

    if to_file:
        return None
    columns = os.environ.get("COLUMNS", "")
    if _isatty(stream or sys.stdout):
        from rich.console import Console

        return max(20, Console().width)
    return max(20, int(columns)) if columns.isdecimal() and int(columns) > 0 else None


#: output suffix -> format (``-o report.json`` writes JSON)
SUFFIX_FORMATS = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
                  ".txt": "terminal", ".text": "terminal", ".log": "terminal"}


def output_format(fmt: str | None, output: str | None, default: str, allowed: Sequence[str]) -> str:
    """The format asked for, else the one the -o suffix names, else ``default``; a suffix
    this command cannot write is a user error, not a file in the wrong format."""
    import os

    if fmt is not None:
        return fmt
    if output is None:
        return default
    suffix = os.path.splitext(output)[1].lower()
    if not suffix:
        return default
    got = SUFFIX_FORMATS.get(suffix)
    if got is None or got not in allowed:
        known = ", ".join(s for s, f in SUFFIX_FORMATS.items() if f in allowed)
        raise UserError(f"{output}: cannot write {suffix} (this command writes {known}; or give --format)")
    return got


def write_output(path: str, text: str | Iterable[str]) -> None:
    """Write the report (its text, or the pieces of it: :func:`ncclsleuth.renderers.render_chunks`)
    to ``path`` atomically (the old file stays whole on a full disk or a kill); a missing folder
    or an unwritable file is one line, exit 2."""
    import os

    from ..util.atomic import write_file

    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise UserError(f"{path}: the folder {folder!r} does not exist")
    try:
        write_file(path, text)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None


def echo_text(pieces: Iterable[str], color: bool = False) -> None:
    """Write a report's text to stdout piece by piece as the pieces come, then a newline where
    the text does not end with one (a JSON report of a 100,000-rank job need not be held whole)."""
    last = ""
    for piece in pieces:
        if piece:
            click.echo(piece, nl=False, color=color)  # click strips colour from pipes otherwise
            last = piece
    if not last.endswith("\n"):
        click.echo("", color=color)


def options_for(rule_dirs: Sequence[str] = (), keep_going: bool = False, *, jobs: int | None = None,
                no_cache: bool = False, scheduler: str | None = None, default_rules: bool = True,
                config: Settings | None = None, **kw: Any) -> api.Options:
    """The api options of a command's flags and the project configuration; skipped rule
    files and user rules that replace shipped ones are said on stderr."""
    from .. import api

    cfg = config if config is not None else settings()
    return api.Options(jobs=jobs, scheduler=scheduler, cache=not no_cache, rule_dirs=tuple(rule_dirs),
                       default_rules=default_rules, keep_going=keep_going, on_rule_error=_skipped,
                       on_rule_notice=_notice, config=cfg.rule_config(), **kw)


def _skipped(e: Exception) -> None:
    click.echo(f"ncclsleuth: rule error: {e} (skipped)", err=True)


def _notice(line: str) -> None:
    click.echo(f"ncclsleuth: {line}", err=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """A broken rule file, an unusable engine or store: one line and exit 2, not a traceback."""
    from ..ingest.sources import EngineError
    from ..rules.schema import RuleError

    try:
        yield
    except RuleError as exc:
        raise UserError(f"{exc} (use --keep-going to skip broken rule files; 'ncclsleuth rules check DIR' "
                        "lists every error)") from None
    except EngineError as exc:
        raise UserError(str(exc)) from None


def load_rules(rule_dirs: Sequence[str] = (), keep_going: bool = False, default_rules: bool = True,
               config: Settings | None = None) -> list[Rule]:
    """The rules of these flags, loaded now (commands that need them before reading any log)."""
    from .. import api

    with user_errors():
        return api.load_rules(options_for(rule_dirs, keep_going, default_rules=default_rules, config=config))


def echo_notices(notices: Sequence[dict[str, str]]) -> None:
    for n in notices:
        click.echo(f"ncclsleuth: {n['path']}: {n['message']}", err=True)


def require_read(files_read: int, notices: Sequence[dict[str, str]], what: str = "analysed") -> None:
    """Exit 2 with the reasons when no input could be read."""
    if not files_read:
        why = "; ".join(f"{n['path']}: {n['message']}" for n in notices) or "no readable log in the given paths"
        raise UserError(f"nothing could be {what} ({why})")


def exit_for(report: Report, fail_on: str) -> None:
    """Exit 3 when the inputs are not a log at all, 1 when a finding at or above ``fail_on``
    exists, else 0."""
    if not report.is_log:
        from .exitcodes import EXIT_NOT_A_LOG

        sys.exit(EXIT_NOT_A_LOG)
    if fail_on != "never":
        from ..rules.schema import Severity

        threshold = Severity.parse(fail_on)
        if any(Severity.parse(f.severity) >= threshold for f in report.findings):
            sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)
