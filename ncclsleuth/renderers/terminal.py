"""The rich terminal view: verdict panel, findings with evidence and fix, job summary.

``width``: the terminal's width (the CLI passes rich's own measure of the terminal, or
``COLUMNS``); text wraps at spaces inside it, indented lines keep their indent when they
wrap, and the verdict box is exactly that wide, so a terminal never wraps a word or a
border a second time.  ``width=None`` is output for a pipe or a file: nothing is
wrapped (one line stays one line for ``grep``) and the verdict has no box.

Evidence is grouped by file, in line order, with paths relative to the folder all of
them share (named once under the summary); repeated lines (the same message from many
ranks) are one line with a count and the ranks (:func:`~ncclsleuth.renderers.collapse`).
"""
from __future__ import annotations

import io
import os
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..model.stats import counted, some
from ..model.stats import number as num
from ..report import HOW_TO_GET_A_LOG, NOT_A_LOG
from . import clip, collapse, comm_counts, common_dir, more_comms, reflow

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
#: wide enough that nothing wraps: the "no wrapping" console of pipes and files
_UNWRAPPED = 1 << 20
EVIDENCE_SHOWN = 6
UNEXPLAINED_SHOWN = 30


def render(report: Any, color: bool = False, width: int | None = None, quiet: bool = False, **_: Any) -> str:
    if quiet:
        return verdict_line(report) + "\n"
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width or _UNWRAPPED, highlight=False,
                  emoji=False, markup=False, legacy_windows=False)
    base = common_dir([e.file for f in report.findings for e in f.evidence] + [e.file for e in report.unexplained])
    con.print(_verdict(report, boxed=width is not None))
    for i, f in enumerate(report.findings, 1):
        con.print()
        con.print(_finding(i, f, base))
    if report.unexplained:
        con.print()
        con.print(Text(f"Unexplained warnings/errors ({report.unexplained_total}):", style="bold"))
        shown, lines = _evidence(report.unexplained, base, 2, UNEXPLAINED_SHOWN)
        con.print(shown)
        more = report.unexplained_total - lines
        if more > 0:
            con.print(_pad(Text(f"... {more} more (see --format json)", style="dim"), 2))
    con.print()
    con.print(_summary(report.summary, base))
    return _rstrip_lines(buf.getvalue())


def verdict_line(report: Any) -> str:
    """One line, never wrapped, no markup: severity, [category], the verdict, the rule."""
    v = report.verdict
    if v is None and not report.is_log:
        return f"NOT-A-LOG [not_a_log] {NOT_A_LOG.partition(': ')[2]} (run the job with NCCL_DEBUG=INFO)"
    if v is None:
        return "OK [no_problem] No problem found in these logs"
    title = " ".join(v.title.split())
    return f"{v.severity.upper()} [{v.category}] {title} ({v.rule_id})"


def _rstrip_lines(text: str) -> str:
    """Without the spaces rich pads lines with (they make a copied line wrap)."""
    return "\n".join(line.rstrip() for line in text.split("\n"))


def _pad(r: RenderableType, indent: int) -> Padding:
    return Padding(r, (0, 0, 0, indent), expand=False)


def _verdict(report: Any, boxed: bool) -> RenderableType:
    v = report.verdict
    if v is None and not report.is_log:
        s = report.summary
        body: list[RenderableType] = [
            Text(f"{NOT_A_LOG[0].upper()}{NOT_A_LOG[1:]} in {counted(s.get('lines', 0), 'line')} of "
                 f"{counted(s.get('files', 0), 'file')}.", style="bold yellow"), Text(HOW_TO_GET_A_LOG)]
        style = "yellow"
    elif v is None:
        body = [Text("No problem found in these logs.", style="green")]
        style = "green"
    else:
        style = _STYLE.get(v.severity, "")
        body = [Text(f"{v.severity.upper()} · {v.category}", style=style), Text(v.title, style="bold"),
                Text(" ".join(v.message.split()))]
    if not boxed:
        return Group(Text("ncclsleuth verdict", style="bold"), *body)
    return Panel(Group(*body), title="ncclsleuth verdict", border_style=style)


def _finding(i: int, f: Any, base: str) -> RenderableType:
    tag = Text(f"{i}. ", style="bold") + Text(f"[{f.rule_id}] ", style="bold")
    tag += Text(f.severity, style=_STYLE.get(f.severity, ""))
    tag += Text(f" · {f.category} · confidence {f.confidence:.2f}")
    if f.caused_by:
        tag += Text(f" · symptom of {f.caused_by}", style="dim")
    parts: list[RenderableType] = [tag, _pad(Text(f.title, style="bold"), 3), _pad(Text(f.message), 3)]
    if f.evidence:
        shown, lines = _evidence(f.shown or f.evidence, base, 5, EVIDENCE_SHOWN)
        parts.append(shown)
        more = max(f.evidence_total, len(f.evidence)) - lines
        if more > 0:
            parts.append(_pad(Text(f"... {counted(more, 'more line')} (see --format json)", style="dim"), 5))
    if f.fix.strip():
        parts.append(_pad(Text("Fix:", style="bold green"), 3))
        parts += [_fix_line(line) for line in reflow(f.fix)]
    return Group(*parts)


def _fix_line(line: str) -> RenderableType:
    """One line of a fix, indented as written; a wrapped line keeps that indent."""
    body = line.lstrip(" ")
    return _pad(Text(body), 5 + len(line) - len(body)) if body else Text("")


def _evidence(evidence: list[Any], base: str, indent: int, limit: int) -> tuple[RenderableType, int]:
    """Per file (in the order files first appear): its lines in order, repeats collapsed;
    at most ``limit`` lines shown.  Returns the renderable and how many evidence lines it
    stands for (a collapsed line stands for its repeats)."""
    out: list[RenderableType] = []
    shown = represented = 0
    for path, groups in collapse(evidence):
        groups = groups[: limit - shown]
        if not groups:
            break
        shown += len(groups)
        represented += sum(g.count for g in groups)
        out.append(_pad(Text(_rel(path, base), style="dim"), indent))
        grid = Table.grid(padding=(0, 2, 0, 0))
        grid.add_column(justify="right", style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        for g in groups:
            text = Text(clip(g.text.strip(), 400))
            if g.count > 1:
                text += Text(f"  ({g.times}{', ' + g.who if g.who else ''})", style="dim")
            grid.add_row(str(g.line), text)
        out.append(_pad(grid, indent + 2))
    return Group(*out), represented


def _rel(path: str, base: str) -> str:
    if base and path.startswith(base):
        return path[len(base):].lstrip("/") or os.path.basename(path)
    return path


def _summary(s: dict[str, Any], base: str) -> RenderableType:
    t = Table(title="Job summary", show_header=False, box=None, title_justify="left", pad_edge=False)
    t.add_column(no_wrap=True, style="bold")
    t.add_column()
    t.add_row("files / lines", f"{num(s.get('files'))} / {num(s.get('lines'))}" + (f" (in {base}/)" if base else ""))
    ranks, hosts = s.get("ranks"), len(s.get("hosts") or [])
    t.add_row("ranks / hosts", f"{num(ranks) if ranks else 'not logged'} / {num(hosts)}")
    if s.get("nccl_versions"):
        t.add_row("NCCL", ", ".join(f"{k} ({num(v)})" for k, v in s["nccl_versions"].items()))
    if s.get("network"):
        t.add_row("network", "; ".join(f"{k}: {some(v, 4)}"
                                       for k, v in s["network"].items()))
    if s.get("ib_devices"):
        t.add_row("IB devices", ", ".join(s["ib_devices"][:8]))
    for c in (s.get("communicators") or [])[:4]:
        init = f", init {c['init_max_s']} s" if c.get("init_max_s") else ""
        t.add_row("comm " + str(c["comm"])[:18], comm_counts(c) + init)
    if others := more_comms(s, 4):
        t.add_row("", f"… and {others}")
    return t
