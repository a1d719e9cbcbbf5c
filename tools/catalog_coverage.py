#!/usr/bin/env python3
"""What ncclsleuth makes of every NCCL core WARN format: each one filled with values and
analysed on its own, one file per message, as a user would feed it.

    python tools/catalog_coverage.py [--limit N] [--show unexplained|fallback|lost] [--json out.json]

Reports per call site (file, format) what the report did with the line: evidence of a
specific rule, only of the fallback rule, listed as unexplained, or lost (absent from the
report: a bug).  The catalog is ../shared/reference/nccl/messages.tsv (level WARN, files
under src/, macro templates left out: their expansions are rows of their own).
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT.parent / "shared" / "reference" / "nccl" / "messages.tsv"
#: rules that explain any WARN without knowing what it means
FALLBACK_RULES = frozenset({"MSG000"})

_CONV = re.compile(r"%(%|[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|t|j|L)?([diuxXpfgeEcsm]))")
_TEMPLATE = re.compile(r"\{[^{}]*\}")
_VALUES = {"d": "3", "i": "3", "u": "3", "x": "1f", "X": "1F", "p": "0x7f3a2c001000", "f": "1.5", "g": "1.5",
           "e": "1.5e+00", "E": "1.5E+00", "c": "c", "s": "val", "m": "val"}


def fill(fmt: str) -> str:
    """A message as NCCL would print it from ``fmt``: conversions and macro parameters
    replaced by plausible values, C escapes decoded (an inner ``\\n`` starts a new line)."""
    msg = _TEMPLATE.sub("val", fmt)

    def conv(m: re.Match[str]) -> str:
        return "%" if m.group(1) == "%" else _VALUES[m.group(2)]

    msg = _CONV.sub(conv, msg)
    msg = msg.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\\\", "\\")
    return msg.strip("\n")


def warn_line(row: dict[str, str], msg: str, n: int) -> str:
    """The WARN line of ``row``: the classic prefix, ``FILE:LINE`` relative to src/."""
    rel = row["file"][4:] if row["file"].startswith("src/") else row["file"]
    line = (row["lines_in_last_tag"].split(",")[0] or "100").strip() or "100"
    return f"node{n % 4:02d}:{4000 + n}:{4100 + n} [0] {rel}:{line} NCCL WARN {msg}"


def scope() -> list[dict[str, str]]:
    csv.field_size_limit(1 << 24)
    seen: set[tuple[str, str]] = set()
    out = []
    with open(REF, newline="") as fh:
        for r in csv.DictReader(fh, delimiter="\t"):
            if r["level"] == "WARN" and r["file"].startswith("src/") and r["origin"] != "macro-template":
                key = (r["file"], r["format"])
                if key not in seen:
                    seen.add(key)
                    out.append(r)
    return out


def classify(report: dict, path: str) -> tuple[str, str | None]:  # type: ignore[type-arg]
    """(outcome, rule id) of line 1 of ``path`` in a JSON report."""
    for f in report.get("findings", []):
        lines = {(e["file"], e["line"]) for e in f.get("evidence", [])}
        lines |= {(file, n) for file, ns in f.get("explained_lines", {}).items() for n in ns}
        if (path, 1) in lines:
            return ("fallback" if f["rule_id"] in FALLBACK_RULES else "specific"), f["rule_id"]
    if any((e["file"], e["line"]) == (path, 1) for e in report.get("unexplained", [])):
        return "unexplained", None
    return "lost", None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--show", choices=["unexplained", "fallback", "lost", "specific"], action="append", default=[])
    ap.add_argument("--json", help="write every row's outcome here")
    args = ap.parse_args()
    from click.testing import CliRunner

    from ncclsleuth.cli import main as cli

    rows = scope()[: args.limit or None]
    runner = CliRunner()
    outcomes: Counter[str] = Counter()
    by_rule: Counter[str] = Counter()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, row in enumerate(rows):
            path = str(Path(tmp) / f"w{n}.log")
            Path(path).write_text(warn_line(row, fill(row["format"]), n) + "\n", encoding="utf-8")
            res = runner.invoke(cli, ["analyze", path, "--format", "json", "--fail-on", "never", "--no-cache"])
            try:
                report = json.loads(res.stdout)
            except ValueError:
                outcome, rule = "crash", None
            else:
                outcome, rule = classify(report, path)
            outcomes[outcome] += 1
            if rule:
                by_rule[rule] += 1
            results.append({"file": row["file"], "format": row["format"], "outcome": outcome, "rule": rule})
            if outcome in args.show:
                print(f"{outcome:11} {rule or '-':10} {row['file']:32} {row['format'][:100]}")
    total = len(rows)
    for k in ("specific", "fallback", "unexplained", "lost", "crash"):
        print(f"{k:12} {outcomes[k]:5}  {100 * outcomes[k] / max(total, 1):5.1f}%")
    print(f"{'total':12} {total:5}")
    print("rules:", ", ".join(f"{r} {c}" for r, c in by_rule.most_common(25)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0 if not outcomes["lost"] and not outcomes["crash"] else 1


if __name__ == "__main__":
    sys.exit(main())
