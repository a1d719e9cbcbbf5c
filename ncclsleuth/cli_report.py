"""``report`` (HTML / Markdown post-mortem), ``serve`` (HTTP API) and ``--redact`` /
``--max-chars`` on ``analyze``.

The post-mortem needs pictures the Report does not carry (ring order, hops, init
timings), so :func:`analyze_with_figures` runs the pipeline itself, keeps the model,
and reduces it to a plain-dict "figures" payload; the renderers stay pure.
"""
from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from . import cli_analyze
from .cli import UserError, _guard, main
from .exitcodes import EXIT_FINDINGS, EXIT_OK

# --------------------------------------------------------------------------- figures


def _ts_seconds(ts: str | None) -> float | None:
    """Seconds of a log timestamp (absolute or time-of-day), None when unparseable."""
    if not ts:
        return None
    t = ts.strip().strip("[]")
    try:
        return float(t)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(t.replace(",", ".").replace("Z", "+00:00")).timestamp()
    except ValueError:
        pass
    for fmt in ("%Y-%b-%d %H:%M:%S.%f", "%Y-%b-%d %H:%M:%S", "%H:%M:%S.%f", "%H:%M:%S"):
        try:
            d = datetime.strptime(t, fmt)
        except ValueError:
            continue
        if d.year == 1900:
            return d.hour * 3600 + d.minute * 60 + d.second + d.microsecond / 1e6
        return d.timestamp()
    return None


def build_figures(model: Any, max_comms: int = 4) -> dict[str, Any]:
    """Plain-dict payload for the pictures: rings/hops per communicator, init per rank.

    ``comms``: the largest communicators first, each with ``key``, ``nranks``,
    ``ranks``, ``rank_host`` (rank -> host), ``rings`` ([channel, order] pairs),
    ``hops`` (src, dst, transport label, net, gdr, channels) and ``truncated``.
    ``init``: one row per rank of the largest communicator with timings or
    timestamps: ``rank``, ``host``, ``offset``/``duration`` in seconds (from
    Init START/COMPLETE timestamps when both parse, else offset 0 and the
    ``Init timings`` total), ``phases`` ([name, seconds]) and ``source``.
    """
    comms = sorted((c for c in model.comms.values() if c.key != "unknown" and (c.ranks or c.rings)),
                   key=lambda c: (-(c.nranks or len(c.ranks)), c.key))
    out_comms = []
    for c in comms[:max_comms]:
        out_comms.append({
            "key": c.key,
            "nranks": c.nranks,
            "ranks": sorted(c.ranks),
            "rank_host": {str(r): st.host for r, st in sorted(c.ranks.items()) if st.host},
            "rings": [[ch, list(order)] for ch, order in sorted(c.rings.items())],
            "hops": [{"src": s, "dst": d, "transport": h[0], "net": h[1], "gdr": bool(h[2]), "channels": h[3]}
                     for (s, d), h in sorted(c.hops.items())],
            "truncated": bool(c.ring_truncated),
        })
    init: list[dict[str, Any]] = []
    timed = [c for c in comms if any(st.timings or (st.start and st.complete) for st in c.ranks.values())]
    if timed:
        c = timed[0]
        rows = []
        for r, st in sorted(c.ranks.items()):
            t0 = _ts_seconds(st.start.ts) if st.start else None
            t1 = _ts_seconds(st.complete.ts) if st.complete else None
            phases = [[name, float(v)] for name, v in (st.timings.phases if st.timings else ())]
            row: dict[str, Any] = {"comm": c.key, "rank": r, "host": st.host, "phases": phases,
                                   "offset": None, "duration": None, "source": None}
            if t0 is not None and t1 is not None and t1 >= t0:
                row.update(offset=t0, duration=round(t1 - t0, 6), source="timestamps")
                if phases and abs(sum(p[1] for p in phases) - (t1 - t0)) > max(1.0, 0.2 * (t1 - t0)):
                    row["phases"] = []  # phases would not fit the measured bar
            elif st.timings is not None and st.timings.total is not None:
                row.update(offset=0.0, duration=float(st.timings.total), source="timings")
            rows.append(row)
        starts = [r["offset"] for r in rows if r["source"] == "timestamps"]
        base = min(starts) if starts else 0.0
        for r in rows:
            if r["source"] == "timestamps":
                r["offset"] = round(r["offset"] - base, 6)
        init = rows
    return {"comms": out_comms, "init": init}


def analyze_with_figures(paths: list[str], rules: Any = None, cache: bool = True) -> tuple[Any, dict[str, Any], list[Any], int]:
    """Run the pipeline keeping the model: (report, figures, notices, files_read)."""
    from .pipeline import build_model
    from .rules.engine import build_report, load_rules

    if rules is None:
        rules, _ = load_rules()
    model, notices, files_read = build_model(paths, cache)
    report = build_report(model, rules, [n.to_dict() for n in notices])
    return report, build_figures(model), notices, files_read


# --------------------------------------------------------------------------- report


@main.command("report")
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write here; .html/.htm gives HTML, .md/.markdown gives Markdown (default: HTML on stdout).")
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default=None,
              help="Override the format the output suffix implies.")
@click.option("--redact", is_flag=True, help="Replace hostnames, IPs, GIDs, user names, pod names by placeholders.")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable), used with the shipped pack.")
@click.option("--keep-going", is_flag=True, help="Skip malformed rule files instead of stopping.")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error", "never"]), default="never",
              show_default=True, help="Exit 1 when a finding at or above this severity exists.")
@_guard
def report_cmd(paths: tuple[str, ...], output: str | None, fmt: str | None, redact: bool, rule_dirs: tuple[str, ...],
               keep_going: bool, fail_on: str) -> None:
    """Write a post-mortem of the job that wrote PATHS: verdict, findings, summary, topology, init timeline."""
    from .renderers import render

    if fmt is None:
        suffix = Path(output).suffix.lower() if output else ".html"
        fmt = "markdown" if suffix in (".md", ".markdown") else "html"
    rules = cli_analyze._load(rule_dirs, keep_going)
    report, figures, notices, files_read = analyze_with_figures(list(paths), rules)
    for n in notices:
        click.echo(f"ncclsleuth: {n.path}: {n.message}", err=True)
    if not files_read:
        raise UserError("nothing could be analysed: no readable log in the given paths")
    if redact:
        from .redact import redact as do_redact
        from .redact import redact_figures, redactor_for

        r = redactor_for(report)
        figures = redact_figures(figures, r)  # collect the figures' identifiers before applying
        report = do_redact(report, r)
    if fmt == "markdown":
        text = render("markdown", report, postmortem=True, figures=figures)
    else:
        text = render("html", report, figures=figures)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"ncclsleuth: wrote {output}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))
    _exit_for(report, fail_on)


def _exit_for(report: Any, fail_on: str) -> None:
    from .rules.schema import Severity

    if fail_on != "never":
        threshold = Severity.parse(fail_on)
        if any(Severity.parse(f.severity) >= threshold for f in report.findings):
            sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


# --------------------------------------------------------------------------- serve


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback by default; the API has no authentication).")
@click.option("--port", default=8080, show_default=True, type=int)
@click.option("--max-bytes", default=50 * 1024 * 1024, show_default=True, type=int,
              help="Largest request body (and decompressed body) accepted; larger gets 413.")
@click.option("--timeout", "timeout_s", default=60.0, show_default=True, type=float,
              help="Seconds one analysis may take; longer gets 504.")
@click.option("--workers", default=4, show_default=True, type=int, help="Analyses run at once; more get 503.")
@_guard
def serve_cmd(host: str, port: int, max_bytes: int, timeout_s: float, workers: int) -> None:
    """Serve the analyzer over HTTP: POST /analyze, GET /rules, GET /healthz."""
    from .serve import make_server

    srv = make_server(host, port, max_bytes=max_bytes, timeout_s=timeout_s, workers=workers)
    h, p = srv.server_address[:2]
    click.echo(f"ncclsleuth: serving on http://{h}:{p} (POST /analyze, GET /rules, GET /healthz)", err=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.shutdown_all()
