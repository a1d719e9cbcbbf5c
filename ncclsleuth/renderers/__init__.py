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
