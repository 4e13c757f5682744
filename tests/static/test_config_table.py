"""The configuration tables (docs/configuration.md) list exactly the environment variables the code reads.

The source is scanned by glob (every .py file of the deployed and tooling packages, wherever a file
moves between them), so a variable added, renamed or dropped anywhere fails here until the docs
says so.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fusionfleet", "fleetctl", "gpu_worker", "functions", "infra")
PREFIXED = re.compile(r"FUSIONFLEET_[A-Z0-9_]+")
VARIABLE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
ENV_RECEIVERS = {"env", "environ"}


def _sources() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).glob("**/*.py"))


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_environment(node: ast.AST) -> bool:
    """`os.environ`, `environ` or a mapping called `env` (how entry points pass the environment on)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id in ENV_RECEIVERS


def _names_a_variable(node: ast.AST) -> str | None:
    """The variable a node reads or names, if any."""
    # ENV_X = "NAME": the house convention for a variable's name beside the code that reads it.
    if isinstance(node, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id.startswith("ENV_") for target in node.targets
    ):
        return _string(node.value)
    # os.environ["NAME"], env["NAME"] (read, not written)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environment(node.value):
        return _string(node.slice)
    # os.environ.get("NAME"), env.get("NAME"), os.getenv("NAME")
    if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
        function = node.func
        if (function.attr == "get" and _is_environment(function.value)) or function.attr == "getenv":
            return _string(node.args[0])
    return None


def variables_read(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        text = _string(node)
        if text is not None and PREFIXED.fullmatch(text):
            found.add(text)
        name = _names_a_variable(node)
        if name is not None and VARIABLE.fullmatch(name):
            found.add(name)
    return found


def code_variables() -> dict[str, list[str]]:
    where: dict[str, list[str]] = {}
    for path in _sources():
        for name in variables_read(ast.parse(path.read_text(), str(path))):
            where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return where


def readme_variables() -> set[str]:
    section = (ROOT / "docs" / "configuration.md").read_text()
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])}


def test_the_scan_sees_each_kind_of_read() -> None:
    # GIVEN each way the code names a variable
    source = """
import os
ENV_X = "SOME_SETTING"
a = os.environ["AWS_REGION"]
b = os.environ.get("AWS_ENDPOINT_URL")
c = env.get("AWS_DEFAULT_REGION")
d = os.getenv("LOG_LEVEL_X")
e = {"FUSIONFLEET_SCRATCH": "/tmp"}
os.environ["WRITTEN_ONLY"] = "1"
f = self._env.get("PATH")
"""
    # THEN every read is found, and writes and unrelated strings are not
    assert variables_read(ast.parse(source)) == {
        "SOME_SETTING", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "LOG_LEVEL_X", "FUSIONFLEET_SCRATCH",
    }  # fmt: skip


def test_every_variable_the_code_reads_is_in_the_readme_and_no_other() -> None:
    # GIVEN the variables named in the code and those in the README's configuration tables
    in_code = code_variables()
    documented = readme_variables()
    # THEN each side has exactly the other's
    missing = {name: files for name, files in sorted(in_code.items()) if name not in documented}
    assert not missing, f"add these to docs/configuration.md's tables: {missing}"
    stale = sorted(documented - set(in_code))
    assert not stale, f"docs/configuration.md documents variables the code no longer reads: {stale}"
    assert len([name for name in in_code if name.startswith("FUSIONFLEET_")]) >= 27
