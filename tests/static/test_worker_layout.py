"""The worker by concern: its folders tell its story (issue 35, item 5), so its top level stays small.

At most 12 modules at `gpu_worker/`'s top level, `__init__.py` and `__main__.py` counted; every folder of
it is a package that says in its docstring what it is for; and the folders import one another one way.
"""

from __future__ import annotations

import ast

from tests.static.test_worker_imports import graph
from tests.support.template import ROOT

PACKAGE = ROOT / "gpu_worker"
TOP_LEVEL_LIMIT = 12


def folder_of(module: str) -> str | None:
    """`gpu_worker.delivery.loop` → `delivery`; a top-level module (shared by all folders) → None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else None


def test_the_worker_has_at_most_12_modules_at_its_top_level() -> None:
    modules = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert {"__init__.py", "__main__.py"} <= set(modules)
    assert len(modules) <= TOP_LEVEL_LIMIT, f"{len(modules)} modules at gpu_worker/'s top level: {modules}"


def test_every_folder_is_a_package_that_says_what_it_is_for() -> None:
    folders = [path for path in PACKAGE.iterdir() if path.is_dir() and any(path.glob("*.py"))]
    assert len(folders) >= 5
    for folder in folders:
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder.name}/ has no __init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text()))
        assert docstring, f"gpu_worker/{folder.name}/__init__.py says nothing of what the folder holds"


def test_the_worker_s_folders_import_one_another_one_way() -> None:
    edges: dict[str, set[str]] = {}
    for module, targets in graph().items():
        source = folder_of(module)
        if source is None:
            continue
        edges.setdefault(source, set()).update(
            target for target in map(folder_of, targets) if target is not None and target != source
        )
    assert edges["delivery"] >= {"rendering", "merging"}  # the loop's tasks render and merge

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            step == goal or (step not in seen and reaches(step, goal, seen | {step})) for step in edges.get(start, ())
        )

    assert [folder for folder in sorted(edges) if reaches(folder, folder, set())] == []
