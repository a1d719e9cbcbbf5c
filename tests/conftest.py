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


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def require_shared(path: Path, what: str) -> Path:
    """``path`` of the shared data beside the checkout; missing: skip on a workstation, but
    fail when CI runs (``CI=true``), where a check that silently shrinks is no check."""
    if not path.exists():
        if in_ci():
            pytest.fail(f"CI=true but {what} is not at {path}")
        pytest.skip(f"{what} is not at {path} (a CI run fails here)")
    return path


@pytest.fixture
def corpus() -> Path:
    return require_shared(CORPUS, "the shared corpus")
