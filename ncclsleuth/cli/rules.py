"""``ncclsleuth rules list|explain|test`` and ``ncclsleuth explain``: the rule pack itself."""
from __future__ import annotations

import sys

import click

from . import UserError, guard, main
from .exitcodes import EXIT_FINDINGS, EXIT_OK
from .options import load_rules, rule_dirs_option


@main.group()
def rules() -> None:
    """List, explain and test diagnosis rules."""


@rules.command("list")
@rule_dirs_option
@guard
def rules_list(rule_dirs: tuple[str, ...]) -> None:
    """One line per rule: id, severity, category, title."""
    for r in load_rules(rule_dirs, keep_going=True):
        click.echo(f"{r.id}  {r.severity.name:<7}  {r.category:<22}  {r.name}: {r.title}")


def _explain(rule_id: str, rule_dirs: tuple[str, ...]) -> None:
    found = {r.id: r for r in load_rules(rule_dirs, keep_going=True)}
    r = found.get(rule_id.upper())
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
@rule_dirs_option
@guard
def rules_explain(rule_id: str, rule_dirs: tuple[str, ...]) -> None:
    """A rule's description, examples that fire and don't, its fix and references."""
    _explain(rule_id, rule_dirs)


@main.command("explain")
@click.argument("rule_id")
@rule_dirs_option
@guard
def explain(rule_id: str, rule_dirs: tuple[str, ...]) -> None:
    """Same as 'rules explain'."""
    _explain(rule_id, rule_dirs)


@rules.command("test")
@click.argument("rule_dirs", nargs=-1, type=click.Path(file_okay=False, exists=True))
@guard
def rules_test(rule_dirs: tuple[str, ...]) -> None:
    """Run the tests embedded in the rules of RULE_DIRS (default: the shipped pack)."""
    from ..ruletests import run_rule_test

    failed = total = 0
    for r in load_rules(rule_dirs, keep_going=False, default_rules=not rule_dirs):
        for t in r.tests:
            total += 1
            problem = run_rule_test(r, t)
            if problem:
                failed += 1
                click.echo(f"FAIL {r.id} {t.name}: {problem}")
    click.echo(f"{total - failed} passed, {failed} failed")
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)
