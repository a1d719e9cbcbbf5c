"""Shared test helpers: paths to the repo, fixtures and the shared corpus."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# A cache folder of this test session's own (Lark's grammar cache, the template store):
# results never depend on what an earlier run left in ~/.cache.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ncclsleuth-test-cache-")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.exists():
        pytest.skip("../shared/corpus is not beside this checkout")
    return CORPUS
