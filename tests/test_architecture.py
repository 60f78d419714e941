"""The layers of src/membound (docs/architecture.md), read from the import graph with ast: no cycle,
no upward arrow, and function-level imports only for optional or slow-to-import dependencies, each
with a comment that says which.

Layers, bottom to top: errors < base < catalog < physics < serving < planning < fidelity < present; the
package root (membound/__init__.py, __main__.py) sits above them all. Every import counts, wherever it
is written (module level, inside a function, under TYPE_CHECKING), so a cycle cannot hide behind a
deferred import. `from . import x` inside a package counts as an arrow to x; an arrow to one's own
parent package is not counted (Python imports it first anyway).
"""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "membound"
LAYERS = ["errors", "base", "catalog", "physics", "serving", "planning", "fidelity", "present"]
# the only third-party modules a function may import, each for a reason its comment gives
DEFERRED = {"pandas", "scipy", "matplotlib", "ipywidgets", "dask", "uvicorn"}
# the one internal deferral: a package attribute (membound.fidelity.validation_report) bound on first use,
# so that `python -m membound.fidelity.validate` runs a module nothing imported before it (runpy warns otherwise)
LAZY = {("membound.fidelity.validate", "validation_report")}


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


MODULES = _modules()


def _in_function(node, parents) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
    return False


def _imports():
    """(importer, imported module, in a function?, line, path) for every import of src/membound."""
    for mod, path in sorted(MODULES.items()):
        tree = ast.parse(path.read_text())
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            infn = _in_function(node, parents)
            if isinstance(node, ast.Import):
                for a in node.names:
                    yield mod, a.name, infn, node.lineno, path
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    yield mod, sub if sub in MODULES else target, infn, node.lineno, path


def _internal_edges() -> set[tuple[str, str]]:
    edges = set()
    for mod, target, _, _, _ in _imports():
        if target in MODULES and not mod.startswith(target + ".") and target != mod:
            edges.add((mod, target))
    return edges


def _layer(mod: str) -> int:
    parts = mod.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return len(LAYERS)          # the package root may import any layer
    return LAYERS.index(parts[1])


def test_every_module_is_in_a_layer():
    stray = [m for m in MODULES if m.count(".") >= 1 and m.split(".")[1] not in LAYERS + ["__main__"]]
    assert stray == [], f"modules outside the layers (put them in a layer's subpackage): {stray}"
    assert len(MODULES) > 60          # the walk found the package


def test_no_upward_arrow():
    up = sorted((a, b) for a, b in _internal_edges() if _layer(b) > _layer(a))
    assert up == [], "imports from a lower layer into a higher one:\n" + "\n".join(f"{a} -> {b}" for a, b in up)


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of `graph` as a path [a, b, ..., a], or [] where there is none (depth-first)."""
    state: dict[str, int] = {}      # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_the_cycle_finder_finds_a_loop_and_only_a_loop():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []       # a diamond is no cycle


def test_no_cycle():
    graph: dict[str, set[str]] = {}
    for a, b in _internal_edges():
        graph.setdefault(a, set()).add(b)
    assert _cycle(graph) == []


def test_the_walk_sees_module_and_package_arrows():
    edges = _internal_edges()
    assert ("membound.physics.estimate", "membound.physics.core") in edges      # `from .core import ...`
    assert ("membound.catalog", "membound.catalog.hardware") in edges          # `from . import hardware`
    assert ("membound.present.app", "membound.present.app.server") in edges    # inside a function
    assert ("membound.present.app.server", "membound.present.app") not in edges  # its own parent package


def test_function_level_imports_are_only_deferred_dependencies_with_a_reason():
    bad = []
    for _, target, infn, line, path in _imports():
        if not infn:
            continue
        text = path.read_text().splitlines()[line - 1]
        if target.startswith("membound"):
            ok = (target.endswith("app.server") and "starlette" in text      # the app extra, behind server
                  or (target, "validation_report") in LAZY and "runpy" in text)
        else:
            ok = target.split(".")[0] in DEFERRED and "#" in text
        if not ok:
            bad.append(f"{path.relative_to(SRC.parent)}:{line}: {text.strip()}")
    assert bad == [], "function-level imports (move them to the top, or say which optional dependency):\n" + "\n".join(bad)


def test_errors_imports_nothing_of_membound():
    assert [t for m, t, *_ in _imports() if m == "membound.errors" and t.startswith("membound")] == []
