"""The worker by concern: its folders tell its story (issue 35, item 5), so its top level stays small.

At most 12 modules at `gpu_worker/`'s top level, `__init__.py` and `__main__.py` counted; every folder of
it is a package that says in its docstring what it is for.
"""

from __future__ import annotations

import ast

from tests.support.template import ROOT

PACKAGE = ROOT / "gpu_worker"
TOP_LEVEL_LIMIT = 12


def test_the_worker_has_at_most_12_modules_at_its_top_level() -> None:
    modules = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert {"__init__.py", "__main__.py"} <= set(modules)
    assert len(modules) <= TOP_LEVEL_LIMIT, f"{len(modules)} modules at gpu_worker/'s top level: {modules}"


def test_every_folder_is_a_package_that_says_what_it_is_for() -> None:
    folders = [path for path in PACKAGE.iterdir() if path.is_dir() and any(path.glob("*.py"))]
    assert len(folders) >= 6
    for folder in folders:
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder.name}/ has no __init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text()))
        assert docstring, f"gpu_worker/{folder.name}/__init__.py says nothing of what the folder holds"
