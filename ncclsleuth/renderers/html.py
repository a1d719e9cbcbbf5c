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

from ..model.stats import counted, some
from ..model.stats import number as num
from . import clip, comm_counts, evidence_lines, host_runs, init_progress_groups, more_comms
from .markdown import short_file, summary_line, verdict_sentence, where

#: categories whose culprit is a link: the ring's hops from the culprit ranks to other hosts are drawn broken
LINK_CATEGORIES = frozenset({"ib_link_error", "network_blocked", "roce_gid", "wrong_interface", "socket_fallback",
                             "gdr_peermem", "p2p_topology", "shm_limit"})
#: categories of a job that hung or timed out in its collectives: the timeline shows each rank's last collective
HANG_CATEGORIES = frozenset({"collective_desync", "collective_timeout", "peer_failure", "straggler"})
#: above this many ranks the ring shows hosts (with their rank ranges), not ranks
RANK_RING_MAX = 256

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
#: rows of the init progress table (a host whose ranks failed alike is one row)
MAX_INIT_GROUPS = 64
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
overflow-wrap:anywhere;margin:6px 0}
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
.fig svg{max-width:100%;height:auto}
header.pm{display:flex;flex-wrap:wrap;gap:4px 24px;color:var(--muted);font-size:12px;border-bottom:1px solid var(--line);
padding-bottom:8px;margin-bottom:12px}header.pm b{color:var(--fg)}
header.pm code{font-size:11px;overflow-wrap:anywhere}
.rep{color:var(--muted);margin-left:6px}
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


#: characters of an evidence line shown (the terminal and Markdown show 400): PyTorch's desync report
#: lists every rank on one line, 46 KB at 8,000 ranks, most of the page; the line number points at it
EVIDENCE_CHARS = 1000


def _finding(i: int, f: Any) -> str:
    meta = [f'<span class="sev {_e(f.severity)}">{_e(f.severity)}</span>', _e(f.category),
            f"confidence {f.confidence:.2f}"]
    if where(f):
        meta.append(_e(where(f)))
    if f.caused_by:
        meta.append(f"symptom of {_e(f.caused_by)}")
    ev = ""
    lines, more = evidence_lines(f, 8)
    for path, ln in lines:
        rep = f'<span class="rep">{ln.times}{", " + _e(ln.who) if ln.who else ""}</span>' if ln.count > 1 else ""
        ev += (f'<li><code class="loc">{_e(short_file(path))}:{ln.line}</code>'
               f"<code>{_e(clip(ln.text.strip(), EVIDENCE_CHARS))}</code>{rep}</li>")
    if more > 0:
        ev += f'<li class="note">… {counted(more, "more line")}</li>'
    refs = ""
    if f.references:  # shown as text, not links: the page fetches nothing and links nowhere by itself
        refs = '<p class="note">References: ' + ", ".join(f"<code>{_e(u)}</code>" for u in f.references) + "</p>"
    return (f'<article class="finding" id="f{i}"><h3>{i}. [{_e(f.rule_id)}] {_e(f.title)}</h3>'
            f'<div class="meta">{" · ".join(meta)}</div><p>{_e(" ".join(f.message.split()))}</p>'
            f'<div><b>Evidence</b></div><ul class="ev">{ev or "<li class=note>none shown</li>"}</ul>'
            f"<div><b>Fix</b></div><pre>{_e(f.fix.strip())}</pre>{refs}</article>")


def _summary(report: Any) -> str:
    s = report.summary
    ranks = num(s["ranks"]) if s.get("ranks") else "not logged"
    rows = [("ranks / hosts", f"{ranks} / {num(len(s.get('hosts') or []))}"),
            ("files / lines", f"{num(s.get('files'))} / {num(s.get('lines'))}")]
    if s.get("nccl_versions"):
        rows.append(("NCCL", ", ".join(f"{k} ({num(n)} process{'es' if n != 1 else ''})"
                                       for k, n in s["nccl_versions"].items())))
    if s.get("cuda_versions"):
        rows.append(("CUDA", ", ".join(f"{k} ({num(n)})" for k, n in s["cuda_versions"].items())))
    if s.get("ib_devices"):
        rows.append(("IB devices", ", ".join(s["ib_devices"])))
    for c in s.get("communicators") or []:
        rows.append((f"comm {c['comm']}", comm_counts(c)
                     + (f", init max {c['init_max_s']} s" if c.get("init_max_s") else "")
                     + (", " + ", ".join(f"{k} {num(n)}" for k, n in c["transports"].items()) if c.get("transports") else "")))
    if others := more_comms(s, len(s.get("communicators") or [])):
        rows.append(("", f"… and {others}"))
    out = ["<table>"] + [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows] + ["</table>"]
    per_host: dict[str, list[str]] = {h: [] for h in s.get("hosts") or []}
    for net, hosts in (s.get("network") or {}).items():
        for h in hosts:
            per_host.setdefault(h, []).append(net)
    if per_host:
        v = report.verdict
        hot = set(v.hosts) if v else set()
        out.append(_hosts_table(per_host, hot))
    return "\n".join(out)


#: hosts listed one per row up to this many; more are grouped by their networks
MAX_HOST_ROWS = 32


def _hosts_table(per_host: dict[str, list[str]], hot: set[str]) -> str:
    """Host -> network, one row per host; for a big job one row per network (the hosts
    that use it: the culprit's first, in red, then the first few and a count), so 128
    hosts are a few rows, not a page."""
    red = f' style="color:{HOT};font-weight:700"'
    if len(per_host) <= MAX_HOST_ROWS:
        rows = [f"<tr><td{red if h in hot else ''}>{_e(h)}</td><td>{_e(', '.join(n) or 'not logged')}</td></tr>"
                for h, n in per_host.items()]
        return "\n".join(["<table><tr><th>host</th><th>network</th></tr>", *rows, "</table>"])
    by_net: dict[str, list[str]] = {}
    for h, nets in per_host.items():
        by_net.setdefault(", ".join(nets) or "not logged", []).append(h)
    rows = []
    for net, hosts in by_net.items():
        first = [h for h in hosts if h in hot] + [h for h in hosts if h not in hot]
        shown = some([f"<span{red}>{_e(h)}</span>" if h in hot else _e(h) for h in first], 8)
        rows.append(f"<tr><td>{_e(net)}</td><td>{len(hosts):,}</td><td>{shown}</td></tr>")
    return "\n".join(["<table><tr><th>network</th><th>hosts</th><th>which</th></tr>", *rows, "</table>"])


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


def ring_svg(comm: dict[str, Any], hot_hosts: set[str], hot_ranks: set[int], size: int | None = None,
             broken: bool = False, peer_hosts: set[str] | None = None) -> str:
    """The communicator's ranks on a circle (ring order of channel 0), hops as coloured chords.

    The culprit is drawn in red: its ranks (``hot_ranks``; without them every rank of
    ``hot_hosts``) and the hosts they are on; with ``broken`` (a link is the culprit) the
    hops from those ranks to other hosts (to ``peer_hosts`` when the finding names the
    other end) are drawn broken.  The circle grows with the
    ranks so that 64 ranks keep their numbers inside their nodes; above RANK_RING_MAX
    ranks the hosts are drawn instead (:func:`host_ring_svg`)."""
    rings = comm.get("rings") or []
    ranks = sorted(int(r) for r in comm.get("ranks") or [])
    order = [int(r) for r in rings[0][1]] if rings else ranks
    order += [r for r in ranks if r not in set(order)]
    n = len(order)
    if n == 0:
        return ""
    rank_host = {int(k): v for k, v in (comm.get("rank_host") or {}).items()}
    if n > RANK_RING_MAX:
        return host_ring_svg(order, rank_host, comm, hot_hosts, hot_ranks)
    size = size or (620 if n <= 32 else min(1100, 620 + 8 * (n - 32)))
    host_level = not hot_ranks  # the culprit is a host (its band red), not ranks of it
    hot_ranks = set(hot_ranks) or {r for r in order if rank_host.get(r) in hot_hosts}
    hot_hosts = {rank_host[r] for r in hot_ranks if r in rank_host} or set(hot_hosts)
    peers = set(peer_hosts or ()) - hot_hosts
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
        band_hot = hot and host_level
        colour = HOT if band_hot else ("#607d8b" if gi % 2 == 0 else "#90a4ae")
        large = 1 if a1 - a0 > math.pi else 0
        x0, y0 = cx + band * math.cos(a0), cy + band * math.sin(a0)
        x1, y1 = cx + band * math.cos(a1), cy + band * math.sin(a1)
        if len(groups) == 1:
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{band:.1f}" fill="none" stroke="{colour}" '
                         f'stroke-width="{6 if band_hot else 4}"/>')
        else:
            parts.append(f'<path d="M{x0:.1f},{y0:.1f} A{band:.1f},{band:.1f} 0 {large} 1 {x1:.1f},{y1:.1f}" '
                         f'fill="none" stroke="{colour}" stroke-width="{6 if band_hot else 4}" stroke-linecap="round">'
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
        step = (idx[b] - idx[a]) % n
        width = 2.0 + min(3.0, 0.5 * int(hop.get("channels") or 1))
        tip = f"{a} → {b}: {hop.get('transport') or 'ring order'}" + (" GDR" if hop.get("gdr") else "")
        is_broken = (broken and bool({a, b} & hot_ranks) and rank_host.get(a) != rank_host.get(b)
                     and (not peers or bool({rank_host.get(a), rank_host.get(b)} & peers)))
        dash = ""
        if is_broken:
            colour, legend, width, dash = HOT, "broken hop (culprit's link)", 4.5, ' stroke-dasharray="7 4"'
            tip += " — the culprit's link"
        seen_transports[legend] = seen_transports.get(legend, 0) + 1
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
        parts.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="{width:.1f}" opacity="0.9"{dash}>'
                     f"<title>{_e(tip)}</title></path>")
    # nodes
    label_inside = node_r >= 8
    font = max(8.0, min(11.0, node_r * 1.15))
    for r in order:
        x, y, a = pos[r]
        hot = r in hot_ranks
        stroke = HOT if hot else "#37474f"
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{node_r:.1f}" fill="{"#ffcdd2" if hot else "#fff"}" '
                     f'stroke="{stroke}" stroke-width="{2.2 if hot else 1.2}"><title>rank {r}'
                     f'{" on " + _e(rank_host[r]) if r in rank_host else ""}</title></circle>')
        if label_inside:
            bold = ' font-weight="700"' if hot else ""
            parts.append(f'<text x="{x:.1f}" y="{y + font * 0.36:.1f}" font-size="{font:.1f}" text-anchor="middle"'
                         f"{bold}>{r}</text>")
        elif n <= 128:
            lx, ly = cx + (radius + node_r + 9) * math.cos(a), cy + (radius + node_r + 9) * math.sin(a)
            parts.append(f'<text x="{lx:.1f}" y="{ly + 3:.1f}" font-size="8" text-anchor="middle" '
                         f'fill="{HOT if hot else "#546e7a"}">{r}</text>')
    # legend
    lx, ly = size + 20, 30
    parts.append(f'<text x="{lx}" y="{ly}" font-size="13" font-weight="700">Transport</text>')
    legend_items = [(c, lab) for _, c, lab in TRANSPORT_COLORS] + [(UNKNOWN_COLOR, "unknown"),
                                                                   (HOT, "broken hop (culprit's link)")]
    for colour, lab in legend_items:
        if lab not in seen_transports:
            continue
        ly += 20
        parts.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 24}" y2="{ly - 4}" stroke="{colour}" stroke-width="4"/>'
                     f'<text x="{lx + 30}" y="{ly}" font-size="12">{_e(lab)} ({seen_transports[lab]})</text>')
    if hot_hosts or hot_ranks:
        ly += 24
        parts.append(f'<circle cx="{lx + 12}" cy="{ly - 4}" r="6" fill="#ffebee" stroke="{HOT}" stroke-width="2.5"/>'
                     f'<text x="{lx + 30}" y="{ly}" font-size="12">culprit: '
                     f'{_e(_rank_words(hot_ranks) or ", ".join(sorted(hot_hosts)))}</text>')
    ly += 24
    parts.append(f'<text x="{lx}" y="{ly}" font-size="11" fill="#5f6b7a">{n} ranks, {len(groups)} host'
                 f'{"s" if len(groups) != 1 else ""}</text>')
    if comm.get("truncated"):
        parts.append(f'<text x="{lx}" y="{ly + 16}" font-size="11" fill="#5f6b7a">ring line was truncated in the log</text>')
    parts.append("</svg>")
    return "".join(parts)


def _rank_words(ranks: set[int]) -> str:
    from ..model.stats import TEXT_MOST, ranges

    if not ranks:
        return ""
    return ("rank " if len(ranks) == 1 else "ranks ") + ranges(ranks, ", ", TEXT_MOST)


#: nodes of a host ring at most: past it, consecutive host runs share a node (16,384 ranks on
#: 2,048 hosts drew 2,048 overlapping dots of 2.5 px, 263 KB a picture; 1.1 MB of the page)
HOST_NODES_MAX = 256


def _host_nodes(groups: list[tuple[str, list[int]]], most: int) -> list[tuple[str, list[int], list[str]]]:
    """``(label, ranks, hosts)`` per node of a host ring: one host run each, or where there are more
    than ``most`` runs, ``ceil(runs / most)`` consecutive runs each (``node000–node007``)."""
    per = max(1, math.ceil(len(groups) / most))
    out = []
    for i in range(0, len(groups), per):
        chunk = groups[i:i + per]
        hosts = [h for h, _ in chunk]
        label = hosts[0] if len(chunk) == 1 else f"{hosts[0]}–{hosts[-1]}"
        out.append((label, [r for _, rs in chunk for r in rs], hosts))
    return out


def host_ring_svg(order: list[int], rank_host: dict[int, str], comm: dict[str, Any], hot_hosts: set[str],
                  hot_ranks: set[int], size: int = 760) -> str:
    """The summary view of a big ring (over RANK_RING_MAX ranks): one node per run of
    ranks on a host (per a few consecutive runs past HOST_NODES_MAX), in ring order, with its
    rank range; the culprit's hosts in red and named, the others named where there is room."""
    runs = host_runs(order, rank_host)
    hot_hosts = {rank_host[r] for r in hot_ranks if r in rank_host} or set(hot_hosts)
    groups = _host_nodes(runs, HOST_NODES_MAX)
    per = math.ceil(len(runs) / len(groups)) if groups else 1
    g = len(groups)
    cx = cy = size / 2
    radius = size / 2 - 120
    node_r = max(2.5, min(12.0, 0.3 * 2 * math.pi * radius / g))
    every = max(1, math.ceil(g / 48))  # at most ~48 names around the circle
    parts = [f'<svg width="{size + 240}" height="{size}" viewBox="0 0 {size + 240} {size}" role="img" '
             f'aria-label="hosts of communicator {_e(comm.get("key"))} in ring order">',
             f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{radius:.1f}" fill="none" stroke="#b0bec5" stroke-width="1.5"/>']
    for i, (h, rs, hosts) in enumerate(groups):
        a = -math.pi / 2 + 2 * math.pi * i / g
        x, y = cx + radius * math.cos(a), cy + radius * math.sin(a)
        hot = bool(hot_hosts.intersection(hosts)) or bool(hot_ranks & set(rs))
        if hot and len(hosts) > 1:  # the culprit's host by its own name, among those sharing the node
            h = ", ".join(sorted(hot_hosts.intersection(hosts))) or h
        tip = f"{h}: ranks {rs[0]}–{rs[-1]}" if len(rs) > 1 else f"{h}: rank {rs[0]}"
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{node_r * (1.6 if hot else 1):.1f}" '
                     f'fill="{"#ffcdd2" if hot else "#fff"}" stroke="{HOT if hot else "#546e7a"}" '
                     f'stroke-width="{2.5 if hot else 1}"><title>{_e(tip)}</title></circle>')
        if hot or i % every == 0:
            lx, ly = cx + (radius + node_r + 12) * math.cos(a), cy + (radius + node_r + 12) * math.sin(a)
            anchor = "start" if math.cos(a) > 0.2 else ("end" if math.cos(a) < -0.2 else "middle")
            label = f"{h} ({rs[0]}–{rs[-1]})" if len(rs) > 1 else f"{h} ({rs[0]})"
            weight = ' font-weight="700"' if hot else ""
            parts.append(f'<text x="{lx:.1f}" y="{ly + 4:.1f}" font-size="{12 if hot else 9}" text-anchor="{anchor}" '
                         f'fill="{HOT if hot else "#546e7a"}"{weight}>{_e(label)}</text>')
    lx = size + 20
    parts.append(f'<text x="{lx}" y="30" font-size="13" font-weight="700">Summary view</text>'
                 f'<text x="{lx}" y="50" font-size="11" fill="#5f6b7a">{len(order):,} ranks on {len(runs):,} host runs;</text>'
                 f'<text x="{lx}" y="64" font-size="11" fill="#5f6b7a">one node per '
                 f'{"host" if per == 1 else f"{per} host runs"}, in ring order</text>')
    if hot_hosts:
        parts.append(f'<circle cx="{lx + 8}" cy="86" r="7" fill="#ffcdd2" stroke="{HOT}" stroke-width="2.5"/>'
                     f'<text x="{lx + 22}" y="90" font-size="12">culprit: '
                     f'{_e(_rank_words(hot_ranks) or ", ".join(sorted(hot_hosts)))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def collectives_svg(rows: list[dict[str, Any]], hot_ranks: set[int], width: int = 940, max_rows: int = 128) -> str:
    """A hang's timeline: per rank, the last collective it completed (and the one it
    timed out in), and when it wrote its last line -- the rank that stopped early, or
    never reached the collective the others wait in, stands out."""
    if not rows:
        return ""
    completed = [r["last_completed"] for r in rows if r.get("last_completed") is not None]
    low = min(completed) if completed else None
    odd = {r["rank"] for r in rows if low is not None and r.get("last_enqueued") is not None
           and completed and r["last_enqueued"] <= low and max(completed) >= low}
    marked = set(hot_ranks) or odd
    if len(rows) > max_rows:  # the marked ranks and their neighbours, then an even sample
        keep = {r["rank"] for r in rows if r["rank"] in marked}
        step = math.ceil(len(rows) / max_rows)
        keep |= {r["rank"] for i, r in enumerate(rows) if i % step == 0}
        rows = [r for r in rows if r["rank"] in keep][:max_rows]
    timed = [r["last_s"] for r in rows if r.get("last_s") is not None]
    end = max(timed) if timed else 0.0
    row_h = 16 if len(rows) <= 40 else 10
    left, top, right = 150, 40, 290
    plot_w = width - left - right
    scale = plot_w / end if end > 0 else 0.0
    height = top + row_h * len(rows) + 56
    size = 10 if row_h >= 16 else 8
    parts = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="last collective and last line of each rank">',
             f'<text x="{left}" y="{top - 22}" font-size="11" fill="#5f6b7a">bar: when the rank wrote its last line, '
             f'seconds after the first rank\'s last line (0 – {_f(round(end, 2))} s); text: its last collective</text>']
    for i, r in enumerate(rows):
        y = top + i * row_h
        hot = r["rank"] in marked
        colour = HOT if hot else "#37474f"
        weight = ' font-weight="700"' if hot else ""
        who = f"rank {r['rank']}" + (f" · {r['host']}" if r.get("host") else "")
        bits = []
        if r.get("last_completed") is not None:
            bits.append(f"completed #{r['last_completed']}")
        if r.get("timeout_seq") is not None:
            bits.append(f"timed out in #{r['timeout_seq']}" + (f" {r['op']}" if r.get("op") else ""))
        elif r.get("last_enqueued") is not None:
            bits.append(f"never started #{r['last_enqueued'] + 1}" if hot and r["rank"] in odd
                        else f"last enqueued #{r['last_enqueued']}")
        parts.append(f'<text x="{left - 8}" y="{y + row_h - 4}" font-size="{size}" text-anchor="end" '
                     f'fill="{colour}"{weight}>{_e(who)}</text>')
        w = max(2.0, (r.get("last_s") or 0.0) * scale)
        if r.get("last_s") is not None:
            parts.append(f'<rect x="{left}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" '
                         f'fill="{"#ef9a9a" if hot else "#90caf9"}"><title>rank {r["rank"]}: last line at '
                         f'+{r["last_s"]} s</title></rect>')
        parts.append(f'<text x="{left + plot_w + 10}" y="{y + row_h - 4}" font-size="{size}" fill="{colour}"'
                     f'{weight}>{_e(", ".join(bits))}</text>')
    ly = top + row_h * len(rows) + 30
    parts.append(f'<text x="{left}" y="{ly}" font-size="11" fill="#5f6b7a">{len(rows)} ranks; red: '
                 f'{_e(_rank_words(marked) or "none")} (the culprit, or behind the others)</text></svg>')
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
        host = r.get("host") or "host not logged"
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


def _header(report: Any, figures: dict[str, Any] | None, header: dict[str, Any] | None) -> str:
    """When the job failed (its first error line's time), the tool's version, the inputs
    and the command line that made this page."""
    from .. import __version__

    bits = []
    failed = (figures or {}).get("failed_at")
    if failed:
        bits.append(f"<span><b>Job failed:</b> {_e(failed)} (first error line)</span>")
    elif report.verdict is not None and figures is not None:
        bits.append("<span><b>Job failed:</b> when, the logs do not say (no timestamps)</span>")
    elif report.verdict is None:
        bits.append("<span><b>Job:</b> no failure found</span>")
    bits.append(f"<span><b>ncclsleuth</b> {_e(__version__)}</span>")
    s = report.summary
    bits.append(f"<span><b>Read:</b> {s.get('files', 0)} files, {s.get('lines', 0):,} lines</span>")
    if header:
        inputs = header.get("inputs") or []
        if inputs:
            bits.append("<span><b>Inputs:</b> " + some([f"<code>{_e(i)}</code>" for i in inputs], 6) + "</span>")
        if header.get("command"):
            bits.append(f"<span><b>Command:</b> <code>{_e(header['command'])}</code></span>")
    return '<header class="pm">' + "".join(bits) + "</header>"


def _timeline(report: Any, figures: dict[str, Any] | None, hot_hosts: set[str], hot_ranks: set[int]) -> list[str]:
    """The timeline the failure calls for: each rank's last collective and last line for a
    hang or timeout, the init phases otherwise."""
    v = report.verdict
    rows = (figures or {}).get("collectives") or []
    if figures is not None and rows and v is not None and v.category in HANG_CATEGORIES:
        svg = collectives_svg(rows, hot_ranks)
        return ["<h2>Last collective per rank</h2>",
                '<p class="note">The job hung in a collective: what each rank completed last, where it timed out, and '
                "when it wrote its last line.</p>", f'<div class="fig">{svg}</div>']
    svg = timeline_svg((figures or {}).get("init") or [], hot_hosts, hot_ranks) if figures is not None else ""
    if svg:
        return ["<h2>Init timeline</h2>", f'<div class="fig">{svg}</div>']
    progress = (figures or {}).get("init_progress") or []
    if progress:
        return ["<h2>Init progress</h2>", init_progress_table(progress, hot_hosts, hot_ranks)]
    return ["<h2>Init timeline</h2>", '<p class="note">No init timings or Init START/COMPLETE timestamps in the logs.</p>']


def init_progress_table(rows: list[dict[str, Any]], hot_hosts: set[str], hot_ranks: set[int]) -> str:
    """Init never completed (no timings to draw): one table row per run of ranks on a host
    that got as far and logged the same first error, the culprit's red."""
    from ..model.stats import ranges

    done = sum(1 for r in rows if r["completed"])
    out = [f'<p class="note">Init completed on {done} of {len(rows)} ranks: how far each rank got, and the first '
           "error its process logged.</p>",
           "<table><tr><th>host</th><th>ranks</th><th>Init START</th><th>Init COMPLETE</th><th>first error</th></tr>"]
    groups = init_progress_groups(rows)
    for g in groups[:MAX_INIT_GROUPS]:
        hot = bool(g.ranks & hot_ranks) or g.host in hot_hosts
        style = f' style="color:{HOT};font-weight:700"' if hot else ""
        first = g.first
        err = (f'<span class="loc">{_e(short_file(first["source"] or ""))}:{first["line"]}</span>'
               f'<br><code>{_e(clip(first["error"], 240))}</code>' if first.get("error") else "none logged")
        out.append(f"<tr><td{style}>{_e(g.host or 'host not logged')}</td><td{style}>{_e(ranges(g.ranks, ', '))}</td>"
                   f"<td>{'yes' if first['started'] else 'not logged'}</td><td>{'yes' if first['completed'] else 'no'}"
                   f"</td><td>{err}</td></tr>")
    if len(groups) > MAX_INIT_GROUPS:
        out.append(f'<tr><td colspan="5" class="note">… {len(groups) - MAX_INIT_GROUPS} more groups of ranks</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def render(report: Any, color: bool = False, figures: dict[str, Any] | None = None, title: str | None = None,
           header: dict[str, Any] | None = None, **_: Any) -> str:
    v = report.verdict
    hot_hosts = set(v.hosts) if v else set()
    hot_ranks = set(v.ranks) if v else set()
    broken = v is not None and v.category in LINK_CATEGORIES
    page_title = title or ("NCCL post-mortem: " + (v.title if v else "no problem found"))
    body = [_header(report, figures, header), _verdict(report), f'<p class="note">{_e(summary_line(report.summary))}</p>',
            "<h2>Findings</h2>"]
    body += [_finding(i, f) for i, f in enumerate(report.findings, 1)] or ['<p class="note">No rule fired.</p>']
    body += ["<h2>Job summary</h2>", _summary(report)]
    body.append("<h2>Topology</h2>")
    if figures is None:
        body.append('<p class="note">No topology data: render with <code>ncclsleuth report</code> for pictures.</p>')
    else:
        drawn = 0
        for c in (figures.get("comms") or [])[:4]:
            svg = ring_svg(c, hot_hosts, hot_ranks, broken=broken, peer_hosts=set(getattr(v, "peer_hosts", ())))
            if svg:
                drawn += 1
                n = c.get("nranks") or len(c.get("ranks") or [])
                body.append(f'<div class="fig"><div><b>Communicator {_e(c.get("key"))}</b> '
                            f'({_e(n)} ranks; ring of channel 0 and every hop the log shows)</div>'
                            f"{svg}</div>")
        if not drawn:
            body.append('<p class="note">The logs print no ring or connection lines (NCCL_DEBUG=INFO shows them).</p>')
    body += _timeline(report, figures, hot_hosts, hot_ranks)
    body += ["<h2>Unexplained warnings</h2>", _unexplained(report)]
    if report.notices:
        body.append("<h2>Input notices</h2><ul>" + "".join(
            f"<li><code>{_e(n.get('path'))}</code>: {_e(n.get('message'))}</li>" for n in report.notices) + "</ul>")
    body.append("<footer>Generated by ncclsleuth. Self-contained page: no scripts, no external resources.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_e(page_title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
