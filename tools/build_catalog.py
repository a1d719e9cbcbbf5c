#!/usr/bin/env python3
"""Build ncclsleuth/parse/data/nccl_formats.tsv from ../shared/reference/nccl/messages.tsv.

The shipped catalog keeps one row per distinct (level, format): an id, the level, the
canonical subsystem, the format, and the first/last release tags.  The reference TSV
is not shipped with the package, so this script is how the data is refreshed:

    python tools/build_catalog.py [path/to/messages.tsv]
"""
from __future__ import annotations

import csv
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared/reference/nccl/messages.tsv"
DST = ROOT / "ncclsleuth/parse/data/nccl_formats.tsv"


def main() -> None:
    csv.field_size_limit(1 << 24)
    seen: dict[tuple[str, str], list[str]] = {}
    with open(SRC, newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["origin"] == "macro-template":
                continue
            fmt = row["format"]
            key = (row["level"], fmt)
            if key in seen:
                continue
            digest = hashlib.sha1(f"{row['level']}\t{fmt}".encode()).hexdigest()[:8]
            seen[key] = [f"NCCL-{row['level'][0]}-{digest}", row["level"], row["subsys_canon"] or row["subsys"],
                         fmt, row["first_tag"], row["last_tag"]]
    DST.parent.mkdir(parents=True, exist_ok=True)
    with open(DST, "w", newline="") as out:
        w = csv.writer(out, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
        w.writerow(["id", "level", "subsys", "format", "first_tag", "last_tag"])
        for r in sorted(seen.values(), key=lambda r: r[0]):
            w.writerow(r)
    print(f"{len(seen)} formats -> {DST}")


if __name__ == "__main__":
    main()
