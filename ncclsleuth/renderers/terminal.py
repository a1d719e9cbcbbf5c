"""The rich terminal view: verdict panel, findings with evidence and fix, job summary."""
from __future__ import annotations

import io
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render(report: Any, color: bool = False, width: int = 110, quiet: bool = False, **_: Any) -> str:
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False)
    v = report.verdict
    if quiet:
        con.print(_verdict_line(report))
        return buf.getvalue()
    if v is None:
        con.print(Panel(Text("No problem found in these logs.", style="green"), title="ncclsleuth verdict"))
    else:
        head = Text(f"{v.severity.upper()} · {v.category}", style=_STYLE.get(v.severity, ""))
        con.print(Panel(Group(head, Text(v.title, style="bold"), Text(v.message)), title="ncclsleuth verdict",
                        border_style=_STYLE.get(v.severity, "")))
    for i, f in enumerate(report.findings, 1):
        _finding(con, i, f)
    if report.unexplained:
        con.print(Text(f"\nUnexplained warnings/errors ({report.unexplained_total}):", style="bold"))
        for e in report.unexplained[:30]:
            con.print(Text(f"  {e.file}:{e.line}  ", style="dim") + Text(e.text.strip()[:200]))
        if report.unexplained_total > 30:
            con.print(Text(f"  ... {report.unexplained_total - 30} more (see --format json)", style="dim"))
    _summary(con, report.summary)
    return buf.getvalue()


def _verdict_line(report: Any) -> str:
    v = report.verdict
    if v is None:
        return "ncclsleuth: no problem found"
    return f"{v.severity.upper()} [{v.category}] {v.title}"


def _finding(con: Console, i: int, f: Any) -> None:
    tag = Text(f"\n{i}. [{f.rule_id}] ", style="bold") + Text(f"{f.severity}", style=_STYLE.get(f.severity, ""))
    tag += Text(f" · {f.category} · confidence {f.confidence:.2f}")
    if f.caused_by:
        tag += Text(f" · symptom of {f.caused_by}", style="dim")
    con.print(tag)
    con.print(Text(f"   {f.title}", style="bold"))
    con.print(Text("   " + f.message))
    for e in f.evidence[:6]:
        con.print(Text(f"     {e.file}:{e.line}  ", style="dim") + Text(e.text.strip()[:220]))
    if f.evidence_total > 6:
        con.print(Text(f"     ... {f.evidence_total - 6} more lines", style="dim"))
    con.print(Text("   Fix:", style="bold green"))
    for line in f.fix.splitlines():
        con.print(Text("     " + line))


def _summary(con: Console, s: dict[str, Any]) -> None:
    t = Table(title="Job summary", show_header=False, box=None, title_justify="left")
    t.add_row("files / lines", f"{s.get('files')} / {s.get('lines')}")
    t.add_row("ranks / hosts", f"{s.get('ranks') or '?'} / {len(s.get('hosts') or [])}")
    if s.get("nccl_versions"):
        t.add_row("NCCL", ", ".join(f"{k} ({v})" for k, v in s["nccl_versions"].items()))
    if s.get("network"):
        t.add_row("network", "; ".join(f"{k}: {', '.join(v[:4])}" for k, v in s["network"].items()))
    if s.get("ib_devices"):
        t.add_row("IB devices", ", ".join(s["ib_devices"][:8]))
    for c in (s.get("communicators") or [])[:4]:
        init = f", init {c['init_max_s']} s" if c.get("init_max_s") else ""
        t.add_row("comm " + str(c["comm"])[:18],
                  f"{c['ranks_seen']}/{c['nranks']} ranks, {c['init_complete']} init complete{init}")
    con.print()
    con.print(t)
