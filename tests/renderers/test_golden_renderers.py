"""Golden files for every renderer on a fixed Report; UPDATE_GOLDEN=1 rewrites them."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _fixed import fixed_figures, fixed_report  # noqa: E402

from ncclsleuth.renderers import RENDERERS, render  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"

CASES = {
    "terminal.txt": lambda: render("terminal", fixed_report(), color=False, width=100),
    "terminal_piped.txt": lambda: render("terminal", fixed_report(), color=False),
    "json.json": lambda: render("json", fixed_report()),
    "markdown.md": lambda: render("markdown", fixed_report()),
    "markdown_short.md": lambda: render("markdown", fixed_report(), max_chars=700),
    "markdown_postmortem.md": lambda: render("markdown", fixed_report(), postmortem=True, figures=fixed_figures()),
    "slack.json": lambda: render("slack", fixed_report()),
    "html.html": lambda: render("html", fixed_report(), figures=fixed_figures()),
    "html_nofigures.html": lambda: render("html", fixed_report()),
}


def test_every_renderer_has_a_golden() -> None:
    covered = {name.split(".")[0].split("_")[0] for name in CASES}
    assert set(RENDERERS) <= covered


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    text = CASES[name]()
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; if intended: UPDATE_GOLDEN=1 pytest {__file__}"


def test_renderers_are_pure() -> None:
    """Rendering twice gives the same text and leaves the Report untouched."""
    rep = fixed_report()
    before = rep.to_dict()
    for fmt in RENDERERS:
        assert render(fmt, rep) == render(fmt, rep)
    assert rep.to_dict() == before
