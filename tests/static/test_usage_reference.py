"""docs/usage.md lists every command and every flag of the real parser: its reference section is what
`python -m fleetctl.reference` generates from the parser, and every command path and option string the
parser declares (walked here on its own) is named there."""

from __future__ import annotations

import argparse

import pytest

from fleetctl.cli import build_parser
from fleetctl.reference import BEGIN, END, PAGE, commands, options, rewrite, section

REGENERATE = "run `python -m fleetctl.reference` to regenerate docs/usage.md's CLI reference"


def _reference() -> str:
    text = PAGE.read_text()
    assert BEGIN in text and END in text, f"docs/usage.md has lost its reference markers; {REGENERATE}"
    return text[text.index(BEGIN) : text.index(END)]


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], list[str]]]:
    """Every command path and its option strings, read from argparse's own structures."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                flags = [f for a in sub._actions for f in a.option_strings if f not in ("-h", "--help")]
                found.append(((*path, name), flags))
                found += _walk(sub, (*path, name))
    return found


def test_the_reference_is_the_parsers_own() -> None:
    assert rewrite(PAGE.read_text(), section(build_parser())) == PAGE.read_text(), REGENERATE


def test_every_command_and_flag_is_named_in_usage() -> None:
    reference = _reference()
    walked = _walk(build_parser())
    assert len(walked) >= 20  # the walk reaches nested commands (local up, tenant set, aws preflight, …)
    missing = [" ".join(path) for path, _flags in walked if f"### `fusionfleet {' '.join(path)}" not in reference]
    assert missing == [], f"commands missing from docs/usage.md: {missing}; {REGENERATE}"
    absent = [f"{' '.join(path)} {flag}" for path, flags in walked for flag in flags if f"`{flag}" not in reference]
    assert absent == [], f"flags missing from docs/usage.md: {absent[:20]}; {REGENERATE}"


def test_a_flag_the_page_lacks_is_found() -> None:
    # GIVEN a parser with a flag its generated section does not hold (a negative control)
    parser = build_parser()
    stale = section(parser)
    sub = next(found for path, found, _help in commands(parser) if path == ("list",))
    sub.add_argument("--brand-new-flag")
    # THEN the section generated now differs, naming it
    assert "--brand-new-flag" in section(parser) and "--brand-new-flag" not in stale
    assert any("--brand-new-flag" in action.option_strings for action in options(sub))


@pytest.mark.parametrize("command", ["status", "list", "logs", "workers"])
def test_the_json_commands_say_so_in_the_reference(command: str) -> None:
    reference = _reference()
    start = reference.index(f"### `fusionfleet {command}")
    assert "`--json`" in reference[start : reference.index("### ", start + 4)]
