"""Shared by the tests that run every catalog message through ncclsleuth: the one loaded copy
of ``tools/catalog_coverage.py`` (its message filling and its per-message analysis, whose
results are cached, so the analysis of every NCCL WARN runs once per test session), and the
package's own NCCL format table."""
from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ncclsleuth.knowledge.identify import TORCH_FORMATS

TOOL = Path(__file__).resolve().parent.parent / "tools" / "catalog_coverage.py"
NCCL_FORMATS = TORCH_FORMATS.with_name("nccl_formats.tsv")


def coverage_tool() -> ModuleType:
    """tools/catalog_coverage.py, loaded once."""
    mod = sys.modules.get("catalog_coverage")
    if mod is None:
        spec = importlib.util.spec_from_file_location("catalog_coverage", TOOL)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["catalog_coverage"] = mod
        spec.loader.exec_module(mod)
    return mod


def package_formats(level: str) -> list[str]:
    """The distinct formats of one level in parse/data/nccl_formats.tsv (2.3-2.30)."""
    with open(NCCL_FORMATS, newline="") as fh:
        rd = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        return sorted({r["format"] for r in rd if r["level"] == level})
