"""Shared test helpers: paths to the repo, fixtures and the shared corpus."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.exists():
        pytest.skip("../shared/corpus is not beside this checkout")
    return CORPUS
