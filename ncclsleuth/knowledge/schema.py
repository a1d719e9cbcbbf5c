"""The closed schema of a knowledge file (``knowledge/README.md`` describes it).

Keys and values are checked here, so a typo in a category or a role fails the tests
instead of silently never matching; ids and formats are checked against the shipped
NCCL and PyTorch catalogs by ``tests/test_knowledge.py``.
"""
from __future__ import annotations

import re
from typing import Any

from ..util.rxstore import rx

ROLES = frozenset({"cause", "symptom", "context", "benign", "unknown"})
SEVERITIES = frozenset({"error", "warning", "info"})
SUBSYSTEMS = frozenset({
    "bootstrap", "socket", "ib", "net", "net_plugin", "proxy", "shm", "p2p", "nvls", "collnet", "cuda",
    "nvml", "gdr", "topology", "graph", "tuning", "init", "enqueue", "group", "argcheck", "alloc",
    "register", "ras", "env", "os", "gin", "rma", "profiler", "tuner", "mnnvl", "debug", "watchdog",
    "store", "rendezvous", "elastic", "flight_recorder", "gloo", "ofi", "rccl", "nccl_tests", "kernel",
    "driver",
})
SOURCES = frozenset({"nccl", "torch", "gloo", "aws-ofi-nccl", "rccl", "nccl-tests", "system"})
FILE_KEYS = frozenset({"source", "area", "description", "entries"})
ENTRY_KEYS = frozenset({"id", "format", "files", "function", "subsystem", "role", "category", "severity",
                        "meaning", "why", "fix", "ref", "context", "example"})
REQUIRED = ("id", "format", "function", "subsystem", "role", "severity", "meaning", "why", "fix", "ref")
CONTEXT_KEYS = frozenset({"when", "role", "category", "severity", "meaning", "fix"})
WHEN_KEYS = frozenset({"message", "phase", "file"})
PHASES = frozenset({"init", "runtime", "teardown"})
#: What a finding (and a knowledge entry) says went wrong: the root-cause labels of the
#: shared corpus first, then ncclsleuth's own for slow-but-healthy runs, application-level
#: failures and the causes the knowledge base names that the corpus labels fold into other.
CATEGORIES = frozenset({
    "wrong_interface", "socket_fallback", "roce_gid", "ib_link_error", "network_blocked",
    "rendezvous_misconfig", "collective_desync", "collective_timeout", "duplicate_gpu", "shm_limit",
    "ulimit", "p2p_topology", "cuda_oom", "version_mismatch", "gdr_peermem", "hardware_fault", "other",
    "slow_init", "straggler", "low_bandwidth", "config_inconsistency", "bogus_setting", "topology_file",
    "app_crash", "peer_failure", "job_summary",
    "invalid_usage", "host_oom", "cuda_error", "net_plugin", "nccl_internal",
})
_OTHER_ID = rx(r"[A-Z][A-Z0-9]+-[A-Za-z0-9_.-]+")


class KnowledgeError(ValueError):
    """A knowledge file that breaks the schema: the file, the entry and what is wrong."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__(f"{path}: " + "; ".join(problems))


def validate_file(doc: Any, path: str) -> None:
    """Raise :class:`KnowledgeError` listing every problem of one parsed file."""
    problems = check_file(doc)
    if problems:
        raise KnowledgeError(path, problems)


def check_file(doc: Any) -> list[str]:
    """Every schema problem of one parsed file (empty when it is valid)."""
    if not isinstance(doc, dict):
        return ["the top level must be a mapping"]
    out = [f"unknown key {k!r}" for k in sorted(set(doc) - FILE_KEYS)]
    source = doc.get("source")
    if source not in SOURCES:
        out.append(f"source must be one of {sorted(SOURCES)}")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        return out + ["entries must be a list"]
    for i, e in enumerate(entries):
        out.extend(f"entries[{i}] {e.get('id') if isinstance(e, dict) else ''}: {p}" for p in check_entry(e, source))
    return out


def check_entry(e: Any, source: Any) -> list[str]:
    if not isinstance(e, dict):
        return ["an entry must be a mapping"]
    out = [f"unknown key {k!r}" for k in sorted(set(e) - ENTRY_KEYS)]
    for k in REQUIRED:
        v = e.get(k)
        # fix may be empty; so may a torch format (an exception raised without text: the catalog checks it)
        empty_ok = k == "fix" or (k == "format" and source == "torch")
        if not isinstance(v, str) or (not empty_ok and not v.strip()):
            out.append(f"{k!r} is required (a non-empty string{'; fix may be empty' if k == 'fix' else ''})")
    if source not in ("nccl", "torch") and not _OTHER_ID.fullmatch(str(e.get("id", ""))):
        out.append("an id without a catalog is <SOURCE>-<slug>, e.g. GLOO-enforce-size")
    files = e.get("files")
    if files is not None and not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
        out.append("files must be a list of paths")
    out.extend(check_values(e))
    for j, c in enumerate(e.get("context") or []):
        out.extend(f"context[{j}]: {p}" for p in check_variant(c, e))
    return out


def check_variant(c: Any, entry: dict[str, Any]) -> list[str]:
    if not isinstance(c, dict) or not isinstance(c.get("when"), dict) or not c["when"]:
        return ["needs a non-empty 'when' mapping"]
    out = [f"unknown key {k!r}" for k in sorted(set(c) - CONTEXT_KEYS)]
    when = c["when"]
    out.extend(f"unknown 'when' key {k!r} (one of {sorted(WHEN_KEYS)})" for k in sorted(set(when) - WHEN_KEYS))
    if "message" in when:
        try:
            re.compile(str(when["message"]))
        except re.error as exc:
            out.append(f"bad regex {when['message']!r}: {exc}")
    if "phase" in when and when["phase"] not in PHASES:
        out.append(f"phase must be one of {sorted(PHASES)}")
    out.extend(check_values({**entry, **c}))
    return out


def check_values(e: dict[str, Any]) -> list[str]:
    out = []
    role = e.get("role")
    if role not in ROLES:
        out.append(f"role must be one of {sorted(ROLES)}")
    if e.get("severity") not in SEVERITIES:
        out.append(f"severity must be one of {sorted(SEVERITIES)}")
    if e.get("subsystem") not in SUBSYSTEMS:
        out.append(f"subsystem {e.get('subsystem')!r} is not one of {sorted(SUBSYSTEMS)}")
    cat = e.get("category")
    cats = cat if isinstance(cat, list) else [cat] if cat is not None else []
    if role in ("cause", "symptom") and not cats:
        out.append("a cause or a symptom needs a category")
    out.extend(f"category {c!r} is not one of {sorted(CATEGORIES)}" for c in cats if c not in CATEGORIES)
    if role == "cause" and isinstance(cat, list):
        out.append("a cause has one category")
    if role == "benign" and e.get("severity") != "info":
        out.append("a benign line has severity info")
    return out
