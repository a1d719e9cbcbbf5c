"""The diff of two runs (:class:`~ncclsleuth.report.diff.DiffResult`) as JSON, Markdown or terminal text."""
from __future__ import annotations

import json

from ..report.diff import DiffResult


def render(d: DiffResult, fmt: str = "terminal", color: bool = False) -> str:
    """``fmt``: json | markdown | terminal."""
    if fmt == "json":
        return render_json(d)
    if fmt == "markdown":
        return render_markdown(d)
    return render_terminal(d, color=color)


def render_json(d: DiffResult) -> str:
    return json.dumps(d.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _headline(d: DiffResult) -> str:
    v = d.bad.report.verdict
    return (f"BAD run verdict: {v.severity.upper()} [{v.rule_id}, {v.category}] {v.title}" if v
            else "BAD run: no finding")


def render_markdown(d: DiffResult) -> str:
    out = [f"## ncclsleuth diff: `{d.good.path}` (good) vs `{d.bad.path}` (bad)", "", _headline(d), ""]
    if not d.changes:
        out.append("No difference found in versions, settings, network, topology, init time or findings.")
        return "\n".join(out) + "\n"
    out += ["| # | what | good | bad | why first |", "|---|---|---|---|---|"]

    def cell(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    for i, c in enumerate(d.changes, 1):
        out.append(f"| {i} | {cell(c.key)} | {cell(c.good)} | {cell(c.bad)} | {cell(c.why)} |")
    return "\n".join(out) + "\n"


def render_terminal(d: DiffResult, color: bool = False, width: int = 120) -> str:
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False)
    con.print(Text(f"ncclsleuth diff  good: {d.good.path}  bad: {d.bad.path}", style="bold"))
    con.print(Text(_headline(d), style="red" if d.bad.report.verdict else "green"))
    if not d.changes:
        con.print("No difference found in versions, settings, network, topology, init time or findings.")
        return buf.getvalue()
    t = Table(show_lines=False)
    t.add_column("#", justify="right")
    t.add_column("what changed", style="bold")
    t.add_column("good")
    t.add_column("bad")
    t.add_column("why first", style="dim")
    for i, c in enumerate(d.changes, 1):
        t.add_row(str(i), c.key, c.good, Text(c.bad, style="yellow" if "points here" in c.why else ""),
                  c.why)
    con.print(t)
    return buf.getvalue()
