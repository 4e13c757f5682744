"""The FaceFusion options the docs' `submit`, `try` and `estimate` lines pass are ones their engine applies:
the line's `--engine`, else the default engine of a `fusionfleet local up` line before it in the same
block (`--default-engine`, or `local up`'s own default). A line with neither goes to whatever stack the
reader has, whose engine the block does not say (AWS's is facefusion): it is not judged here. The judge is
the one `submit` runs before any upload (fusionfleet.jobs.engine_options), so an example the farm would
refuse fails here naming page:line (docs/test-renders.md's classic example with --face-mask-blur did)."""

from __future__ import annotations

import argparse

import pytest

from fleetctl.cli import build_parser
from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.flags import collect_facefusion_options
from fusionfleet.jobs.engine_options import check_engine_options
from tests.support.doc_commands import DocCommand, command_path, fenced_commands

JUDGED = {("submit",), ("try",), ("estimate",)}


def _parsed(argv: list[str]) -> argparse.Namespace | None:
    try:
        return build_parser().parse_args(argv)
    except SystemExit:  # a usage line with placeholders: tests/static/test_doc_commands.py judges its parsing
        return None


def judged_lines(commands: list[DocCommand]) -> list[tuple[DocCommand, list[str], str]]:
    """Each variant of each judged line, with the engine it would run on (see the module's doc)."""
    found = []
    default: dict[tuple[str, int], str] = {}  # a block → the default engine of its last `local up` line
    for command in commands:
        path = command_path(command.plain())
        if path == ("local", "up"):
            up = _parsed(command.plain())
            if up is not None:
                default[command.page, command.block] = up.default_engine
            continue
        if path not in JUDGED:
            continue
        for argv in command.variants():
            args = _parsed(argv)
            engine = (args.engine if args is not None else None) or default.get((command.page, command.block))
            if args is not None and engine is not None:
                found.append((command, argv, engine))
    return found


LINES = judged_lines(fenced_commands())


def test_some_lines_are_judged() -> None:
    pages = {command.page for command, _argv, _engine in LINES}
    assert {"README.md", "docs/test-renders.md"} <= pages, sorted(pages)


@pytest.mark.parametrize(("command", "argv", "engine"), LINES, ids=[f"{c.where}:{e}" for c, _a, e in LINES])
def test_a_doc_lines_options_are_ones_its_engine_applies(command: DocCommand, argv: list[str], engine: str) -> None:
    options = collect_facefusion_options(build_parser().parse_args(argv))
    try:
        check_engine_options(engine, options)
    except JobRejected as refused:
        pytest.fail(f"{command.where}: `fusionfleet {' '.join(argv)}` on the {engine} engine: {refused.reason}")


def test_a_line_whose_engine_would_refuse_its_options_is_caught() -> None:
    # negative control: a page whose `local up` gives classic, then a try with an option classic does not apply
    up = ("local", "up", "--default-engine", "classic")
    trial = ("try", "-s", "f.jpg", "-t", "c.mp4", "--frames", "0", "--face-mask-blur", "0.5")
    page = [DocCommand("page.md", 1, "local up …", up), DocCommand("page.md", 2, "try …", trial)]
    ((_command, argv, engine),) = judged_lines(page)
    assert engine == "classic"
    with pytest.raises(JobRejected, match="face_mask_blur: the classic engine does not apply it"):
        check_engine_options(engine, collect_facefusion_options(build_parser().parse_args(argv)))
