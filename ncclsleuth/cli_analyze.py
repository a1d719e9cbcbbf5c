"""``analyze``, ``rules list|explain|test`` and ``explain``: commands over the rule engine."""
from __future__ import annotations

import sys

import click

from .cli import UserError, _guard, allow_fast_exit, main
from .exitcodes import EXIT_FINDINGS, EXIT_OK
from .gcpause import paused
from .renderers import RENDERERS, render


def _load(rule_dirs: tuple[str, ...], keep_going: bool, with_default: bool = True):  # type: ignore[no-untyped-def]
    from .rules.engine import default_rule_dir, load_rules
    from .rules.schema import RuleError

    dirs = ([default_rule_dir()] if with_default else []) + list(rule_dirs)
    try:
        rules, errors = load_rules(dirs, keep_going=keep_going)
    except RuleError as exc:
        raise UserError(f"{exc} (use --keep-going to skip broken rule files)") from None
    for e in errors:
        click.echo(f"ncclsleuth: rule error: {e} (skipped)", err=True)
    return rules


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(sorted(RENDERERS)), default="terminal", show_default=True)
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable), used with the shipped pack.")
@click.option("--keep-going", is_flag=True, help="Skip malformed rule files instead of stopping.")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error", "never"]), default="warning",
              show_default=True, help="Exit 1 when a finding at or above this severity exists.")
@click.option("--no-cache", is_flag=True, help="Parse every line with the grammar (no shape cache).")
@click.option("--jobs", "-j", type=click.IntRange(1, 256), default=None,
              help="Processes parsing files: this one and N-1 forked workers (default: the machine's cores; one process where there is no fork).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Parse on a Dask cluster: tcp://host:8786, or local:N for N local worker processes "
                   "(needs pip install 'ncclsleuth[dask]').")
@click.option("--quiet", "-q", is_flag=True, help="Print only the verdict line.")
@click.option("--redact", is_flag=True,
              help="Replace hostnames, IPs, GIDs, user names, pod names by stable placeholders.")
@click.option("--max-chars", type=click.IntRange(200, None), default=None,
              help="Markdown/Slack: trim the answer to this many characters (default 4000).")
@click.option("--no-color", is_flag=True, help="Plain terminal output.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to this file instead of stdout.")
@_guard
@paused()  # the report and its rendering too: a gc pass over a 16k-rank model costs ~1 s
def analyze(paths: tuple[str, ...], fmt: str, rule_dirs: tuple[str, ...], keep_going: bool, fail_on: str,
            no_cache: bool, jobs: int | None, scheduler: str | None, quiet: bool, redact: bool,
            max_chars: int | None, no_color: bool, output: str | None) -> None:
    """Say why the job that wrote PATHS (files, folders, s3://... URLs, - for stdin) failed or is slow."""
    from .pipeline import analyze as run
    from .progress import progress_for

    engine = _engine(paths, scheduler, jobs)
    with progress_for(enabled=sys.stderr.isatty() and sys.stdout.isatty() and fmt == "terminal") as tick:
        try:  # the rule pack loads while the workers parse
            report, files_read = run(list(paths), lambda: _load(rule_dirs, keep_going), cache=not no_cache,
                                     jobs=jobs, progress=tick, engine=engine)
        except Exception as exc:
            from .remote import EngineError  # only reached with an engine: fsspec/dask already imported

            if engine is not None and isinstance(exc, EngineError):
                raise UserError(str(exc)) from None
            raise
    if not files_read:
        why = "; ".join(f"{n['path']}: {n['message']}" for n in report.notices) or "no readable log in the given paths"
        raise UserError(f"nothing could be analysed ({why})")
    for n in report.notices:
        click.echo(f"ncclsleuth: {n['path']}: {n['message']}", err=True)
    opts: dict[str, object] = {"quiet": True} if quiet and fmt == "terminal" else {}
    if max_chars is not None and fmt in ("markdown", "slack"):
        opts["max_chars"] = max_chars
    if redact:
        from .redact import redact as redact_report

        report = redact_report(report)
    text = render(fmt, report, color=not no_color and output is None and sys.stdout.isatty(), **opts)
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        click.echo(text, nl=not text.endswith("\n"))
    allow_fast_exit()  # everything is written: no need to free the model object by object
    if fail_on != "never":
        from .rules.schema import Severity

        threshold = Severity.parse(fail_on)
        if any(Severity.parse(f.severity) >= threshold for f in report.findings):
            sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


def _engine(paths: tuple[str, ...], scheduler: str | None, jobs: int | None):  # type: ignore[no-untyped-def]
    """None (the local pipeline) unless URLs or --scheduler ask for fsspec / Dask."""
    if scheduler is None and not any("://" in p for p in paths):
        return None
    from .remote import EngineError, is_url, needs_remote, remote_engine, require_fsspec

    try:
        if any(is_url(p) for p in paths):
            require_fsspec()  # one line saying how to install it, before any work
        if scheduler is not None:
            from .distributed import dask_engine

            return dask_engine(scheduler)
        if not needs_remote(paths):
            return None
        from .pipeline import default_jobs

        return remote_engine(default_jobs() if jobs is None else jobs)
    except (EngineError, ValueError) as exc:
        raise UserError(str(exc)) from None


@main.group()
def rules() -> None:
    """List, explain and test diagnosis rules."""


@rules.command("list")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False))
@_guard
def rules_list(rule_dirs: tuple[str, ...]) -> None:
    """One line per rule: id, severity, category, title."""
    for r in _load(rule_dirs, keep_going=True):
        click.echo(f"{r.id}  {r.severity.name:<7}  {r.category:<22}  {r.name}: {r.title}")


def _explain(rule_id: str, rule_dirs: tuple[str, ...]) -> None:
    rules = {r.id: r for r in _load(rule_dirs, keep_going=True)}
    r = rules.get(rule_id.upper())
    if r is None:
        raise UserError(f"no rule {rule_id!r} (see 'ncclsleuth rules list')")
    click.echo(f"{r.id} {r.name} [{r.severity.name}, {r.category}, confidence {r.confidence}]")
    click.echo(f"{r.title}\n\n{r.description.strip()}\n")
    for t in r.tests:
        if isinstance(t.log, str):
            click.echo(("Fires on" if t.should_fire else "Does not fire on") + f" ({t.name}):")
            click.echo("    " + t.log.strip().replace("\n", "\n    ") + "\n")
    click.echo("Fix:\n    " + r.fix.strip().replace("\n", "\n    "))
    click.echo("\nReferences:\n" + "\n".join(f"    {u}" for u in r.references))


@rules.command("explain")
@click.argument("rule_id")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False))
@_guard
def rules_explain(rule_id: str, rule_dirs: tuple[str, ...]) -> None:
    """A rule's description, examples that fire and don't, its fix and references."""
    _explain(rule_id, rule_dirs)


@main.command("explain")
@click.argument("rule_id")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False))
@_guard
def explain(rule_id: str, rule_dirs: tuple[str, ...]) -> None:
    """Same as 'rules explain'."""
    _explain(rule_id, rule_dirs)


@rules.command("test")
@click.argument("rule_dirs", nargs=-1, type=click.Path(file_okay=False, exists=True))
@_guard
def rules_test(rule_dirs: tuple[str, ...]) -> None:
    """Run the tests embedded in the rules of RULE_DIRS (default: the shipped pack)."""
    from .rules.testing import run_rule_test

    rules = _load(rule_dirs, keep_going=False, with_default=not rule_dirs)
    failed = total = 0
    for r in rules:
        for t in r.tests:
            total += 1
            problem = run_rule_test(r, t)
            if problem:
                failed += 1
                click.echo(f"FAIL {r.id} {t.name}: {problem}")
    click.echo(f"{total - failed} passed, {failed} failed")
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--export", "export_to", type=click.Path(dir_okay=False), default=None,
              help="Write the largest communicator's graph: .graphml or .dot")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_guard
def topology(paths: tuple[str, ...], export_to: str | None, fmt: str) -> None:
    """Rings, trees and transport hops per communicator, with what looks wrong."""
    import json

    from .pipeline import build_model
    from .topology import analyze_topology, export

    model, notices, files_read = build_model(list(paths))
    if not files_read:
        raise UserError("nothing could be read (" + "; ".join(f"{n.path}: {n.message}" for n in notices) + ")")
    tops = analyze_topology(model)
    if fmt == "json":
        click.echo(json.dumps([t.to_dict() for t in tops], indent=2, sort_keys=True))
    else:
        if not tops:
            click.echo("No ring, tree or connection lines in these logs (NCCL_DEBUG=INFO prints them at init).")
        for t in tops:
            click.echo(f"communicator {t.comm}: {t.nranks or '?'} ranks, {len(set(t.hosts.values()))} host(s)")
            click.echo("  hops: " + (", ".join(f"{k} {v}" for k, v in sorted(t.hops.items())) or "none logged"))
            click.echo(f"  rings checked: {t.rings_checked}" + (f"; problems: {'; '.join(t.ring_problems)}"
                                                              if t.ring_problems else ", all visit every rank once"))
            if t.socket_cross_node:
                click.echo(f"  ! {t.socket_cross_node} inter-node hops over NET/Socket (TCP)")
            if t.shm_intra_node:
                click.echo(f"  ! {t.shm_intra_node} intra-node hops over SHM (P2P disabled or unavailable)")
            if t.no_gdr_net:
                click.echo(f"  ! {t.no_gdr_net} NET hops without GPUDirect RDMA")
    if export_to and tops:
        export(tops[0], export_to)
        click.echo(f"graph of {tops[0].comm} written to {export_to}", err=True)
