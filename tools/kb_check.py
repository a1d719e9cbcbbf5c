#!/usr/bin/env python3
"""Validate the knowledge base (knowledge/**/*.yaml) and report what it does not cover yet.

    python tools/kb_check.py                       # validate every file; coverage summary
    python tools/kb_check.py --group ib --missing  # the NCCL WARN rows of one work group not yet covered
    python tools/kb_check.py --group ib --todo     # the same, as TSV with source lines (for the work)

Coverage is over the NCCL core WARN call sites of the reference catalog
(../shared/reference/nccl/messages.tsv, level WARN, files under src/, macro templates left out:
their expansions are rows of their own): one (file, format) pair each.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import re
import sys
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT.parent / "shared" / "reference"
KB = ROOT / "knowledge"

ROLES = {"cause", "symptom", "context", "benign", "unknown"}
SEVERITIES = {"error", "warning", "info"}
CATEGORIES = {
    "wrong_interface", "socket_fallback", "roce_gid", "ib_link_error", "network_blocked",
    "rendezvous_misconfig", "collective_desync", "collective_timeout", "duplicate_gpu", "shm_limit",
    "ulimit", "p2p_topology", "cuda_oom", "version_mismatch", "gdr_peermem", "hardware_fault", "other",
    "slow_init", "straggler", "low_bandwidth", "config_inconsistency", "bogus_setting", "topology_file",
    "app_crash", "peer_failure", "invalid_usage", "host_oom", "cuda_error", "net_plugin", "nccl_internal",
}
SUBSYSTEMS = {
    "bootstrap", "socket", "ib", "net", "net_plugin", "proxy", "shm", "p2p", "nvls", "collnet", "cuda",
    "nvml", "gdr", "topology", "graph", "tuning", "init", "enqueue", "group", "argcheck", "alloc",
    "register", "ras", "env", "os", "gin", "rma", "profiler", "tuner", "mnnvl", "debug", "watchdog",
    "store", "rendezvous", "elastic", "flight_recorder", "gloo", "ofi", "rccl", "nccl_tests", "kernel",
    "driver",
}
SOURCES = {"nccl", "torch", "gloo", "aws-ofi-nccl", "rccl", "nccl-tests", "system"}
FILE_KEYS = {"source", "area", "description", "entries"}
ENTRY_KEYS = {"id", "format", "files", "function", "subsystem", "role", "category", "severity", "meaning",
              "why", "fix", "ref", "context", "example"}
REQUIRED = ("id", "format", "function", "subsystem", "role", "severity", "meaning", "why", "fix", "ref")
CONTEXT_KEYS = {"when", "role", "category", "severity", "meaning", "fix"}
WHEN_KEYS = {"message", "phase", "file"}

# Work groups of the NCCL core WARN rows: first matching pattern on the file path wins.
GROUPS = {
    "ib": r"net_ib|ibvwrap|ibvcore|ibvsymbols|mlx5|gdaki|/ibv",
    "proxy_os": r"proxy|/rma/|/gin/|/os/(?!linux_ipcsocket|windows_ipcsocket|linux_socket_pair|windows_socket_pair)"
                r"|/ras/|plugin/gin|plugin/rma|plugin/profiler|misc/profiler|misc/tuner|mnnvl|include/core\.h"
                r"|misc/rings|include/nvlink\.h|include/utils\.h|include/topo\.h|misc/topo\.cc|transport/net\.cu",
    "socket_bootstrap": r"socket|bootstrap|ipcsocket|net_socket|/net\.cc|plugin/net|misc/utils\.cc|param"
                        r"|shmutils|transport/net\.cc",
    "graph_transport": r"graph/|transport/(p2p|shm|nvls|coll_net|generic)|shm\.h|nvml|cudawrap|gdrwrap|register"
                       r"|checks|alloc",
    "core": r".",
}


def catalog_id(level: str, fmt: str) -> str:
    """The id tools/build_catalog.py gives a (level, format) pair."""
    return f"NCCL-{level[0]}-" + hashlib.sha1(f"{level}\t{fmt}".encode()).hexdigest()[:8]


def group_of(path: str) -> str:
    for name, rx in GROUPS.items():
        if re.search(rx, path):
            return name
    return "core"


def nccl_rows() -> list[dict[str, str]]:
    csv.field_size_limit(1 << 24)
    with open(REF / "nccl" / "messages.tsv", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def nccl_scope(rows: list[dict[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
    """(file, catalog id) -> row, for the core WARN call sites."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for r in rows:
        if r["level"] == "WARN" and r["file"].startswith("src/") and r["origin"] != "macro-template":
            out.setdefault((r["file"], catalog_id("WARN", r["format"])), r)
    return out


def torch_ids() -> dict[str, str]:
    with open(REF / "torch" / "messages.tsv", newline="") as fh:
        return {r["id"]: r["message_format"] for r in csv.DictReader(fh, delimiter="\t")}


class Checker:
    def __init__(self) -> None:
        self.errors: list[str] = []
        rows = nccl_rows()
        self.formats: dict[str, str] = {}
        self.files: dict[str, set[str]] = defaultdict(set)
        for r in rows:
            if r["origin"] == "macro-template":
                continue
            cid = catalog_id(r["level"], r["format"])
            self.formats[cid] = r["format"]
            self.files[cid].add(r["file"])
        self.scope = nccl_scope(rows)
        self.torch = torch_ids()
        self.covered: dict[tuple[str, str], str] = {}
        self.torch_covered: dict[str, str] = {}
        self.entries = 0

    def err(self, where: str, msg: str) -> None:
        self.errors.append(f"{where}: {msg}")

    def check_file(self, path: Path) -> None:
        rel = path.relative_to(ROOT)
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            self.err(str(rel), f"not valid YAML: {exc}")
            return
        if not isinstance(doc, dict):
            self.err(str(rel), "top level must be a mapping")
            return
        for k in set(doc) - FILE_KEYS:
            self.err(str(rel), f"unknown key {k!r}")
        if doc.get("source") not in SOURCES:
            self.err(str(rel), f"source must be one of {sorted(SOURCES)}")
        for i, e in enumerate(doc.get("entries") or []):
            self.check_entry(f"{rel}[{i}]", e, doc.get("source"))

    def check_entry(self, where: str, e: object, source: object) -> None:
        if not isinstance(e, dict):
            self.err(where, "entry must be a mapping")
            return
        self.entries += 1
        where = f"{where} {e.get('id')}"
        for k in set(e) - ENTRY_KEYS:
            self.err(where, f"unknown key {k!r}")
        for k in REQUIRED:
            # fix may be empty; so may a torch format where the catalog's is (an exception raised without text)
            empty_ok = k == "fix" or (k == "format" and source == "torch" and self.torch.get(e.get("id")) == "")
            if k not in e or not isinstance(e[k], str) or (not empty_ok and not e[k].strip()):
                self.err(where, f"{k!r} is required (a non-empty string{'; fix may be empty' if k == 'fix' else ''})")
        self.check_values(where, e)
        for j, c in enumerate(e.get("context") or []):
            cw = f"{where} context[{j}]"
            if not isinstance(c, dict) or not isinstance(c.get("when"), dict):
                self.err(cw, "needs a 'when' mapping")
                continue
            for k in set(c) - CONTEXT_KEYS:
                self.err(cw, f"unknown key {k!r}")
            for k in set(c["when"]) - WHEN_KEYS:
                self.err(cw, f"unknown 'when' key {k!r} (one of {sorted(WHEN_KEYS)})")
            if "message" in c["when"]:
                try:
                    re.compile(c["when"]["message"])
                except re.error as exc:
                    self.err(cw, f"bad regex: {exc}")
            self.check_values(cw, {**e, **c})
        if source == "nccl":
            self.check_nccl(where, e)
        elif source == "torch":
            self.check_torch(where, e)
        elif not re.fullmatch(r"[A-Z][A-Z0-9]+-[A-Za-z0-9_.-]+", str(e.get("id", ""))):
            self.err(where, "an id without a catalog is <SOURCE>-<slug>, e.g. GLOO-enforce-size")

    def check_values(self, where: str, e: dict) -> None:  # type: ignore[type-arg]
        if e.get("role") not in ROLES:
            self.err(where, f"role must be one of {sorted(ROLES)}")
        if e.get("severity") not in SEVERITIES:
            self.err(where, f"severity must be one of {sorted(SEVERITIES)}")
        if e.get("subsystem") not in SUBSYSTEMS:
            self.err(where, f"subsystem {e.get('subsystem')!r} not one of {sorted(SUBSYSTEMS)}")
        cat = e.get("category")
        cats = cat if isinstance(cat, list) else [cat] if cat is not None else []
        if e.get("role") in ("cause", "symptom") and not cats:
            self.err(where, "a cause or symptom needs a category")
        for c in cats:
            if c not in CATEGORIES:
                self.err(where, f"category {c!r} not one of {sorted(CATEGORIES)}")
        if e.get("role") == "cause" and isinstance(cat, list):
            self.err(where, "a cause has one category")
        if e.get("role") == "benign" and e.get("severity") != "info":
            self.err(where, "a benign line has severity info")

    def check_torch(self, where: str, e: dict) -> None:  # type: ignore[type-arg]
        tid = e.get("id")
        if tid not in self.torch:
            # a message the catalog lacks (read from a wheel's strings or a real log): TORCH-<slug>
            if not re.fullmatch(r"TORCH-[a-z0-9][a-z0-9-]+", str(tid)):
                self.err(where, "id not in ../shared/reference/torch/messages.tsv (a message it lacks: TORCH-<slug>)")
            return
        if e.get("format") != self.torch[tid]:
            self.err(where, f"format differs from the catalog's {self.torch[tid]!r}")
        if tid in self.torch_covered:
            self.err(where, f"already covered by {self.torch_covered[tid]}")
        self.torch_covered[tid] = where

    def check_nccl(self, where: str, e: dict) -> None:  # type: ignore[type-arg]
        cid = e.get("id")
        if cid not in self.formats:
            self.err(where, "id not in the NCCL catalog")
            return
        if e.get("format") != self.formats[cid]:
            self.err(where, f"format differs from the catalog's {self.formats[cid]!r}")
        files = e.get("files") or sorted(self.files[cid])
        for f in files:
            if f not in self.files[cid]:
                self.err(where, f"file {f} does not print this format (catalog: {sorted(self.files[cid])})")
                continue
            key = (f, cid)
            if key in self.covered:
                self.err(where, f"{f} already covered by {self.covered[key]}")
            self.covered[key] = where


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--group", choices=sorted(GROUPS))
    ap.add_argument("--missing", action="store_true", help="list uncovered rows")
    ap.add_argument("--todo", action="store_true", help="uncovered rows as TSV with ids and source lines")
    ap.add_argument("--torch-missing", action="store_true", help="list torch catalog ids not covered")
    args = ap.parse_args()
    ck = Checker()
    for path in sorted(KB.rglob("*.yaml")):
        ck.check_file(path)
    for e in ck.errors:
        print("ERROR", e)
    by_group: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in ck.scope:
        by_group[group_of(key[0])].append(key)
    print(f"{ck.entries} entries; {len(ck.errors)} errors")
    for g in sorted(by_group):
        keys = by_group[g]
        done = sum(1 for k in keys if k in ck.covered)
        print(f"group {g}: {done}/{len(keys)} NCCL core WARN call sites covered")
    total = len(ck.scope)
    print(f"all: {sum(1 for k in ck.scope if k in ck.covered)}/{total}")
    print(f"torch catalog: {len(ck.torch_covered)}/{len(ck.torch)} ids covered")
    if args.torch_missing:
        for tid, fmt in ck.torch.items():
            if tid not in ck.torch_covered:
                print(f"{tid}\t{fmt[:120]}")
    if args.group and (args.missing or args.todo):
        for f, cid in sorted(by_group[args.group]):
            if (f, cid) in ck.covered:
                continue
            r = ck.scope[(f, cid)]
            if args.todo:
                print("\t".join([cid, f, r["format"], r["first_tag"], r["last_tag"], r["lines_in_last_tag"],
                                 r["origin"], r["via_macro"]]))
            else:
                print(f"{cid}  {f}  {r['format'][:110]}")
    return 1 if ck.errors else 0


if __name__ == "__main__":
    sys.exit(main())
