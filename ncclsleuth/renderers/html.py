"""Self-contained HTML post-mortem: inline CSS and SVG, no scripts, fonts or URLs fetched.

Sections: verdict, findings (evidence + fix), job summary (hosts, ranks, versions,
network per host), topology (each communicator's ring drawn on a circle, hops coloured
by transport, the top finding's hosts/ranks highlighted), init timeline (one bar per
rank, init phases stacked, slowest rank marked) and the unexplained warnings.

Pure: ``render(report, figures=...)`` takes the Report and the plain-dict figures
payload built by :func:`ncclsleuth.model.figures.build_figures` (``Report.figures``); without figures the
pictures are left out with a note.
"""
from __future__ import annotations

import math
from html import escape
from typing import Any

from . import host_runs
from .markdown import summary_line, verdict_sentence, where

TRANSPORT_COLORS = [  # (prefix, colour, legend label)
    ("P2P", "#2e7d32", "P2P / NVLink"),
    ("SHM", "#f9a825", "SHM"),
    ("NET/IB", "#1565c0", "NET/IB (RDMA)"),
    ("NET/Socket", "#8e24aa", "NET/Socket (TCP)"),
    ("NET", "#00838f", "NET (plugin)"),
    ("COLLNET", "#5d4037", "CollNet"),
]
UNKNOWN_COLOR = "#9e9e9e"
HOT = "#d32f2f"
PHASE_COLORS = {"kernels": "#90caf9", "alloc": "#ce93d8", "bootstrap": "#ef9a9a", "allgathers": "#ffcc80",
                "topo": "#a5d6a7", "graphs": "#80deea", "connections": "#9fa8da", "rest": "#bcaaa4"}
_EXTRA_PHASE = ["#e6ee9c", "#f48fb1", "#b0bec5", "#ffab91"]

CSS = """
:root{--fg:#1b1f24;--muted:#5f6b7a;--line:#d8dee4;--bg:#fff;--soft:#f6f8fa;--err:#c62828;--warn:#ef6c00;--info:#0277bd}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px;font:14px/1.5 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg);max-width:1240px}
h1{font-size:22px;margin:4px 0 6px}h2{font-size:18px;border-bottom:1px solid var(--line);padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin:0 0 4px}
code,pre{font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:8px 10px;white-space:pre-wrap;
word-break:break-all;margin:6px 0}
.verdict{border-left:6px solid var(--muted);background:var(--soft);padding:12px 16px;border-radius:6px}
.verdict.error{border-color:var(--err)}.verdict.warning{border-color:var(--warn)}.verdict.info{border-color:var(--info)}
.verdict.ok{border-color:#2e7d32}
.tag{font-weight:600;text-transform:uppercase;font-size:12px;letter-spacing:.04em;color:var(--muted)}
.sev{display:inline-block;padding:0 6px;border-radius:4px;color:#fff;font-size:11px;font-weight:700;text-transform:uppercase}
.sev.error{background:var(--err)}.sev.warning{background:var(--warn)}.sev.info{background:var(--info)}
.finding{border:1px solid var(--line);border-radius:6px;padding:12px 14px;margin:12px 0}
.finding .meta{color:var(--muted);font-size:12px;margin-bottom:6px}
.ev{list-style:none;padding:0;margin:4px 0}.ev li{margin:2px 0}
.ev .loc{color:var(--muted);margin-right:6px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid var(--line);padding:3px 8px;text-align:left;
vertical-align:top}th{background:var(--soft);font-weight:600}
.note{color:var(--muted);font-style:italic}
.fig{border:1px solid var(--line);border-radius:6px;padding:8px;margin:10px 0;overflow-x:auto}
svg text{font-family:-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
footer{margin-top:36px;color:var(--muted);font-size:12px}
"""


def transport_color(label: str | None) -> tuple[str, str]:
    if label:
        for prefix, colour, legend in TRANSPORT_COLORS:
            if label == prefix or label.startswith(prefix + "/") or label.startswith(prefix):
                return colour, legend
    return UNKNOWN_COLOR, "unknown"


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _f(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


# ----------------------------------------------------------------------------- report parts


def _verdict(report: Any) -> str:
    v = report.verdict
    if v is None:
        return ('<section class="verdict ok"><div class="tag">verdict</div><h1>No problem found</h1>'
                "<p>No rule fired on these logs.</p></section>")
    tag = " · ".join(x for x in (v.severity.upper(), v.category, where(v)) if x)
    return (f'<section class="verdict {_e(v.severity)}"><div class="tag">{_e(tag)}</div>'
            f"<h1>{_e(verdict_sentence(report))}</h1><p>{_e(' '.join(v.message.split()))}</p></section>")


def _finding(i: int, f: Any) -> str:
    meta = [f'<span class="sev {_e(f.severity)}">{_e(f.severity)}</span>', _e(f.category),
            f"confidence {f.confidence:.2f}"]
    if where(f):
        meta.append(_e(where(f)))
    if f.caused_by:
        meta.append(f"symptom of {_e(f.caused_by)}")
    ev = "".join(f'<li><code class="loc">{_e(e.file)}:{e.line}</code><code>{_e(e.text.strip())}</code></li>'
                 for e in f.evidence[:8])
    more = max(f.evidence_total, len(f.evidence)) - len(f.evidence[:8])
    if more > 0:
        ev += f'<li class="note">… {more} more line{"s" if more != 1 else ""}</li>'
    refs = ""
    if f.references:  # shown as text, not links: the page fetches nothing and links nowhere by itself
        refs = '<p class="note">References: ' + ", ".join(f"<code>{_e(u)}</code>" for u in f.references) + "</p>"
    return (f'<article class="finding" id="f{i}"><h3>{i}. [{_e(f.rule_id)}] {_e(f.title)}</h3>'
            f'<div class="meta">{" · ".join(meta)}</div><p>{_e(" ".join(f.message.split()))}</p>'
            f'<div><b>Evidence</b></div><ul class="ev">{ev or "<li class=note>none shown</li>"}</ul>'
            f"<div><b>Fix</b></div><pre>{_e(f.fix.strip())}</pre>{refs}</article>")


def _summary(report: Any) -> str:
    s = report.summary
    rows = [("ranks / hosts", f"{s.get('ranks') or '?'} / {len(s.get('hosts') or [])}"),
            ("files / lines", f"{s.get('files')} / {s.get('lines')}")]
    if s.get("nccl_versions"):
        rows.append(("NCCL", ", ".join(f"{k} ({n} process{'es' if n != 1 else ''})" for k, n in s["nccl_versions"].items())))
    if s.get("cuda_versions"):
        rows.append(("CUDA", ", ".join(f"{k} ({n})" for k, n in s["cuda_versions"].items())))
    if s.get("ib_devices"):
        rows.append(("IB devices", ", ".join(s["ib_devices"])))
    for c in s.get("communicators") or []:
        rows.append((f"comm {c['comm']}", f"{c['ranks_seen']}/{c['nranks']} ranks, {c['init_complete']} init complete"
                     + (f", init max {c['init_max_s']} s" if c.get("init_max_s") else "")
                     + (", " + ", ".join(f"{k} {n}" for k, n in c["transports"].items()) if c.get("transports") else "")))
    out = ["<table>"] + [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows] + ["</table>"]
    per_host: dict[str, list[str]] = {h: [] for h in s.get("hosts") or []}
    for net, hosts in (s.get("network") or {}).items():
        for h in hosts:
            per_host.setdefault(h, []).append(net)
    if per_host:
        v = report.verdict
        hot = set(v.hosts) if v else set()
        out.append("<table><tr><th>host</th><th>network</th></tr>")
        for h, nets in per_host.items():
            style = f' style="color:{HOT};font-weight:700"' if h in hot else ""
            out.append(f"<tr><td{style}>{_e(h)}</td><td>{_e(', '.join(nets) or '?')}</td></tr>")
        out.append("</table>")
    return "\n".join(out)


def _unexplained(report: Any) -> str:
    if not report.unexplained:
        return '<p class="note">None: every warning/error line is explained by a finding above.</p>'
    items = "".join(f'<li><code class="loc">{_e(e.file)}:{e.line}</code><code>{_e(e.text.strip())}</code></li>'
                    for e in report.unexplained[:100])
    more = report.unexplained_total - len(report.unexplained[:100])
    if more > 0:
        items += f'<li class="note">… {more} more</li>'
    return f'<ul class="ev">{items}</ul>'


# ----------------------------------------------------------------------------- topology


def ring_svg(comm: dict[str, Any], hot_hosts: set[str], hot_ranks: set[int], size: int = 620) -> str:
    """The communicator's ranks on a circle (ring order of channel 0), hops as coloured chords."""
    rings = comm.get("rings") or []
    ranks = sorted(int(r) for r in comm.get("ranks") or [])
    order = [int(r) for r in rings[0][1]] if rings else ranks
    order += [r for r in ranks if r not in set(order)]
    n = len(order)
    if n == 0:
        return ""
    rank_host = {int(k): v for k, v in (comm.get("rank_host") or {}).items()}
    hops = list(comm.get("hops") or [])
    if not hops and rings:
        for _ch, o in rings:
            hops += [{"src": a, "dst": b, "transport": None, "channels": 1} for a, b in zip(o, list(o[1:]) + list(o[:1]))]
    cx = cy = size / 2
    radius = size / 2 - 110
    node_r = max(2.0, min(14.0, 0.28 * 2 * math.pi * radius / n))
    pos = {}
    for i, r in enumerate(order):
        a = -math.pi / 2 + 2 * math.pi * i / n
        pos[r] = (cx + radius * math.cos(a), cy + radius * math.sin(a), a)
    idx = {r: i for i, r in enumerate(order)}
    parts = [f'<svg width="{size + 220}" height="{size}" '
             f'viewBox="0 0 {size + 220} {size}" role="img" aria-label="ring topology of communicator '
             f'{_e(comm.get("key"))}">']
    # host bands
    groups = host_runs(order, rank_host)
    band = radius + node_r + (22 if node_r < 9 else 10)
    for gi, (h, rs) in enumerate(groups):
        if h == "?" and len(groups) == 1:
            break
        a0 = pos[rs[0]][2] - math.pi / n * 0.9
        a1 = pos[rs[-1]][2] + math.pi / n * 0.9
        hot = h in hot_hosts or bool(hot_ranks & set(rs))
        colour = HOT if hot else ("#607d8b" if gi % 2 == 0 else "#90a4ae")
        large = 1 if a1 - a0 > math.pi else 0
        x0, y0 = cx + band * math.cos(a0), cy + band * math.sin(a0)
        x1, y1 = cx + band * math.cos(a1), cy + band * math.sin(a1)
        if len(groups) == 1:
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{band:.1f}" fill="none" stroke="{colour}" '
                         f'stroke-width="{6 if hot else 4}"/>')
        else:
            parts.append(f'<path d="M{x0:.1f},{y0:.1f} A{band:.1f},{band:.1f} 0 {large} 1 {x1:.1f},{y1:.1f}" '
                         f'fill="none" stroke="{colour}" stroke-width="{6 if hot else 4}" stroke-linecap="round">'
                         f"<title>{_e(h)}: ranks {rs[0]}–{rs[-1]}</title></path>")
        am = (a0 + a1) / 2
        lx, ly = cx + (band + 16) * math.cos(am), cy + (band + 16) * math.sin(am)
        anchor = "start" if math.cos(am) > 0.2 else ("end" if math.cos(am) < -0.2 else "middle")
        weight = ' font-weight="700"' if hot else ""
        parts.append(f'<text x="{lx:.1f}" y="{ly + 4:.1f}" font-size="12" text-anchor="{anchor}" '
                     f'fill="{HOT if hot else "#37474f"}"{weight}>{_e(h)}</text>')
    # hops: neighbours on the circle as arcs on an inner track, others as chords through the middle
    track = radius - node_r - 7
    seen_transports: dict[str, int] = {}
    for hop in sorted(hops, key=lambda h: (str(h.get("transport")), h["src"], h["dst"])):
        a, b = hop["src"], hop["dst"]
        if a not in pos or b not in pos or a == b:
            continue
        colour, legend = transport_color(hop.get("transport"))
        seen_transports[legend] = seen_transports.get(legend, 0) + 1
        step = (idx[b] - idx[a]) % n
        width = 2.0 + min(3.0, 0.5 * int(hop.get("channels") or 1))
        tip = f"{a} → {b}: {hop.get('transport') or 'ring order'}" + (" GDR" if hop.get("gdr") else "")
        if step in (1, n - 1) and n > 2:
            a0 = pos[a][2] if step == 1 else pos[b][2]  # the arc always runs clockwise
            a1 = a0 + 2 * math.pi / n
            x0, y0 = cx + track * math.cos(a0), cy + track * math.sin(a0)
            x1, y1 = cx + track * math.cos(a1), cy + track * math.sin(a1)
            d = f"M{x0:.1f},{y0:.1f} A{track:.1f},{track:.1f} 0 0 1 {x1:.1f},{y1:.1f}"
        else:
            x0, y0, _ = pos[a]
            x1, y1, _ = pos[b]
            d = f"M{x0:.1f},{y0:.1f} Q{cx:.1f},{cy:.1f} {x1:.1f},{y1:.1f}"
        parts.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="{width:.1f}" opacity="0.9">'
                     f"<title>{_e(tip)}</title></path>")
    # nodes
    label_inside = node_r >= 9
    for r in order:
        x, y, a = pos[r]
        hot = r in hot_ranks or rank_host.get(r) in hot_hosts
        stroke = HOT if hot else "#37474f"
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{node_r:.1f}" fill="{"#ffcdd2" if hot else "#fff"}" '
                     f'stroke="{stroke}" stroke-width="{2.2 if hot else 1.2}"><title>rank {r}'
                     f'{" on " + _e(rank_host[r]) if r in rank_host else ""}</title></circle>')
        if label_inside:
            parts.append(f'<text x="{x:.1f}" y="{y + 4:.1f}" font-size="11" text-anchor="middle">{r}</text>')
        elif n <= 128:
            lx, ly = cx + (radius + node_r + 9) * math.cos(a), cy + (radius + node_r + 9) * math.sin(a)
            parts.append(f'<text x="{lx:.1f}" y="{ly + 3:.1f}" font-size="8" text-anchor="middle" '
                         f'fill="{HOT if hot else "#546e7a"}">{r}</text>')
    # legend
    lx, ly = size + 20, 30
    parts.append(f'<text x="{lx}" y="{ly}" font-size="13" font-weight="700">Transport</text>')
    legend_items = [(c, lab) for _, c, lab in TRANSPORT_COLORS] + [(UNKNOWN_COLOR, "unknown")]
    for colour, lab in legend_items:
        if lab not in seen_transports:
            continue
        ly += 20
        parts.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 24}" y2="{ly - 4}" stroke="{colour}" stroke-width="4"/>'
                     f'<text x="{lx + 30}" y="{ly}" font-size="12">{_e(lab)} ({seen_transports[lab]})</text>')
    if hot_hosts or hot_ranks:
        ly += 24
        parts.append(f'<circle cx="{lx + 12}" cy="{ly - 4}" r="6" fill="#ffebee" stroke="{HOT}" stroke-width="2.5"/>'
                     f'<text x="{lx + 30}" y="{ly}" font-size="12">top finding</text>')
    ly += 24
    parts.append(f'<text x="{lx}" y="{ly}" font-size="11" fill="#5f6b7a">{n} ranks, {len(groups)} host'
                 f'{"s" if len(groups) != 1 else ""}</text>')
    if comm.get("truncated"):
        parts.append(f'<text x="{lx}" y="{ly + 16}" font-size="11" fill="#5f6b7a">ring line was truncated in the log</text>')
    parts.append("</svg>")
    return "".join(parts)


# ----------------------------------------------------------------------------- timeline


def timeline_svg(init: list[dict[str, Any]], hot_hosts: set[str], hot_ranks: set[int], width: int = 1120,
                 max_rows: int = 256) -> str:
    rows = [r for r in init if r.get("duration") is not None]
    if not rows:
        return ""
    slow = max(rows, key=lambda r: r["duration"])
    if len(rows) > max_rows:
        rows = sorted(sorted(rows, key=lambda r: -r["duration"])[:max_rows], key=lambda r: (r.get("host") or "", r["rank"]))
    row_h = 12 if len(rows) <= 80 else 8
    left, top, right = 190, 40, 200
    plot_w = width - left - right
    end = max((r.get("offset") or 0.0) + r["duration"] for r in rows) or 1.0
    scale = plot_w / end
    height = top + row_h * len(rows) + 70
    phase_names: list[str] = []
    for r in rows:
        for name, _ in r.get("phases") or []:
            if name not in phase_names:
                phase_names.append(name)
    colours = dict(PHASE_COLORS)
    for i, name in enumerate(p for p in phase_names if p not in colours):
        colours[name] = _EXTRA_PHASE[i % len(_EXTRA_PHASE)]
    parts = [f'<svg width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="NCCL init timeline">']
    # axis
    step = _nice_step(end / 6)
    t = 0.0
    while t <= end + 1e-9:
        x = left + t * scale
        parts.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{top + row_h * len(rows)}" stroke="#eceff1"/>'
                     f'<text x="{x:.1f}" y="{top - 10}" font-size="10" text-anchor="middle" fill="#5f6b7a">{_f(t)} s</text>')
        t += step
    prev_host = None
    for i, r in enumerate(rows):
        y = top + i * row_h
        host = r.get("host") or "?"
        hot = r["rank"] in hot_ranks or host in hot_hosts
        if host != prev_host and i:
            parts.append(f'<line x1="4" y1="{y}" x2="{width - 4}" y2="{y}" stroke="#b0bec5" stroke-width="0.8"/>')
        label = f"rank {r['rank']}" + (f" · {host}" if host != prev_host or row_h >= 12 else "")
        if row_h >= 12 or host != prev_host:
            parts.append(f'<text x="{left - 6}" y="{y + row_h - 3}" font-size="{9 if row_h >= 12 else 7}" '
                         f'text-anchor="end" fill="{HOT if hot else "#37474f"}">{_e(label)}</text>')
        prev_host = host
        x = left + (r.get("offset") or 0.0) * scale
        phases = r.get("phases") or []
        if phases:
            for name, secs in phases:
                w = max(0.0, float(secs)) * scale
                parts.append(f'<rect x="{x:.2f}" y="{y + 1}" width="{w:.2f}" height="{row_h - 2}" fill="{colours[name]}">'
                             f"<title>rank {r['rank']} {_e(name)} {float(secs):.2f} s</title></rect>")
                x += w
        else:
            w = r["duration"] * scale
            parts.append(f'<rect x="{x:.2f}" y="{y + 1}" width="{w:.2f}" height="{row_h - 2}" fill="#90a4ae">'
                         f"<title>rank {r['rank']} init {r['duration']:.2f} s</title></rect>")
        if r is slow:
            x0 = left + (r.get("offset") or 0.0) * scale
            parts.append(f'<rect x="{x0:.2f}" y="{y}" width="{r["duration"] * scale:.2f}" height="{row_h}" fill="none" '
                         f'stroke="{HOT}" stroke-width="2"/>'
                         f'<text x="{x0 + r["duration"] * scale + 6:.1f}" y="{y + row_h - 2}" font-size="11" '
                         f'fill="{HOT}" font-weight="700">◀ slowest: rank {r["rank"]}, {r["duration"]:.2f} s</text>')
    # legend
    ly = top + row_h * len(rows) + 28
    lx = left
    items = [(colours[p], p) for p in phase_names] or [("#90a4ae", "init (start → complete)")]
    for colour, name in items:
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>'
                     f'<text x="{lx + 16}" y="{ly}" font-size="11">{_e(name)}</text>')
        lx += 24 + 7 * len(name)
    src = {r.get("source") for r in rows}
    basis = "Init START → COMPLETE timestamps" if src == {"timestamps"} else "'Init timings' totals (no timestamps)"
    parts.append(f'<text x="{left}" y="{ly + 22}" font-size="11" fill="#5f6b7a">{len(rows)} ranks; bars from '
                 f"{_e(basis)}</text></svg>")
    return "".join(parts)


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


# ----------------------------------------------------------------------------- page


def render(report: Any, color: bool = False, figures: dict[str, Any] | None = None, title: str | None = None,
           **_: Any) -> str:
    v = report.verdict
    hot_hosts = set(v.hosts) if v else set()
    hot_ranks = set(v.ranks) if v else set()
    page_title = title or ("NCCL post-mortem: " + (v.title if v else "no problem found"))
    body = [_verdict(report), f'<p class="note">{_e(summary_line(report.summary))}</p>', "<h2>Findings</h2>"]
    body += [_finding(i, f) for i, f in enumerate(report.findings, 1)] or ['<p class="note">No rule fired.</p>']
    body += ["<h2>Job summary</h2>", _summary(report)]
    body.append("<h2>Topology</h2>")
    if figures is None:
        body.append('<p class="note">No topology data: render with <code>ncclsleuth report</code> for pictures.</p>')
    else:
        drawn = 0
        for c in (figures.get("comms") or [])[:4]:
            svg = ring_svg(c, hot_hosts, hot_ranks)
            if svg:
                drawn += 1
                body.append(f'<div class="fig"><div><b>Communicator {_e(c.get("key"))}</b> '
                            f'({_e(c.get("nranks") or "?")} ranks; ring of channel 0 and every hop the log shows)</div>'
                            f"{svg}</div>")
        if not drawn:
            body.append('<p class="note">The logs print no ring or connection lines (NCCL_DEBUG=INFO shows them).</p>')
    body.append("<h2>Init timeline</h2>")
    svg = timeline_svg((figures or {}).get("init") or [], hot_hosts, hot_ranks) if figures is not None else ""
    body.append(f'<div class="fig">{svg}</div>' if svg else
                '<p class="note">No init timings or Init START/COMPLETE timestamps in the logs.</p>')
    body += ["<h2>Unexplained warnings</h2>", _unexplained(report)]
    if report.notices:
        body.append("<h2>Input notices</h2><ul>" + "".join(
            f"<li><code>{_e(n.get('path'))}</code>: {_e(n.get('message'))}</li>" for n in report.notices) + "</ul>")
    body.append("<footer>Generated by ncclsleuth. Self-contained page: no scripts, no external resources.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_e(page_title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
