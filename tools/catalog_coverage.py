#!/usr/bin/env python3
"""What ncclsleuth makes of every message of a catalog: each one filled with values and
analysed on its own, one file per message, as a user would feed it.

    python tools/catalog_coverage.py [--torch] [--limit N] [--show unexplained|fallback|lost|specific]
                                     [--json out.json]

``nccl`` (default): every NCCL core WARN format of every release
(../shared/reference/nccl/messages.tsv, level WARN, files under src/, macro templates left
out: their expansions are rows of their own), printed with NCCL's WARN prefix.
``--torch``: every error/exception message of the PyTorch catalog
(ncclsleuth/parse/data/torch_formats.tsv), printed with the prefix it really carries in
the newest release that prints it (c10 glog ``[rank0]:[E1206 18:44:12.715298746
ProcessGroupNCCL.cpp:607] ``, c10d's ``[c10d] ``, torchelastic's logging, ``[rank0]:
torch.distributed.DistBackendError: `` for exceptions; see the PFX-* rows).

Reports per message what the report did with its line: evidence of a specific rule (or
explained by one), only of the fallback rule, listed as unexplained, or lost (absent from
the report: a bug).  Runs through ``ncclsleuth.api`` in this process (the rule pack
loaded once); ``tests/test_catalog_coverage.py`` runs it over both catalogs.
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT.parent / "shared" / "reference" / "nccl" / "messages.tsv"
TORCH = ROOT / "ncclsleuth" / "parse" / "data" / "torch_formats.tsv"
#: rules that explain any WARN without knowing what it means
FALLBACK_RULES = frozenset({"MSG000"})
OUTCOMES = ("specific", "fallback", "unexplained", "lost")

_CONV = re.compile(r"%(%|[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|t|j|L)?([diuxXpfgeEcsm]))")
_TEMPLATE = re.compile(r"\{[^{}]*\}")
_VALUES = {"d": "3", "i": "3", "u": "3", "x": "1f", "X": "1F", "p": "0x7f3a2c001000", "f": "1.5", "g": "1.5",
           "e": "1.5e+00", "E": "1.5E+00", "c": "c", "s": "val", "m": "val"}


# --------------------------------------------------------------------------- NCCL core WARNs
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
    """The NCCL core WARN call sites: one row per (file, format)."""
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


def nccl_cases(limit: int = 0) -> list[tuple[dict[str, str], str]]:
    """(row, log text) of every NCCL core WARN format."""
    return [(r, warn_line(r, fill(r["format"]), n) + "\n") for n, r in enumerate(scope()[: limit or None])]


# --------------------------------------------------------------------------- PyTorch messages
#: message fragments and block lines that are never printed as a line of their own
#: (parts of NCCL-ERR, of the desync report, of the ChildFailedError block, prefixes)
_TORCH_PARTS = re.compile(r"detail text|detail suffix|nccl_error_string|part of desync report|operator<<|"
                          r"ChildFailedError (?:message|per-failure|title|traceback)|traceback field|prefix")
_TORCH_ERROR = re.compile(r"ERROR|FATAL|Error\b|Exception|logger\.(?:error|exception)|exception|TORCH_CHECK|"
                          r"TORCH_INTERNAL_ASSERT|abort reason|DistBackendError")
#: placeholder -> value (by name; unnamed ones are numbers)
_TORCH_VALUES = {
    "work": "WorkNCCL(SeqNum=1245, OpType=ALLREDUCE, NumelIn=26214400, NumelOut=26214400, Timeout(ms)=600000)",
    "pg_prefix": "[PG ID 0 PG GUID 0(default_pg) Rank 3] ", "prefix": "[PG ID 0 PG GUID 0(default_pg) Rank 3] ",
    "host": "node0", "hostname": "node0", "addr": "[node0]:29500", "err": "(errno: 98 - Address already in use)",
    "errors": "[node0]:29500 (errno: 111 - Connection refused)", "timeout": "0:30:00", "key": "/default_pg//cuda//0",
    "reason": "collective timeout or exception", "what": "NCCL communicator was aborted", "source": "rank 0",
    "target": "/tmp/nccl_trace_rank_3", "filename": "/tmp/nccl_trace_rank_3", "binary": "/usr/bin/python3",
    "signame": "SIGTERM", "SIGNAME": "SIGTERM", "signal": "SIGTERM", "strerror": "Connection reset by peer",
    "nccl_error_string": "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "file": "ProcessGroupNCCL.cpp", "op_type": "ALLREDUCE", "socket": "[node0]:29500", "role": "default",
    "run_id": "job-4711", "node": "node0_123_0", "ranks": "5", "state": "FAILED", "remaining": "2", "max": "3",
    "boarder": "=" * 60, "name": "train.py", "MatchState": "SIZE_OR_SYNTAX_MISMATCH", "detail": "sizes differ",
    "ncclGetLastError": "socketStartConnect: Connect to 10.0.0.2<43527> failed : Connection refused",
    "major.minor.patch[suffix]": "2.21.5", "python_and_cpp_stack": "#0 all_reduce from train.py:212",
}
_TORCH_EXC_MODULE = {"DistBackendError": "torch.distributed.", "DistStoreError": "torch.distributed.",
                     "DistNetworkError": "torch.distributed.", "SignalException":
                     "torch.distributed.elastic.multiprocessing.api.", "ChildFailedError":
                     "torch.distributed.elastic.multiprocessing.errors."}
_EXC_IN_KIND = re.compile(r"\b(\w*(?:Error|Exception))\b")


def torch_scope() -> list[dict[str, str]]:
    """The PyTorch catalog's error and exception messages (not INFO/WARNING lines, not fragments)."""
    with open(TORCH, newline="") as fh:
        rd = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        return [r for r in rd if not r["id"].startswith("PFX-") and _TORCH_ERROR.search(r["kind"])
                and not _TORCH_PARTS.search(r["kind"])]


def torch_fill(fmt: str) -> str:
    """A PyTorch message with its placeholders filled (``{}``, ``{name}``, ``${name}``)."""

    def value(m: re.Match[str]) -> str:
        name = m.group(1).strip("$")
        return _TORCH_VALUES.get(name, "3" if not name or name in ("seq", "rank", "pid", "port", "line") or "+" in name
                                 else "3" if re.fullmatch(r"\w*(?:rank|size|seq|id|idx|pid|num|exitcode)\w*", name)
                                 else "val")

    msg = re.sub(r"\$?\{([^{}]*)\}", value, fmt)
    return msg.replace("\\\\n", "\n").replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').strip("\n")


def _release(tag: str) -> tuple[int, int]:
    m = re.match(r"v(\d+)\.(\d+)", tag)
    return (int(m.group(1)), int(m.group(2))) if m else (2, 15)


#: (first release, prefix) of torchelastic's Python logging (PFX-PY-*: glog style from 2.3,
#: TorchLogsFormatter 2.1..2.2, logging.BASIC_FORMAT before) and of c10 LOG (PFX-CPP-*)
_PY_PREFIX = (((2, 3), "E1129 11:41:58.017000 48211 {path}:869] "),
              ((2, 1), "[2024-02-09 09:09:15,164] {logger}: [ERROR] "), ((0, 0), "ERROR:{logger}:"))
_CPP_PREFIX = (((2, 4), "[rank3]:[{lvl}1206 18:44:12.715298746 {src}:607] "), ((2, 2), "[rank3]:[{lvl} {src}:607] "),
               ((0, 0), "[{lvl} {src}:607] "))


def _prefix(table: tuple[tuple[tuple[int, int], str], ...], newest: tuple[int, int], **values: str) -> str:
    return next(fmt for first, fmt in table if newest >= first).format(**values)


def torch_line(row: dict[str, str], msg: str) -> str:
    """``msg`` with the prefix it carries in the newest release that prints it."""
    kind, newest = row["kind"], _release(row["last_tag"])
    first, _, rest = msg.partition("\n")
    exc = _EXC_IN_KIND.search(kind)
    if exc is not None and not re.search(r"LOG\(|logger\.|C10D_", kind.split(";")[0]):
        name = exc.group(1)
        module = _TORCH_EXC_MODULE.get(name, "torch.distributed.elastic.rendezvous.api."
                                       if name.startswith("Rendezvous") else "")
        head = f"[rank3]: {module}{name}" + (f": {first}" if first else "")  # Python prints no ':' for no text
    elif "logger." in kind:
        paths = re.findall(r"[\w/]+\.py\b", row["source_file"])
        path = paths[-1] if paths else "torch/distributed/run.py"
        logger = path.removesuffix(".py").replace("/", ".")
        head = _prefix(_PY_PREFIX, newest, path=path, logger=logger) + first
    else:
        files = re.findall(r"(\w+\.(?:cpp|hpp|h))\b", row["source_file"])
        src = files[0] if files else "ProcessGroupNCCL.cpp"
        lvl = "F" if "FATAL" in kind else "E"
        head = _prefix(_CPP_PREFIX, newest, lvl=lvl, src=src) + ("[c10d] " if "C10D_" in kind else "") + first
    return head + ("\n" + rest if rest else "")


def torch_cases(limit: int = 0) -> list[tuple[dict[str, str], str]]:
    """(row, log text) of every PyTorch error/exception message."""
    return [(r, torch_line(r, torch_fill(r["format"])) + "\n") for r in torch_scope()[: limit or None]]


# --------------------------------------------------------------------------- analysis
def classify(report: Any, path: str) -> tuple[str, str | None]:
    """(outcome, rule id) of line 1 of ``path`` in a :class:`~ncclsleuth.report.Report`."""
    for f in report.findings:
        if (path, 1) in f.explained or any((e.file, e.line) == (path, 1) for e in f.evidence):
            return ("fallback" if f.rule_id in FALLBACK_RULES else "specific"), f.rule_id
    if any((e.file, e.line) == (path, 1) for e in report.unexplained):
        return "unexplained", None
    return "lost", None


def analyse(cases: Iterable[tuple[dict[str, str], str]], label: Callable[[dict[str, str]], str]
            ) -> list[dict[str, Any]]:
    """Each case analysed on its own, in process: one report per message."""
    from ncclsleuth import api

    rules = api.load_rules(api.Options())
    opts = api.Options(rules=rules, cache=False)
    out = []
    for n, (row, text) in enumerate(cases):
        path = f"m{n}.log"
        report = api.analyze(api.memory_sources({path: text}), opts)
        outcome, rule = classify(report, path)
        first = next((f for f in report.findings if f.severity in ("error", "warning")), None)
        out.append({"id": label(row), "format": row["format"], "line": text.split("\n", 1)[0],
                    "outcome": outcome, "rule": rule,
                    # the verdict: the first finding of severity warning or above
                    "first_rule": first.rule_id if first else None, "first_category": first.category if first else None})
    return out


@lru_cache(maxsize=2)
def nccl_results(limit: int = 0) -> list[dict[str, Any]]:
    """Every NCCL core WARN analysed alone (cached: tests of coverage and of readings share one run)."""
    return analyse(nccl_cases(limit), lambda r: r["file"])


@lru_cache(maxsize=2)
def torch_results(limit: int = 0) -> list[dict[str, Any]]:
    return analyse(torch_cases(limit), lambda r: r["id"])


def summary(results: list[dict[str, Any]]) -> str:
    counts = Counter(r["outcome"] for r in results)
    by_rule = Counter(r["rule"] for r in results if r["rule"])
    total = len(results)
    lines = [f"{k:12} {counts[k]:5}  {100 * counts[k] / max(total, 1):5.1f}%" for k in OUTCOMES]
    lines.append(f"{'total':12} {total:5}")
    lines.append("rules: " + ", ".join(f"{r} {c}" for r, c in by_rule.most_common(25)))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch", action="store_true", help="the PyTorch catalog instead of NCCL's")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--show", choices=list(OUTCOMES), action="append", default=[])
    ap.add_argument("--json", help="write every row's outcome here")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    results = torch_results(args.limit) if args.torch else nccl_results(args.limit)
    for r in results:
        if r["outcome"] in args.show:
            print(f"{r['outcome']:11} {r['rule'] or '-':10} {r['id']:32} {r['line'][:140]}")
    print(summary(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0 if not any(r["outcome"] == "lost" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
