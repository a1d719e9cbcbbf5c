"""Shared loader for the data-driven line tests (fixtures/parse/*.yaml)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ncclsleuth.events import Event
from ncclsleuth.parse.grammar import ShapeCache
from ncclsleuth.parse.lines import FileParser

PARSE = Path(__file__).resolve().parent.parent / "fixtures" / "parse"


def load(name: str) -> list[dict[str, Any]]:
    with open(PARSE / name, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def ident(case: dict[str, Any]) -> str:
    return case.get("note") or case["line"][:70]


def plain(ev: Event) -> dict[str, Any]:
    """``to_dict()`` without the parts every event has (text, source, line)."""
    return {k: v for k, v in ev.to_dict().items() if k not in ("text", "source", "line")}


def events_of(line: str, cache: bool = False) -> list[dict[str, Any]]:
    fp = FileParser("t", ShapeCache(enabled=cache))
    return [plain(e) for e in fp.parse_line(1, line) + fp.finish()]


def check(case: dict[str, Any]) -> None:
    got = events_of(case["line"])
    if "events" in case:
        want = case["events"]
    else:
        want = [{"kind": case["kind"], **case["fields"]}]
    assert got == want, f"\nline: {case['line']}\n got: {got}\nwant: {want}"
