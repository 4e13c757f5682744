"""Every benchmark states its goals, checks them itself, records met or not in its results file, and
exits non-zero when one is missed (benchmarks/goals.py): a figure that cannot fail is not a finding."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
# Tools a benchmark runs, not benchmarks: the parity judge of one case answers equal or not by its exit
# status and writes no results file (its matrix, parity_matrix.py, is the benchmark).
TOOLS = {"parity/__main__.py", "parity/judge.py"}


def entry_points() -> list[Path]:
    """Every benchmark module a person runs: the ones with a `main` and a `__main__` guard (or package main)."""
    found = []
    for path in sorted(BENCHMARKS.rglob("*.py")):
        tree = ast.parse(path.read_text())
        has_main = any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)
        if path.relative_to(BENCHMARKS).as_posix() in TOOLS:
            continue
        if has_main and ("__main__" in path.read_text() or path.name == "__main__.py"):
            found.append(path)
    return found


def test_the_benchmarks_are_found() -> None:
    names = {path.relative_to(BENCHMARKS).as_posix() for path in entry_points()}
    assert {
        "chaos.py",
        "fleet_overhead.py",
        "pipeline.py",
        "recovery.py",
        "stragglers.py",
        "fleetsim/__main__.py",
    } <= names


@pytest.mark.parametrize("path", entry_points(), ids=lambda path: path.relative_to(BENCHMARKS).as_posix())
def test_a_benchmark_states_checks_and_records_its_goals_and_fails_on_a_miss(path: Path) -> None:
    source = path.read_text()
    tree = ast.parse(source)
    # GIVEN its module: it states its goals
    assigned = [n.targets if isinstance(n, ast.Assign) else [n.target] for n in tree.body
                if isinstance(n, ast.Assign | ast.AnnAssign)]  # fmt: skip
    goals = [target for targets in assigned for target in targets if getattr(target, "id", "") == "GOALS"]
    assert goals, f"{path.name} states no GOALS"
    # AND records whether they were met in its results file
    assert "recorded(" in source or '"goals_met"' in source, f"{path.name} does not record its goals"
    # AND its main answers with them: an exit status from the goals, never a bare 0
    (main,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    returns = [n for n in ast.walk(main) if isinstance(n, ast.Return)]
    assert returns, f"{path.name}: main returns nothing (its exit status would not say a goal was missed)"
    bare = [ast.unparse(n) for n in returns if isinstance(n.value, ast.Constant)]
    assert bare == [], f"{path.name}: main ends with {bare}, whatever its goals"
