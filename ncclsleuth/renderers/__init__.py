"""Renderers: pure functions from a :class:`~ncclsleuth.report.Report` to text.

One module per format; each exposes ``render(report, color=False) -> str``.  The
registry below feeds click's ``--format`` choices.  Modules are imported only when
used, so start-up stays light.
"""
from __future__ import annotations

import importlib
from typing import Any

RENDERERS = {
    "terminal": "ncclsleuth.renderers.terminal",
    "json": "ncclsleuth.renderers.json_out",
    "markdown": "ncclsleuth.renderers.markdown",
    "slack": "ncclsleuth.renderers.slack",
    "html": "ncclsleuth.renderers.html",
}


def render(fmt: str, report: Any, color: bool = False, **opts: Any) -> str:
    mod = importlib.import_module(RENDERERS[fmt])
    return mod.render(report, color=color, **opts)


def host_runs(order: list[int], rank_host: dict[int, str]) -> list[tuple[str, list[int]]]:
    """Consecutive ranks of a ring on the same host, in ring order: [(host, [ranks]), ...]."""
    groups: list[tuple[str, list[int]]] = []
    for r in order:
        h = rank_host.get(r, "?")
        if groups and groups[-1][0] == h:
            groups[-1][1].append(r)
        else:
            groups.append((h, [r]))
    return groups
