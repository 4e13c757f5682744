"""Every `fusionfleet …` line in the code blocks of README.md and docs/*.md is one the real parser takes
(the parser `fleetctl.cli.main` builds, `swap`'s the worker's own; nothing is run): an unknown flag, a
missing required argument or a command that is gone fails, naming the page and line. Commands named in
the prose exist and take the flags shown; every `make` target the docs name is the Makefile's; every
`python -m` module they name imports. Which of the lines also run, and where, is tests/support/doc_commands.py's
table. Negative controls: a page of wrong lines is refused line by line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_commands import (
    NOT_RUN,
    PAGES,
    ROOT,
    RUN_ON_STACK,
    RUN_WITHOUT_STACK,
    DocCommand,
    command_path,
    fenced_commands,
    flag_problem,
    inline_commands,
    parse_problem,
)

FENCED = fenced_commands()
INLINE = inline_commands()


def _problems(command: DocCommand) -> list[str]:
    return [
        f"{command.where}: `fusionfleet {' '.join(argv)}`: {problem}"
        for argv in command.variants()
        if (problem := parse_problem(argv)) is not None
    ]


def test_the_docs_commands_are_found() -> None:
    readme = [command for command in FENCED if command.page == "README.md"]
    assert len(FENCED) >= 60 and len(readme) >= 20, [c.where for c in FENCED]
    paths = {command_path(command.plain()) for command in readme}
    assert {("submit",), ("status",), ("list",), ("logs",), ("swap",), ("local", "up")} <= paths, paths
    # the usage notation is read: optional parts, choices, a `$(…)` and a `$ ` prompt
    assert any(len(command.variants()) > 2 for command in FENCED)
    assert any("$(" in command.text or command.text.startswith("TOKEN=") for command in FENCED) or any(
        command.plain()[:2] == ["local", "token"] for command in FENCED
    )


@pytest.mark.parametrize("command", FENCED, ids=lambda command: command.where)
def test_every_command_line_in_the_docs_is_taken_by_the_parser(command: DocCommand) -> None:
    assert _problems(command) == []


@pytest.mark.parametrize("command", INLINE, ids=lambda command: f"{command.where}:{command.text}")
def test_every_command_named_in_the_prose_exists_with_its_flags(command: DocCommand) -> None:
    for argv in command.variants():
        assert flag_problem(argv) is None, f"{command.where}: `{command.text}`: {flag_problem(argv)}"


def test_each_command_the_docs_show_is_run_somewhere_or_says_why_not() -> None:
    shown = {command_path(command.plain()) for command in FENCED}
    placed = [RUN_WITHOUT_STACK, RUN_ON_STACK, set(NOT_RUN)]
    unplaced = sorted(" ".join(path) for path in shown if not any(path in where for where in placed))
    assert unplaced == [], f"commands in the docs that tests/support/doc_commands.py does not place: {unplaced}"
    twice = [path for path in shown if sum(path in where for where in placed) > 1]
    assert twice == []


WRONG_PAGE = """\
# Wrong

```sh
fusionfleet submit --source face.jpg --target clip.mp4 --wiat   # a misspelt flag
fusionfleet cost <job-id>                                       # a command that is gone
fusionfleet tenant set --max-running-jobs 2                     # its tenant missing
fusionfleet local token                                         # --tenant missing
fusionfleet list [--state S] [--colour C]                       # an optional flag it does not take
TOKEN=$(fusionfleet local token --tennant acme)
fusionfleet status <job-id> \\
    --jsn
fusionfleet swap --source face.jpg --target clip.mp4            # --output missing
```

```console
$ fusionfleet workers --lost-after S --json
worker-1  render  copy
$ fusionfleet logs
```

And in prose: `fusionfleet cost`, `fusionfleet wait JOB --tiemout S`.
"""


def test_wrong_lines_are_refused_each_with_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "wrong.md"
    page.write_text(WRONG_PAGE)
    found = fenced_commands([page])
    problems = {command.where: _problems(command) for command in found}
    assert [where for where, said in problems.items() if said] == [
        "wrong.md:4", "wrong.md:5", "wrong.md:6", "wrong.md:7", "wrong.md:8", "wrong.md:9", "wrong.md:10",
        "wrong.md:12", "wrong.md:18",
    ], problems  # fmt: skip
    assert "unknown flag --wiat; did you mean --wait?" in problems["wrong.md:4"][0]
    assert "invalid choice: 'cost'" in problems["wrong.md:5"][0]
    assert "required: tenant" in problems["wrong.md:6"][0]
    assert "unknown flag --colour" in problems["wrong.md:8"][0] and len(problems["wrong.md:8"]) == 1
    assert "--output" in problems["wrong.md:12"][0]
    assert problems["wrong.md:16"] == []  # placeholders typed as their flags need, the output not read
    prose = {f"{c.where} {c.text}": flag_problem(c.plain()) for c in inline_commands([page])}
    assert all(problem is not None for problem in prose.values()) and len(prose) == 2, prose


# Makefile targets the docs name: `make X` in inline code and at the start of a code block's line.
MAKE_INLINE = re.compile(r"`make ([^`]*)`")
MAKE_LINE = re.compile(r"^\s*(?:\$ )?make ([^#\n]*)", re.MULTILINE)
TARGET = re.compile(r"^([A-Za-z0-9_.-]+)(?:\s+[A-Za-z0-9_.-]+)*\s*:(?!=)", re.MULTILINE)


def _make_targets(text: str) -> set[str]:
    found = set()
    for match in [*MAKE_INLINE.finditer(text), *MAKE_LINE.finditer(text)]:
        for word in match.group(1).split():
            if "=" in word or word.startswith("-"):
                continue
            if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", word):
                break  # prose after the targets
            found.add(word)
    return found


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {name for line in TARGET.finditer(text) for name in line.group(0).split(":")[0].split()}


def test_every_make_target_the_docs_name_is_in_the_makefile() -> None:
    targets = _makefile_targets()
    named = {(page.name, target) for page in PAGES for target in _make_targets(page.read_text())}
    assert len(named) >= 30, named
    assert sorted(f"{page}: make {target}" for page, target in named if target not in targets) == []
    # a negative control: a target the Makefile lacks is caught
    assert _make_targets("run `make bench-nothing` then\n```sh\nmake demo N=2   # x\n```") == {"bench-nothing", "demo"}


# `python -m X` (or .venv/bin/python -m X) anywhere in the docs.
MODULE = re.compile(r"\bpython3?(?:\.\d+)? -m ([A-Za-z_][\w.]*)")
IMPORTS = """
import importlib, importlib.util, json, sys
problems = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise ImportError("no such module")
        if spec.submodule_search_locations is not None:  # a package runs its __main__
            name = name + ".__main__"
            spec = importlib.util.find_spec(name)
            if spec is None:
                raise ImportError("a package without __main__: python -m cannot run it")
        source = spec.loader.get_source(name) if spec.loader is not None else None
        if source is not None and '__name__ == "__main__"' not in source:
            compile(source, spec.origin, "exec")  # it runs on import: compiled, not run
        else:
            importlib.import_module(name)
    except Exception as error:
        problems[name] = f"{type(error).__name__}: {error}"
print(json.dumps(problems))
"""


def _modules_named() -> dict[str, str]:
    found: dict[str, str] = {}
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for name in MODULE.findall(line):
                found.setdefault(name.rstrip("."), f"{page.relative_to(ROOT)}:{number}")
    return found


def _import_problems(names: list[str]) -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, "-c", IMPORTS, *names], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    problems: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    return problems


def test_every_python_module_the_docs_run_imports() -> None:
    named = _modules_named()
    assert {"fleetctl.reference", "tests.simulation", "gpu_worker", "pytest"} <= set(named), named
    problems = _import_problems([*sorted(named), "benchmarks.no_such_bench"])
    assert set(problems) == {"benchmarks.no_such_bench"}, {
        named.get(name.removesuffix(".__main__"), name): problem for name, problem in problems.items()
    }
