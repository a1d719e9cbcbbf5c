"""The layout is the pipeline: every import runs down the stages, and no module imports
itself back through others.  Read from the source with ``ast`` (lazy imports inside
functions and ``TYPE_CHECKING`` ones included), so a back-edge fails here, not in review.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "ncclsleuth"

#: bottom first; a unit may import its own modules and the units of lower layers only, so
#: the units of one layer are independent of each other
LAYERS: list[set[str]] = [
    {"util"},  # the cache folder and code store, the gc pause
    {"events", "ingest"},  # what a line means / what the user pointed at, as lines
    {"parse"},  # lines -> events
    {"knowledge"},  # what each message means in its context (the knowledge base; uses the catalog)
    {"model"},  # events -> the job (and the per-file unit of work)
    {"parallel", "rules"},  # engines running that unit / the diagnosis on a model
    {"report"},  # findings + unexplained lines + summary; redaction, diff
    {"renderers"},  # Report -> text
    {"api"},  # the orchestrator
    {"live", "serve"},  # front ends on the orchestrator: watch, HTTP
    {"ruletests"},  # the embedded rule tests (through api, and live for watch-only rules)
    {"cli"},  # the command line
    {"__main__"},  # python -m ncclsleuth
]
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _imports(name: str, path: Path) -> set[str]:
    """The ncclsleuth modules ``name`` imports (``from X import y`` counts X, and X.y when it is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    base = name.split(".") if _is_package(path) else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "ncclsleuth")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "ncclsleuth":
                continue
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # None: the root package (the version, nothing else)


def test_every_unit_has_a_layer():
    units = {_unit(m) for m in MODULES} - {None}
    assert units == set(LAYER), f"place {sorted(units - set(LAYER))} in LAYERS (or drop {sorted(set(LAYER) - units)})"


def test_the_root_package_imports_nothing():
    assert GRAPH["ncclsleuth"] == set()


def test_no_import_runs_upstream():
    bad = []
    for mod, targets in GRAPH.items():
        u = _unit(mod)
        for t in sorted(targets):
            v = _unit(t)
            if u is None or v is None or u == v:
                continue
            if LAYER[v] >= LAYER[u]:
                bad.append(f"{mod} -> {t} ({v} is {'above' if LAYER[v] > LAYER[u] else 'beside'} {u})")
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    """Tarjan's strongly connected components of the module graph: all of size one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_the_back_edges_the_restructure_removed_stay_removed():
    """remote -> pipeline, model -> grammar builder, events -> the parse layer, facts <-> facts."""
    for mod, targets in GRAPH.items():
        if mod.startswith("ncclsleuth.ingest"):
            assert not {t for t in targets if _unit(t) != "ingest" and _unit(t) != "util"}, mod
        if mod.startswith("ncclsleuth.model"):
            assert not {t for t in targets if _unit(t) == "parse" and mod != "ncclsleuth.model.build"}, mod
        if mod.startswith("ncclsleuth.events"):
            assert {_unit(t) for t in targets} <= {"events", "util"}, mod


def test_readme_how_it_works_names_every_stage_and_only_what_exists():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## How it works", 1)[1].split("\n\n", 2)[1]
    paths = set(re.findall(r"`(ncclsleuth/[\w/.]+)`", table))
    assert paths, "no table under How it works"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"README names {missing}, which do not exist"
    named = {Path(p).parts[1].removesuffix(".py") for p in paths if len(Path(p).parts) > 1}
    assert set(LAYER) - {"__main__"} <= named, f"README's table lacks {sorted(set(LAYER) - {'__main__'} - named)}"
