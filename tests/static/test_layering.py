"""The layers import one way, nothing imports in a circle, and the slicer's package ships only the domain.

Every module of the project is parsed with `ast`; nothing is imported, so a module that is slow or
impossible to import here (FaceFusion, CUDA) is checked like any other, and imports inside functions
count as much as those at the top (a lazy import once hid a cycle). Imports under
`if TYPE_CHECKING:` count too: a layer that needs another's types depends on it.

    fleetctl/       client, CLI, local stack, sample media: tooling for people and tests
    functions/      Lambda handlers            gpu_worker/   render and merge workers
    fusionfleet/    the domain: what the slicer, the workers and the merge share

Run on its own: python -m pytest tests/static/test_layering.py
"""

from __future__ import annotations

import ast
import fnmatch
import re
import shutil
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fusionfleet", "fleetctl", "functions", "gpu_worker", "infra", "benchmarks", "scripts", "tests")
DEPLOYED = ("fusionfleet", "functions", "gpu_worker")
ABOVE_DEPLOYED = ("fleetctl", "infra", "benchmarks", "scripts", "tests")

# What each layer must not import. Tests, benchmarks and scripts sit on top and may import anything.
FORBIDDEN: dict[str, frozenset[str]] = {
    # the domain imports nothing above it
    "fusionfleet": frozenset(PACKAGES) - {"fusionfleet"},
    # the deployed components share only the domain, and never each other
    "functions": frozenset({"gpu_worker", *ABOVE_DEPLOYED}),
    "gpu_worker": frozenset({"functions", *ABOVE_DEPLOYED}),
    # the CLI and the local stack start the slicer runner and the workers as processes: they talk
    # to them through S3, SQS, Step Functions and SNS, as on AWS, and never import them
    "fleetctl": frozenset({"functions", "gpu_worker", "infra", "benchmarks", "scripts", "tests"}),
    "infra": frozenset({"fleetctl", "functions", "gpu_worker", "benchmarks", "scripts", "tests"}),
}

# What the slicer's deployment package must not contain: the CLI, the client, the local stack and
# the sample media (a module with one of these names anywhere in it is one of them).
TOOLING_MODULE_NAMES = frozenset({"cli", "client", "connection", "local", "samples", "stack"})


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # the project module the statement loads (the package when a name is imported from it)
    names: tuple[str, ...]  # for `from target import a, b`: the names that are not submodules
    line: int

    def where(self) -> str:
        return f"{module_path(self.importer)}:{self.line}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every Python module of the project by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[_module_name(path)] = path
    return found


def module_path(name: str) -> str:
    return str(modules()[name].relative_to(ROOT))


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py" or name in PACKAGES


def _project_module(dotted: str) -> str | None:
    """The longest prefix of a dotted name that is a project module (or a top-level package)."""
    parts = dotted.split(".")
    if parts[0] not in PACKAGES:
        return None
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules() or end == 1:
            return candidate
    return None


def _absolute(importer: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = importer if _is_package(importer) else importer.rpartition(".")[0]
    base = package.split(".")
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


@cache
def imports() -> tuple[Import, ...]:
    """Every import statement of the project that loads a project module, wherever it is written."""
    found: list[Import] = []
    for importer, path in modules().items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _project_module(alias.name)
                    if target is not None:
                        found.append(Import(importer, target, (), node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(importer, node)
                if _project_module(base) is None:
                    continue
                names: list[str] = []
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in modules():
                        found.append(Import(importer, submodule, (), node.lineno))
                    else:
                        names.append(alias.name)
                if names or not node.names:
                    found.append(Import(importer, base, tuple(names), node.lineno))
    return tuple(found)


def _bound_names(statements: list[ast.stmt]) -> Iterator[str]:
    """Names a module binds at its top level (under if/try/with too, not inside functions or classes)."""
    for statement in statements:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield statement.name
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            for alias in statement.names:
                yield alias.asname or alias.name.split(".")[0]
        elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        yield node.id
        elif isinstance(statement, ast.If | ast.For | ast.While | ast.With | ast.Try):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(statement, block, []):
                    yield from _bound_names(inner.body if isinstance(inner, ast.ExceptHandler) else [inner])


@cache
def top_level_names(module: str) -> frozenset[str] | None:
    """What `from module import x` can find without running code; None when it cannot be known."""
    tree = ast.parse(modules()[module].read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            return None
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return None
    return frozenset(_bound_names(tree.body))


def _top(module: str) -> str:
    return module.split(".", maxsplit=1)[0]


def dependencies() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for item in imports():
        if item.target in modules() and item.target != item.importer:
            graph[item.importer].add(item.target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def describe_cycle(members: frozenset[str]) -> str:
    """The modules of a cycle and the import lines that tie them together."""
    lines = [" ↔ ".join(sorted(members))]
    for item in imports():
        if item.importer in members and item.target in members and item.importer != item.target:
            lines.append(f"    {item.where()}: {item.importer} imports {item.target}")
    return "\n".join(lines)


# --- the layers ------------------------------------------------------------------------------------


def test_the_project_modules_are_found() -> None:
    # GIVEN the project's packages WHEN they are listed THEN every layer is there
    found = {_top(name) for name in modules()}
    assert found == set(PACKAGES)
    assert {
        "fusionfleet.facefusion.options",
        "fleetctl.cli",
        "gpu_worker.delivery.loop",
        "functions.slicer.app",
    } <= set(modules())


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_it_must_not(layer: str) -> None:
    # GIVEN every import statement written in the layer, lazy ones included
    # WHEN each is matched against what the layer must not import
    wrong = [
        f"{item.where()}: {item.importer} imports {item.target}"
        for item in imports()
        if _top(item.importer) == layer and _top(item.target) in FORBIDDEN[layer]
    ]
    # THEN there is none
    assert wrong == [], f"{layer}/ must not import {', '.join(sorted(FORBIDDEN[layer]))}:\n" + "\n".join(wrong)


def test_every_project_import_names_something_that_exists() -> None:
    # GIVEN every import of a project module (a module renamed or moved leaves stale ones behind,
    # and a lazy one only fails when its function runs)
    missing: list[str] = []
    for item in imports():
        # WHEN the module, and each name imported from it, is looked up without running code
        if item.target not in modules():
            missing.append(f"{item.where()}: no module {item.target}")
            continue
        known = top_level_names(item.target)
        if known is not None:
            missing.extend(f"{item.where()}: {item.target} has no {name!r}" for name in item.names if name not in known)
    # THEN all are there
    assert missing == [], "\n".join(missing)


def test_no_import_cycles() -> None:
    # GIVEN the graph of which project module imports which
    cycles = import_cycles(dependencies())
    # WHEN its strongly connected components are found
    # THEN there are none (each is shown with its members and the lines that import in a circle)
    assert cycles == [], "import cycles:\n" + "\n".join(describe_cycle(cycle) for cycle in cycles)


def test_the_cycle_finder_reports_cycles_and_nothing_else() -> None:
    # GIVEN a graph with a three-module cycle, a self-import and a chain
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    # WHEN its cycles are found THEN only the three modules of the cycle are reported
    assert import_cycles(graph) == [frozenset({"a", "b", "c"})]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


# --- the slicer's deployment package ---------------------------------------------------------------


def _makefile_copies() -> set[str]:
    """The repository folders functions/Makefile copies into the slicer package's build."""
    text = (ROOT / "functions" / "Makefile").read_text()
    copies = re.findall(r"cp -R ((?:\"\$\(ROOT\)/[\w.-]+\" )+)\"\$\$work/src/\"", text)
    assert copies, "functions/Makefile no longer copies the sources the way this test reads it"
    return {folder for line in copies for folder in re.findall(r"\$\(ROOT\)/([\w.-]+)", line)}


def _wheel_packages(source: Path) -> list[str]:
    """The packages `pip wheel` puts into the wheel built from `source`, by the project's own find rule."""
    # setuptools' find_namespace_packages, which [tool.setuptools.packages.find] runs: every folder
    # (without a dot in its name) whose dotted path matches an include pattern is a package.
    config = tomllib.loads((source / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    folders = (path.relative_to(source) for path in source.rglob("*") if path.is_dir())
    names = (".".join(folder.parts) for folder in folders if not any("." in part for part in folder.parts))
    return sorted(name for name in names if any(fnmatch.fnmatchcase(name, rule) for rule in config["include"]))


def test_the_slicer_package_is_built_from_the_domain_and_the_handlers_only() -> None:
    # GIVEN the build recipe sam build runs for the slicer and the dead-letter function
    # WHEN the folders it copies are read THEN they are the domain and the handlers, nothing above
    assert _makefile_copies() == {"fusionfleet", "functions"}


def test_the_slicer_package_holds_no_cli_local_stack_or_sample_media(tmp_path: Path) -> None:
    # GIVEN a copy of what functions/Makefile copies before it builds the wheel
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source)
    for folder in _makefile_copies():
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    # WHEN the packages the wheel would hold are listed, with every module in them
    packages = _wheel_packages(source)
    shipped = {_module_name(ROOT / path.relative_to(source)) for path in source.rglob("*.py")}
    # THEN the domain and the handlers are there
    assert {"fusionfleet", "fusionfleet.media", "functions.slicer", "functions.dlq"} <= set(packages)
    # AND no tooling: no fleetctl, and no CLI, client, local stack or sample media under any name
    assert not [name for name in packages if _top(name) not in DEPLOYED]
    tooling = sorted(name for name in shipped if TOOLING_MODULE_NAMES & set(name.split(".")))
    assert tooling == []
    assert not [name for name in shipped if _top(name) not in {"fusionfleet", "functions"}]


def test_the_domain_package_holds_only_the_domain() -> None:
    # GIVEN the modules of fusionfleet/ WHEN their names are read THEN none is tooling for people
    domain = sorted(name for name in modules() if _top(name) == "fusionfleet")
    assert [name for name in domain if TOOLING_MODULE_NAMES & set(name.split("."))] == []
    # AND the tooling is in the layer above
    assert {"fleetctl.cli", "fleetctl.client", "fleetctl.local.supervisor", "fleetctl.samples"} <= set(modules())
