"""The worker's modules depend on each other one way: no cycle, and no import hidden in a function
to dodge one."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.template import ROOT

PACKAGE = ROOT / "gpu_worker"
# Imported where used on purpose, not to dodge a cycle: the `swap` command (a tree a worker never
# needs), and engines, which the registry loads only when one is asked for (heavy optional packages).
LAZY_ALLOWED = {("gpu_worker.__main__", "gpu_worker.standalone")}
LAZY_LOADER = ("gpu_worker.engines.registry", "gpu_worker.engines.")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def worker_imports(tree: ast.Module, nested: bool, modules: set[str]) -> set[str]:
    """The gpu_worker modules imported at module level (nested=False) or inside functions (nested=True).

    `from package import submodule` depends on the submodule; a package that its own module imports
    (Python initialises it first) is no dependency.
    """
    found: set[str] = set()
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    inner = {id(node) for function in functions for node in ast.walk(function) if node is not function}
    for node in ast.walk(tree):
        if (id(node) in inner) != nested:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpu_worker"):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("gpu_worker"))
    return found & modules


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def graph() -> dict[str, set[str]]:
    found = modules()
    edges: dict[str, set[str]] = {}
    for name, path in found.items():
        imported = worker_imports(ast.parse(path.read_text()), False, set(found))
        edges[name] = {target for target in imported if target != name and not name.startswith(f"{target}.")}
    return edges


def test_the_worker_has_no_import_cycle() -> None:
    edges = graph()
    visiting: list[str] = []
    done: set[str] = set()
    cycles: list[str] = []

    def visit(node: str) -> None:
        if node in done:
            return
        if node in visiting:
            cycles.append(" -> ".join([*visiting[visiting.index(node) :], node]))
            return
        visiting.append(node)
        for target in sorted(edges[node]):
            visit(target)
        visiting.pop()
        done.add(node)

    for node in sorted(edges):
        visit(node)
    assert cycles == []


def test_no_worker_module_is_imported_inside_a_function() -> None:
    found = modules()
    lazy = {
        (name, target)
        for name, path in found.items()
        for target in worker_imports(ast.parse(path.read_text()), True, set(found))
    }
    loader, engines = LAZY_LOADER
    assert {(name, target) for name, target in lazy if name != loader or not target.startswith(engines)} == LAZY_ALLOWED


def test_the_render_path_runs_one_way() -> None:
    edges = graph()
    assert "gpu_worker.rendering.render" not in edges["gpu_worker.hosting.engine_host"]
    assert "gpu_worker.hosting.engine_host" not in edges["gpu_worker.rendering.render"]
    assert "gpu_worker.hosting.engine_host" not in edges["gpu_worker.delivery.retry"]
    assert edges["gpu_worker.errors"] == set()
