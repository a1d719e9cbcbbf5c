"""``ncclsleuth rules list|explain|test|check``, ``ncclsleuth explain`` and ``ncclsleuth events``:
the rule pack itself and what a rule author can match on."""
from __future__ import annotations

import json
import sys
from typing import Any

import click

from . import UserError, guard, main
from .exitcodes import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from .options import config_option, load_rules, rule_options, settings


@main.group(epilog="""\b
Examples:
  ncclsleuth rules list
  ncclsleuth rules check my-rules/          # every error of every file, with file:line and key
  ncclsleuth rules test my-rules/           # the tests embedded in the rule files
  ncclsleuth events                         # event kinds and facts a rule can match, with their fields
""")
def rules() -> None:
    """List, explain, check and test diagnosis rules."""


@rules.command("list", epilog="Example:\n\n  ncclsleuth rules list --rules my-rules/ | grep net.")
@rule_options
@config_option
@guard
def rules_list(rule_dirs: tuple[str, ...], keep_going: bool, config: str | None) -> None:
    """One line per rule: id, severity, category, name and title (after the configuration's choices)."""
    for r in load_rules(rule_dirs, keep_going, config=settings(config)):
        click.echo(f"{r.id}  {r.severity.name:<7}  {r.category:<22}  {r.name}: {r.title}")


def _explain(rule_id: str, rule_dirs: tuple[str, ...], keep_going: bool) -> None:
    found = {r.id: r for r in load_rules(rule_dirs, keep_going)}
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


@rules.command("explain", epilog="Example:\n\n  ncclsleuth rules explain NET001")
@click.argument("rule_id")
@rule_options
@guard
def rules_explain(rule_id: str, rule_dirs: tuple[str, ...], keep_going: bool) -> None:
    """A rule's description, examples that fire and don't, its fix and references."""
    _explain(rule_id, rule_dirs, keep_going)


@main.command("explain", epilog="Example:\n\n  ncclsleuth explain DESYNC002")
@click.argument("rule_id")
@rule_options
@guard
def explain(rule_id: str, rule_dirs: tuple[str, ...], keep_going: bool) -> None:
    """A rule's description, examples, fix and references (same as 'rules explain')."""
    _explain(rule_id, rule_dirs, keep_going)


@rules.command("test", epilog="Example:\n\n  ncclsleuth rules test my-rules/ --keep-going")
@click.argument("rule_dirs", nargs=-1, type=click.Path(file_okay=False, exists=True))
@click.option("--keep-going", is_flag=True, help="Skip malformed rule files (each said on stderr) and test the rest.")
@guard
def rules_test(rule_dirs: tuple[str, ...], keep_going: bool) -> None:
    """Run the tests embedded in the rules of RULE_DIRS (default: the shipped pack)."""
    from ..ruletests import run_rule_test

    failed = total = 0
    for r in load_rules(rule_dirs, keep_going=keep_going, default_rules=not rule_dirs):
        for t in r.tests:
            total += 1
            problem = run_rule_test(r, t)
            if problem:
                failed += 1
                click.echo(f"FAIL {r.id} {t.name}: {problem}")
    click.echo(f"{total - failed} passed, {failed} failed")
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)


@rules.command("check", epilog="""\b
Example:
  ncclsleuth rules check my-rules/
  my-rules/NET900.yaml:7: key 'match.event': unknown event kind 'socket_eror' (did you mean 'socket_error'?)
""")
@click.argument("rule_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@guard
def rules_check(rule_dirs: tuple[str, ...]) -> None:
    """Check rule files without running them: every error of every file at once (file:line, key).

    Keys and types, and the values: event kinds and their fields, operators and what they
    take, facts and the fields they return, placeholders against what the match provides,
    categories (the valid ones listed), public reference URLs, the tests' shape.
    Exit 0 when every file is valid, 2 otherwise.
    """
    from ..model.stats import counted
    from ..rules.loader import check_rules

    files, errors = check_rules(rule_dirs)
    for e in errors:
        click.echo(str(e))
    bad = len({e.path for e in errors})
    click.echo(f"{counted(files, 'rule file')} checked: "
               + (f"{counted(len(errors), 'error')} in {counted(bad, 'file')}" if errors else "no error"), err=True)
    sys.exit(EXIT_USAGE if errors else EXIT_OK)


@rules.command("schema", epilog="""\b
Examples:
  ncclsleuth rules schema > rule.schema.json   # then, first line of a rule file:
  # yaml-language-server: $schema=rule.schema.json
""")
@guard
def rules_schema() -> None:
    """Print the rule schema as JSON Schema, with this version's event kinds, facts and categories."""
    from ..rules.schema import json_schema

    click.echo(json.dumps(json_schema(), indent=2, sort_keys=True))


@main.command("events", epilog="""\b
Examples:
  ncclsleuth events                         # every event kind and fact, with its fields
  ncclsleuth events watchdog_timeout        # one kind
  ncclsleuth events --format json | jq 'keys'
""")
@click.argument("names", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@guard
def events_cmd(names: tuple[str, ...], fmt: str) -> None:
    """The event kinds (by the program that prints them) and facts a rule can match, with their fields."""
    from ..events import REGISTRY
    from ..model.facts import SPECS

    base = {"source", "line", "text", "host", "pid", "tid", "dev", "rank", "ts", "level"}
    kinds: dict[str, dict[str, Any]] = {k: {"origin": cls.__module__.rsplit(".", 1)[-1], "error": k in _error_kinds(),
                 "fields": [f for f in cls.FIELDS if f not in base], "doc": (cls.__doc__ or "").strip().split("\n")[0]}
             for k, cls in sorted(REGISTRY.items())}
    facts: dict[str, dict[str, Any]] = {n: {"fields": sorted(s.fields - {"evidence"}), "live": s.live,
                                            "doc": (s.fn.__doc__ or "").strip().split("\n", 1)[0]}
             for n, s in sorted(SPECS.items())}
    if names:
        unknown = [n for n in names if n not in kinds and n not in facts]
        if unknown:
            raise UserError(f"no event kind or fact {', '.join(map(repr, unknown))} (run 'ncclsleuth events')")
        kinds = {k: v for k, v in kinds.items() if k in names}
        facts = {k: v for k, v in facts.items() if k in names}
    if fmt == "json":
        click.echo(json.dumps({"common_fields": sorted(base) + ["kind", "message_text"], "events": kinds,
                               "facts": facts}, indent=2))
        return
    click.echo("Every event also has: " + ", ".join(sorted(base)) + ", kind, message_text (the line).\n")
    by_origin: dict[str, list[str]] = {}
    for k, v in kinds.items():
        by_origin.setdefault(v["origin"], []).append(k)
    for origin, ks in by_origin.items():
        click.echo(f"event kinds printed by {origin}:")
        for k in ks:
            v = kinds[k]
            click.echo(f"  {k}{' (error)' if v['error'] else ''}: {', '.join(v['fields']) or '-'}")
        click.echo()
    if facts:
        click.echo("facts (fact: NAME):")
        for n, v in facts.items():
            click.echo(f"  {n}{' (watch only)' if v['live'] else ''}: {', '.join(v['fields'])}")
            if v["doc"]:
                click.echo(f"      {v['doc']}")


def _error_kinds() -> frozenset[str]:
    from ..events import ERROR_KINDS

    return frozenset(ERROR_KINDS)
