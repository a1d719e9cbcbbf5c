"""The live view of ``ncclsleuth watch``: the job's state redrawn every poll (rich), and the
one-line forms of a finding as it appears (plain text, JSON lines)."""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..model.live import rank_ranges
from ..report import Report
from ..rules.findings import Finding


def finding_jsonl(fd: Finding, elapsed_s: float, event: str = "new", changed: dict[str, Any] | None = None) -> str:
    """One event about a finding as a JSON line: ``event`` (new, updated, resolved), the
    finding's stable ``id``, the seconds since the watch started, the finding; for
    ``updated`` the names of the fields that ``changed`` and what they ``were``."""
    head: dict[str, Any] = {"event": event, "id": fd.id, "t": round(elapsed_s, 3)}
    if event == "updated":
        head["changed"] = sorted(changed or {})
        head["was"] = dict(sorted((changed or {}).items()))
    if event == "resolved":
        return json.dumps({**head, "rule_id": fd.rule_id, "title": fd.title}, ensure_ascii=False) + "\n"
    return json.dumps({**head, **fd.to_dict()}, ensure_ascii=False) + "\n"


def finding_line(fd: Finding, event: str = "new") -> str:
    """One finding as a plain line (live view when stdout is not a terminal)."""
    tag = "" if event == "new" else f"{event.upper()} "
    return f"[{time.strftime('%H:%M:%S')}] {tag}{fd.severity.upper()} {fd.rule_id}: {fd.title}\n"


def verdict_line(report: Report) -> str:
    """The watch's last word in the live format."""
    v = report.verdict
    return f"ncclsleuth watch: {v.severity.upper()} [{v.rule_id}] {v.title}" if v else \
        "ncclsleuth watch: no problem found so far"


_SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render_status(s: dict[str, Any], findings: Sequence[Finding], paths: Sequence[str], silence: float) -> Any:
    """The rich renderable of the job's state (:meth:`ncclsleuth.live.Watcher.status`) and its findings."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text(f"ncclsleuth watch {' '.join(paths)[:80]}", style="bold")
    head += Text(f"   {s['elapsed_s']:.0f} s · {s['files']} files · {s['lines']} lines · "
                 f"{s['processes']} processes · poll {s['poll_ms']} ms", style="dim")
    parts: list[Any] = [head]
    ct = Table(title="Communicators", title_justify="left", box=None, pad_edge=False)
    for col in ("comm", "ranks seen", "init complete", "the rest are in"):
        ct.add_column(col)
    for c in s["comms"][:8]:
        n = c["nranks"] or "?"
        rest = ", ".join(f"{ph} ({k})" for ph, k in c["rest_in"].items()) or "-"
        style = "green" if c["nranks"] and c["complete"] == c["nranks"] else ""
        ct.add_row(str(c["comm"])[:20], f"{c['seen']}/{n}", Text(f"{c['complete']}/{n}", style=style), rest)
    if not s["comms"]:
        ct.add_row("(none yet)", "", "", "")
    parts.append(ct)
    ht = Table(title="Hosts", title_justify="left", box=None, pad_edge=False)
    for col in ("host", "ranks", "init complete", "last line", "quietest rank"):
        ht.add_column(col)
    for h in s["hosts"][:12]:
        old = h["quietest_s"]
        ht.add_row(h["host"], rank_ranges(h["ranks"]) or str(h["processes"]),
                   f"{h['init_complete']}/{h['processes']}", f"{h['last_line_s']:.0f} s ago",
                   Text(f"{old:.0f} s", style="red" if old >= silence and h["init_complete"] < h["processes"] else ""))
    if len(s["hosts"]) > 12:
        ht.add_row(f"... {len(s['hosts']) - 12} more", "", "", "", "")
    parts.append(ht)
    ft = Table(title="Findings so far", title_justify="left", box=None, pad_edge=False)
    ft.add_column("severity")
    ft.add_column("rule")
    ft.add_column("finding")
    for fd in findings[:10]:
        ft.add_row(Text(fd.severity, style=_SEV_STYLE.get(fd.severity, "")), fd.rule_id, fd.title[:110])
    if not findings:
        ft.add_row(Text("-", style="green"), "", "nothing wrong so far")
    parts.append(ft)
    return Group(*parts)
