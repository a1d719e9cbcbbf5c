"""Real log lines for fuzzing and invariants: fixtures/ and the shared corpus (when present)."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"


#: the folders of real (and realistic) logs: every fixture folder of logs, the shared corpus
LOG_DIRS = (FIXTURES / "corpus", FIXTURES / "examples", FIXTURES / "report", FIXTURES / "real", FIXTURES / "healthy",
            FIXTURES / "diff", CORPUS / "cases", CORPUS / "healthy")


def log_files() -> list[Path]:
    """Every log under the fixtures' log folders and the shared corpus, sorted."""
    out: list[Path] = []
    for base in LOG_DIRS:
        if not base.is_dir():
            continue
        for dirpath, _, names in os.walk(base):
            for n in names:
                if n.endswith((".log", ".txt")) and n not in ("README.md",):
                    out.append(Path(dirpath) / n)
    return sorted(out)


@lru_cache(maxsize=1)
def lines() -> tuple[bytes, ...]:
    """Distinct non-empty lines of all logs (bytes, without the newline)."""
    seen: dict[bytes, None] = {}
    for p in log_files():
        for ln in p.read_bytes().splitlines():
            if ln.strip():
                seen.setdefault(ln, None)
    return tuple(seen)
