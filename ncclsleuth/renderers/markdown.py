"""Markdown: the chat-ops answer (``--format markdown``) and the post-mortem variant.

Chat-ops (default): the verdict on the first line, the top findings (three by default)
with one evidence line each and the fix as a fenced block, then one summary line;
``max_chars`` (default 4000) trims whole findings, then lines, and says what was left
out.  Post-mortem (``postmortem=True``, used by ``ncclsleuth report -o x.md``): every
finding, the job summary, Mermaid diagrams (ring as ``graph LR``, init as ``gantt``)
from the plain-dict ``figures`` payload, and the unexplained warnings.

Pure: Report (+ plain dicts) in, text out.  The small helpers here are shared with the
Slack and HTML renderers.
"""
from __future__ import annotations

from typing import Any

from ..model.stats import counted, some
from ..model.stats import number as num
from . import comm_counts, evidence_lines, host_runs, more_comms

DEFAULT_MAX_CHARS = 4000
_SEV_ICON = {"error": "\U0001f534", "warning": "\U0001f7e0", "info": "\U0001f535"}


# ----------------------------------------------------------------------------- shared helpers


def first_sentence(text: str, limit: int = 300) -> str:
    """The first sentence of ``text`` on one line (cut at ``limit`` characters)."""
    flat = " ".join(text.split())
    for end in (". ", "! ", "? "):
        i = flat.find(end)
        if 0 < i < limit:
            return flat[: i + 1]
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def where(f: Any) -> str:
    """``host gpu-node-06, rank 44`` style location of a finding ('' when unknown)."""
    parts = []
    if f.hosts:
        hs = list(f.hosts)
        parts.append(("host " if len(hs) == 1 else "hosts ") + ", ".join(hs[:3]) + (" …" if len(hs) > 3 else ""))
    if f.ranks:
        rs = [str(r) for r in f.ranks]
        parts.append(("rank " if len(rs) == 1 else "ranks ") + ", ".join(rs[:4]) + (" …" if len(rs) > 4 else ""))
    return ", ".join(parts)


#: hosts named per network in the post-mortem's summary (the rest counted)
HOSTS_SHOWN = 8


def short_file(path: str) -> str:
    """Last two path components: enough to find the file, short enough for chat."""
    bits = path.replace("\\", "/").split("/")
    return "/".join(bits[-2:]) if len(bits) > 2 else path


def summary_line(s: dict[str, Any]) -> str:
    """One line: ranks, hosts, NCCL versions, network, files/lines."""
    hosts = s.get("hosts") or []
    ranks = s.get("ranks")
    on = " on " + counted(len(hosts), "host")
    bits = [(f"{num(ranks)} ranks" if ranks else "ranks not logged") + on]
    vers = s.get("nccl_versions") or {}
    if vers:
        bits.append("NCCL " + ", ".join(f"{k} ({num(v)})" if len(vers) > 1 else k for k, v in vers.items()))
    nets = s.get("network") or {}
    if nets:
        bits.append("network " + ", ".join(f"{k} ({counted(len(v), 'host')})" for k, v in nets.items()))
    bits.append(f"{counted(s.get('files', 0), 'file')} / {counted(s.get('lines', 0), 'line')}")
    return " · ".join(bits)


def verdict_sentence(report: Any) -> str:
    v = report.verdict
    if v is None:
        return "No problem found in these logs."
    return first_sentence(v.title if v.title.endswith(".") else v.title + ".")


def code(text: str) -> str:
    """Inline code that survives backticks inside ``text``."""
    text = " ".join(text.split())
    if "`" not in text:
        return f"`{text}`"
    return f"`` {text.replace('``', '` `')} ``"


def fence(text: str, lang: str = "") -> str:
    mark = "~~~" if "```" in text else "```"
    return f"{mark}{lang}\n{text.rstrip()}\n{mark}"


def init_progress_md(rows: list[dict[str, Any]]) -> list[str]:
    """Init never completed: how far each host's ranks got and the first error they logged."""
    from ..model.stats import ranges
    from . import clip, init_progress_groups

    done = sum(1 for r in rows if r["completed"])
    out = ["## Init progress", "", f"Init completed on {done} of {len(rows)} ranks.", "",
           "| host | ranks | Init START | Init COMPLETE | first error |", "|---|---|---|---|---|"]
    groups = init_progress_groups(rows)
    for g in groups[:64]:
        f = g.first
        err = (f"`{short_file(f['source'] or '')}:{f['line']}` `{clip(f['error'], 160).replace('|', '¦')}`"
               if f.get("error") else "none logged")
        started = "yes" if f["started"] else "not logged"
        out.append(f"| {g.host or 'host not logged'} | {ranges(g.ranks, ', ')} | {started}"
                   f" | {'yes' if f['completed'] else 'no'} | {err} |")
    if len(groups) > 64:
        out.append(f"\n_… {len(groups) - 64} more groups of ranks_")
    return [*out, ""]


def cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(0, n - 1)] + "…"


# ----------------------------------------------------------------------------- chat-ops


def _verdict_md(report: Any) -> str:
    v = report.verdict
    if v is None:
        return "\u2705 **OK** — no problem found in these logs."
    loc = where(v)
    head = (f"{_SEV_ICON.get(v.severity, '')} **{v.severity.upper()} · {v.category}" + (f" · {loc}" if loc else "")
            + "**")
    return f"{head.strip()} — {verdict_sentence(report)}"


def _finding_md(i: int, f: Any, evidence: int = 1, text_limit: int = 240) -> str:
    lines = [f"**{i}. [{f.rule_id}] {f.title}** _({f.severity}, {f.category}, confidence {f.confidence:.2f}"
             + (f", symptom of {f.caused_by}" if f.caused_by else "") + ")_"]
    msg = first_sentence(f.message, 400)
    if msg and msg != f.title:
        lines.append(msg)
    for e in f.evidence[:evidence]:
        lines.append(f"- {code(f'{short_file(e.file)}:{e.line}')} {code(cut(e.text.strip(), text_limit))}")
    more = max(f.evidence_total, len(f.evidence)) - min(evidence, len(f.evidence))
    if more > 0:
        lines.append(f"- _… {counted(more, 'more evidence line')}_")
    if f.fix.strip():
        lines.append("Fix:")
        lines.append(fence(f.fix.strip()))
    return "\n".join(lines)


def _fit(parts: list[str], tail: list[str], max_chars: int, left_findings: int) -> str:
    """Join ``parts`` + note + ``tail`` within ``max_chars``; drop whole parts, then lines."""
    def note(nf: int, nl: int) -> str:
        bits = []
        if nf:
            bits.append(counted(nf, "more finding"))
        if nl:
            bits.append(counted(nl, "line"))
        return f"_… {' / '.join(bits)} left out (full report: `ncclsleuth analyze --format json`)_" if bits else ""

    def join(ps: list[str], nf: int, nl: int) -> str:
        n = note(nf, nl)
        return "\n\n".join([p for p in ps if p] + ([n] if n else []) + tail)

    kept = list(parts)
    dropped_f = left_findings
    text = join(kept, dropped_f, 0)
    while len(text) > max_chars and len(kept) > 2:  # drop whole findings, keep the verdict and the top one
        kept.pop()
        dropped_f += 1
        text = join(kept, dropped_f, 0)
    if len(text) <= max_chars:
        return text
    # still too long: cut lines off the end of what is left (verdict line stays first)
    lines = "\n\n".join(kept).split("\n")
    dropped_l = 0
    in_fence = False
    while len(lines) > 1:
        lines.pop()
        dropped_l += 1
        in_fence = sum(1 for ln in lines if ln.startswith(("```", "~~~"))) % 2 == 1
        body = "\n".join(lines + (["```"] if in_fence else []))
        text = join([body], dropped_f, dropped_l)
        if len(text) <= max_chars:
            return text
    # only the verdict line is left and it is too long: shorten it, then drop the tail
    for keep_tail in (tail, []):
        rest = len(join(["x"], dropped_f, dropped_l) if keep_tail else "\n\n".join(
            ["x", note(dropped_f, dropped_l)])) - 1
        if max_chars - rest >= 40:
            body = cut(lines[0], max_chars - rest)
            return join([body], dropped_f, dropped_l) if keep_tail else "\n\n".join([body, note(dropped_f, dropped_l)])
    return cut(lines[0], max_chars)


def render(report: Any, color: bool = False, max_chars: int | None = DEFAULT_MAX_CHARS, max_findings: int = 3,
           postmortem: bool = False, figures: dict[str, Any] | None = None, **_: Any) -> str:
    if postmortem:
        return render_postmortem(report, figures, _.get("header"))
    max_chars = DEFAULT_MAX_CHARS if max_chars is None else max_chars
    parts = [_verdict_md(report)]
    shown = report.findings[:max_findings]
    for i, f in enumerate(shown, 1):
        parts.append(_finding_md(i, f))
    tail = ["**Job:** " + summary_line(report.summary)]
    if report.unexplained_total:
        tail.insert(0, f"_{counted(report.unexplained_total, 'warning/error line')} no rule explains._")
    return _fit(parts, tail, max_chars - 1, len(report.findings) - len(shown)) + "\n"


# ----------------------------------------------------------------------------- post-mortem


def _mid(s: Any) -> str:
    """A Mermaid-safe label (quotes and brackets removed)."""
    return "".join(ch for ch in str(s) if ch not in '"[](){}<>|#;`')


def mermaid_ring(comm: dict[str, Any], highlight_hosts: set[str], highlight_ranks: set[int]) -> str:
    """``graph LR`` of channel 0's ring: ranks when small, hosts (with their rank span) when large."""
    rings = comm.get("rings") or []
    order = list(rings[0][1]) if rings else sorted(comm.get("ranks") or [])
    rank_host = {int(k): v for k, v in (comm.get("rank_host") or {}).items()}
    hops = {(h["src"], h["dst"]): h["transport"] for h in comm.get("hops") or []}
    out = ["```mermaid", "graph LR"]
    if not order:
        return ""
    hot: list[str] = []
    if len(order) <= 16:
        for r in order:
            out.append(f'  r{r}["rank {r}' + (f"<br/>{_mid(rank_host[r])}" if r in rank_host else "") + '"]')
            if r in highlight_ranks or rank_host.get(r) in highlight_hosts:
                hot.append(f"r{r}")
        for a, b in zip(order, order[1:] + order[:1]):
            out.append(f"  r{a} -->|{_mid(hops.get((a, b), '?'))}| r{b}")
    else:  # group consecutive ranks of one host
        groups = host_runs(order, rank_host)
        for i, (h, rs) in enumerate(groups):
            inner = {hop for a, b in zip(rs, rs[1:]) if (hop := hops.get((a, b))) is not None}
            span = f"{rs[0]}–{rs[-1]}" if len(rs) > 1 else str(rs[0])
            label = f"{_mid(h)}<br/>ranks {span}" + (f"<br/>{_mid('/'.join(sorted(inner)))}" if inner else "")
            out.append(f'  g{i}["{label}"]')
            if h in highlight_hosts or highlight_ranks & set(rs):
                hot.append(f"g{i}")
        for i, (_, rs) in enumerate(groups):
            j = (i + 1) % len(groups)
            if len(groups) > 1:
                out.append(f"  g{i} -->|{_mid(hops.get((rs[-1], groups[j][1][0]), '?'))}| g{j}")
    if hot:
        out.append("  classDef hot fill:#fdd,stroke:#c00,stroke-width:3px")
        out.append("  class " + ",".join(hot) + " hot")
    out.append("```")
    return "\n".join(out)


def mermaid_gantt(init: list[dict[str, Any]], limit: int = 64) -> str:
    """``gantt`` of NCCL init per rank (start->complete when known, else the timings' total)."""
    rows = [r for r in init if r.get("duration") is not None]
    if not rows:
        return ""
    slow = max(rows, key=lambda r: r["duration"])
    if len(rows) > limit:  # keep the slowest ones
        rows = sorted(sorted(rows, key=lambda r: -r["duration"])[:limit], key=lambda r: r["rank"])
    out = ["```mermaid", "gantt", "  title NCCL init per rank (seconds)", "  dateFormat x", "  axisFormat %M:%S"]
    by_host: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_host.setdefault(r.get("host") or "?", []).append(r)
    for h, rs in by_host.items():
        out.append(f"  section {_mid(h)}")
        for r in rs:
            start = int(round((r.get("offset") or 0.0) * 1000))
            end = start + max(1, int(round(r["duration"] * 1000)))
            tag = "crit, " if r is slow else ""
            out.append(f"  rank {r['rank']} {r['duration']:.2f}s :{tag}{start}, {end}")
    out.append("```")
    return "\n".join(out)


def render_postmortem(report: Any, figures: dict[str, Any] | None = None,
                      header: dict[str, Any] | None = None) -> str:
    from .. import __version__

    s = report.summary
    v = report.verdict
    head = [f"ncclsleuth {__version__}"]
    if (figures or {}).get("failed_at"):
        head.insert(0, f"job failed {figures['failed_at']} (first error line)")  # type: ignore[index]
    if header and header.get("inputs"):
        head.append("inputs " + ", ".join(code(str(i)) for i in header["inputs"][:6]))
    if header and header.get("command"):
        head.append("command " + code(str(header["command"])))
    out = ["# NCCL job post-mortem", "", "_" + " · ".join(head) + "_", "", "## Verdict", "", _verdict_md(report)]
    if v is not None:
        out += ["", " ".join(v.message.split())]
    out += ["", "## Findings", ""]
    if not report.findings:
        out.append("No rule fired.")
    for i, f in enumerate(report.findings, 1):
        out.append(f"### {i}. [{f.rule_id}] {f.title}")
        out.append("")
        out.append(f"_{f.severity} · {f.category} · confidence {f.confidence:.2f}"
                   + (f" · {where(f)}" if where(f) else "") + (f" · symptom of {f.caused_by}" if f.caused_by else "")
                   + "_")
        out += ["", " ".join(f.message.split()), "", "Evidence:", ""]
        lines, more = evidence_lines(f, 6)
        for path, ln in lines:
            rep = f" _({ln.times}{', ' + ln.who if ln.who else ''})_" if ln.count > 1 else ""
            out.append(f"- {code(f'{path}:{ln.line}')} {code(cut(ln.text.strip(), 400))}{rep}")
        if more > 0:
            out.append(f"- _… {counted(more, 'more line')}_")
        out += ["", "Fix:", "", fence(f.fix.strip()), ""]
        if f.references:
            out += ["References: " + ", ".join(f"<{u}>" if u.startswith("http") else u for u in f.references), ""]
    ranks = num(s["ranks"]) if s.get("ranks") else "not logged"
    out += ["## Job summary", "", "| | |", "|---|---|",
            f"| ranks / hosts | {ranks} / {num(len(s.get('hosts') or []))} |",
            f"| files / lines | {num(s.get('files'))} / {num(s.get('lines'))} |"]
    if s.get("nccl_versions"):
        out.append("| NCCL | " + ", ".join(f"{k} ({num(n)})" for k, n in s["nccl_versions"].items()) + " |")
    if s.get("cuda_versions"):
        out.append("| CUDA | " + ", ".join(f"{k} ({num(n)})" for k, n in s["cuda_versions"].items()) + " |")
    for net, hosts in (s.get("network") or {}).items():
        out.append(f"| network {net} | " + some(hosts, HOSTS_SHOWN) + " |")
    if s.get("ib_devices"):
        out.append("| IB devices | " + ", ".join(s["ib_devices"]) + " |")
    for c in s.get("communicators") or []:
        out.append(f"| comm `{c['comm']}` | {comm_counts(c)}"
                   + (f", init max {c['init_max_s']} s" if c.get("init_max_s") else "") + " |")
    if others := more_comms(s, len(s.get("communicators") or [])):
        out.append(f"| | … and {others} |")
    out.append("")
    hot_hosts = set(v.hosts) if v else set()
    hot_ranks = set(v.ranks) if v else set()
    comms = (figures or {}).get("comms") or []
    if comms:
        out += ["## Topology", ""]
        for c in comms[:4]:
            m = mermaid_ring(c, hot_hosts, hot_ranks)
            if m:
                out += [f"Communicator `{c['key']}` ({c.get('nranks')} ranks), ring of channel 0:", "", m, ""]
    init = (figures or {}).get("init") or []
    g = mermaid_gantt(init)
    if g:
        out += ["## Init timeline", "", g, ""]
        slow = max((r for r in init if r.get("duration") is not None), key=lambda r: r["duration"])
        on = f" on {slow['host']}" if slow.get("host") else ""
        out += [f"Slowest: rank {slow['rank']}{on}, {slow['duration']:.2f} s.", ""]
    elif (figures or {}).get("init_progress"):
        out += init_progress_md((figures or {})["init_progress"])
    out += ["## Unexplained warnings", ""]
    if not report.unexplained:
        out.append("None: every warning/error line is explained by a finding above.")
    for e in report.unexplained[:50]:
        out.append(f"- {code(f'{e.file}:{e.line}')} {code(cut(e.text.strip(), 300))}")
    if report.unexplained_total > len(report.unexplained[:50]):
        out.append(f"- _… {report.unexplained_total - len(report.unexplained[:50])} more_")
    return "\n".join(out).rstrip() + "\n"
