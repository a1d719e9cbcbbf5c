"""Regex time budget: feed a pattern long adversarial inputs and say whether it stays linear.

Loader-independent (no rule engine import): give it compiled patterns, or rule folders
whose ``regex:`` / ``not_regex:`` predicates it collects from the YAML itself::

    python tools/regex_budget.py rules/ my-rules/          # exit 1 if a regex is too slow
    python tools/regex_budget.py --size 1000000 --budget 1 my-rules/

Inputs are long runs of the characters a pattern loops on (its repeated classes and
literals, plus ``a 0 [ space tab``), pairs of them, and the pattern's literal prefixes
followed by such a run and a character that makes the match fail at the very end.

Python's ``re`` cannot be interrupted, so sizes go up a ladder (8, 12, ... 24, 32, 64, ...
16 KiB characters): a pattern must stay within its linear share of the budget at every
rung before it is tried at the full size.  An exponential pattern is caught within a few
dozen characters and a quadratic one at 16 KiB, in well under a second, instead of
running for minutes (or forever) at 1 MB.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

try:  # Python 3.11+
    import re._constants as _C  # type: ignore[import-not-found]
    import re._parser as _sre  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as _C  # type: ignore[no-redef]
    import sre_parse as _sre  # type: ignore[no-redef]

BASE_CHARS = ("a", "0", " ", "\t", "[", "x", ".", ":", "A")
_CAT = {_C.CATEGORY_DIGIT: "0", _C.CATEGORY_WORD: "a", _C.CATEGORY_SPACE: " ",
        _C.CATEGORY_NOT_DIGIT: "a", _C.CATEGORY_NOT_WORD: " ", _C.CATEGORY_NOT_SPACE: "a"}
SMALL = 16 * 1024
_FINE = (8, 12, 16, 18, 20, 22, 24, 26, 28, 30)


@dataclass
class Result:
    pattern: str
    mode: str
    worst_input: str
    size: int
    seconds: float
    ok: bool

    def line(self) -> str:
        flag = "ok  " if self.ok else "SLOW"
        return f"{flag} {self.seconds * 1000:8.1f} ms @{self.size:>8} {self.mode:<9} {self.worst_input:<24} {self.pattern[:90]!r}"


def _chars(tree: object, into: set[str], loops: set[str], in_loop: bool = False) -> None:
    for op, av in tree:  # type: ignore[attr-defined]
        if op is _C.LITERAL:
            into.add(chr(av))
            if in_loop:
                loops.add(chr(av))
        elif op is _C.NOT_LITERAL:
            (loops if in_loop else into).add("a" if chr(av) != "a" else "b")
        elif op is _C.IN:
            for iop, iav in av:
                c = None
                if iop is _C.LITERAL:
                    c = chr(iav)
                elif iop is _C.RANGE:
                    c = chr(iav[0])
                elif iop is _C.CATEGORY:
                    c = _CAT.get(iav)
                if c:
                    into.add(c)
                    if in_loop:
                        loops.add(c)
        elif op is _C.ANY and in_loop:
            loops.add("a")
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT, getattr(_C, "POSSESSIVE_REPEAT", None)):
            _chars(av[2], into, loops, True)
        elif op is _C.SUBPATTERN:
            _chars(av[-1], into, loops, in_loop)
        elif op is _C.BRANCH:
            for b in av[1]:
                _chars(b, into, loops, in_loop)
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            _chars(av[1], into, loops, in_loop)


def _prefixes(tree: object) -> list[str]:
    """Literal prefixes of the pattern and of each top-level alternative."""
    out: list[str] = []

    def lead(seq: Iterable) -> str:  # type: ignore[type-arg]
        s = ""
        for op, av in seq:
            if op is _C.LITERAL:
                s += chr(av)
            elif op is _C.SUBPATTERN:
                inner = lead(av[-1])
                s += inner
                break
            elif op is _C.AT:
                continue
            else:
                break
        return s

    items = list(tree)  # type: ignore[call-overload]
    if len(items) == 1 and items[0][0] is _C.SUBPATTERN:
        items = list(items[0][1][-1])
    if len(items) == 1 and items[0][0] is _C.BRANCH:
        for b in items[0][1][1]:
            p = lead(b)
            if p:
                out.append(p)
    else:
        p = lead(items)
        if p:
            out.append(p)
    return out


def adversarial(pattern: str, flags: int = 0, limit: int = 40) -> list[tuple[str, str, str]]:
    """``(name, unit, tail)`` triples: the input is ``prefix + unit * n + tail``."""
    try:
        tree = _sre.parse(pattern, flags)
    except Exception:  # noqa: BLE001 - an odd pattern still gets the base inputs
        tree = []
    into: set[str] = set()
    loops: set[str] = set()
    _chars(tree, into, loops)
    units = list(dict.fromkeys([*BASE_CHARS, *sorted(loops), *sorted(into)]))
    out: list[tuple[str, str, str]] = [(f"{u!r}*n", u, "\x00") for u in units]
    lp = sorted(loops)[:6] or ["a"]
    for a in lp:
        for b in (" ", ".", ":", "0", "a"):
            if a != b:
                out.append((f"{(a + b)!r}*n", a + b, "\x00"))
    for pre in _prefixes(tree)[:12]:
        for u in (lp[0], "a", " ", "0"):
            out.append((f"{pre[:12]!r}+{u!r}*n", pre + "\x01" + u, "\x00"))
        out.append((f"({pre[:12]!r})*n", pre, "\x00"))
    seen: set[str] = set()
    uniq = []
    for t in out:
        if t[1] not in seen:
            seen.add(t[1])
            uniq.append(t)
    return uniq[:limit]


def _build(unit: str, tail: str, size: int) -> str:
    if "\x01" in unit:  # prefix + run
        pre, run = unit.split("\x01", 1)
        return pre + run * max(1, (size - len(pre)) // len(run)) + tail
    return unit * max(1, size // len(unit)) + tail


def _run(rx: re.Pattern[str], mode: str, text: str) -> float:
    t = time.perf_counter()
    if mode == "search":
        rx.search(text)
    elif mode == "match":
        rx.match(text)
    elif mode == "fullmatch":
        rx.fullmatch(text)
    elif mode == "finditer":
        for _ in rx.finditer(text):
            pass
    else:
        raise ValueError(mode)
    return time.perf_counter() - t


def check(rx: re.Pattern[str] | str, mode: str = "search", size: int = 1 << 20, budget: float = 1.0,
          inputs: list[tuple[str, str, str]] | None = None, full_tries: int = 3) -> Result:
    """Worst time of ``rx`` over the adversarial inputs at ``size`` characters (ladder: 16 KiB first)."""
    if isinstance(rx, str):
        rx = re.compile(rx)
    inputs = inputs if inputs is not None else adversarial(rx.pattern, rx.flags & ~re.UNICODE)
    small = min(SMALL, size)
    ladder = [n for n in (*_FINE, *(32 << k for k in range(16))) if n < small] + [small]

    def allowed(n: int) -> float:  # the linear share of the budget, with slack for noise
        return budget * n / size * 4 + 0.02

    timed = []
    for name, unit, tail in inputs:
        t = 0.0
        for n in ladder:  # exponential patterns blow up within a few characters, quadratic ones by 16 KiB
            text = _build(unit, tail, n)
            t = _run(rx, mode, text)
            if allowed(n) < t < 10 * allowed(n):  # a loaded machine or a GC pause: retry
                t = min(t, _run(rx, mode, text), _run(rx, mode, text))
            if t > allowed(n):
                return Result(rx.pattern, mode, name, n, t, False)
        timed.append((t, name, unit, tail))
    if size <= small:
        t, name, _, _ = max(timed, default=(0.0, "", "", ""))
        return Result(rx.pattern, mode, name, small, t, True)
    # a linear pattern's worst inputs at 16 KiB are its worst at full size: time those
    worst = Result(rx.pattern, mode, "", size, 0.0, True)
    for _, name, unit, tail in sorted(timed, reverse=True)[:full_tries]:
        t = _run(rx, mode, _build(unit, tail, size))
        if t > worst.seconds:
            worst = Result(rx.pattern, mode, name, size, t, t <= budget)
    return worst


# ------------------------------------------------------------------ rule folders


def rule_regexes(folders: Iterable[str | Path]) -> Iterator[tuple[str, str]]:
    """``(file, pattern)`` of every ``regex`` / ``not_regex`` predicate in ``*.yaml`` under folders."""
    import yaml

    def walk(node: object) -> Iterator[str]:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("regex", "not_regex") and isinstance(v, str):
                    yield v
                else:
                    yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    for folder in folders:
        for path in sorted(Path(folder).rglob("*.yaml")):
            try:
                doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                continue
            for pat in walk(doc):
                yield str(path), pat


def check_rule_folders(folders: Iterable[str | Path], size: int = 1 << 20, budget: float = 1.0) -> list[tuple[str, Result]]:
    """Every rule regex in the folders, checked with the engine's ``search`` semantics."""
    out = []
    for path, pat in rule_regexes(folders):
        try:
            rx = re.compile(pat)
        except re.error:
            continue  # the rule loader reports patterns that do not compile
        out.append((path, check(rx, "search", size, budget)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", help="rule folders (*.yaml searched recursively)")
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per regex at --size")
    a = ap.parse_args(argv)
    bad = 0
    for path, res in check_rule_folders(a.folders, a.size, a.budget):
        print(f"{path}: {res.line()}")
        bad += not res.ok
    print(f"{bad} slow regex(es)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
