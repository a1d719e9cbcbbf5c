#!/usr/bin/env python3
"""Build the shipped message catalogs from the reference data in ../shared/reference.

``ncclsleuth/parse/data/nccl_formats.tsv`` keeps one row per distinct (level, format) of
NCCL: an id, the level, the canonical subsystem, the format, the first/last release tags,
and the call sites (``file:line@first..last``, space-separated: the same format can be
printed from several files, and the knowledge base's meaning can depend on which).
``torch_formats.tsv`` keeps the PyTorch catalog's id, component, source file, kind,
format and release range.  The reference TSVs are not shipped with the package, so this
script is how the data is refreshed:

    python tools/build_catalog.py [path/to/shared/reference]
"""
from __future__ import annotations

import csv
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REF = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared/reference"
DATA = ROOT / "ncclsleuth/parse/data"


def _write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with open(path, "w", newline="") as out:
        w = csv.writer(out, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
        w.writerow(header)
        w.writerows(rows)
    print(f"{len(rows)} formats -> {path}")


def nccl() -> None:
    seen: dict[tuple[str, str], list[str]] = {}
    sites: dict[tuple[str, str], dict[str, list[str]]] = {}
    with open(REF / "nccl/messages.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["origin"] == "macro-template":
                continue
            fmt = row["format"]
            key = (row["level"], fmt)
            line = (row["lines_in_last_tag"] or "").split(",")[0].strip()
            site = sites.setdefault(key, {})
            if row["file"] in site:  # the same file again (a direct call and a macro): widen its range
                old = site[row["file"]]
                old[1], old[2] = min(old[1], row["first_tag"], key=_tag), max(old[2], row["last_tag"], key=_tag)
            else:
                site[row["file"]] = [line, row["first_tag"], row["last_tag"]]
            if key in seen:
                continue
            digest = hashlib.sha1(f"{row['level']}\t{fmt}".encode()).hexdigest()[:8]
            seen[key] = [f"NCCL-{row['level'][0]}-{digest}", row["level"], row["subsys_canon"] or row["subsys"],
                         fmt, row["first_tag"], row["last_tag"]]
    for key, r in seen.items():
        r.append(" ".join(f"{f}:{ln}@{a}..{b}" for f, (ln, a, b) in sorted(sites[key].items())))
    _write(DATA / "nccl_formats.tsv", ["id", "level", "subsys", "format", "first_tag", "last_tag", "sites"],
           sorted(seen.values(), key=lambda r: r[0]))


def torch() -> None:
    with open(REF / "torch/messages.tsv", newline="") as fh:
        rows = [[r["id"], r["component"], r["source_file"], r["level_or_exception"], r["message_format"],
                 r["first_tag"], r["last_tag"]] for r in csv.DictReader(fh, delimiter="\t")]
    _write(DATA / "torch_formats.tsv", ["id", "component", "source_file", "kind", "format", "first_tag", "last_tag"],
           rows)


def _tag(tag: str) -> tuple[int, ...]:
    return tuple(int(x) for x in tag.lstrip("v").replace("-", ".").split(".") if x.isdigit())


def main() -> None:
    csv.field_size_limit(1 << 24)
    DATA.mkdir(parents=True, exist_ok=True)
    nccl()
    torch()


if __name__ == "__main__":
    main()
