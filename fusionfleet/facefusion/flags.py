"""FaceFusion's processing options as command-line flags, for every command that takes them.

The `fusionfleet submit` CLI and the worker's `swap` command both offer the whole catalogue under
FaceFusion's own flag names (`--face-selector-mode many`) and turn what was given back into the
validated options a manifest carries.
"""

from __future__ import annotations

import argparse
from typing import Any

from fusionfleet.facefusion.options import CATALOGUE, OptionsError, parse_cli_value, validate_options


def add_facefusion_options(parser: argparse.ArgumentParser) -> None:
    """FaceFusion's processing options under their own flag names (`--face-selector-mode many`)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for spec in CATALOGUE.values():
        group = groups.get(spec.group)
        if group is None:
            group = groups[spec.group] = parser.add_argument_group(f"FaceFusion {spec.group} options")
        group.add_argument(
            spec.flag,
            dest=f"ff_{spec.name}",
            nargs="+" if spec.multiple else None,
            metavar=spec.name.upper(),
            help=spec.help or argparse.SUPPRESS,
        )


def collect_facefusion_options(args: argparse.Namespace) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    problems: list[str] = []
    for spec in CATALOGUE.values():
        value = getattr(args, f"ff_{spec.name}", None)
        if value is None:
            continue
        try:
            raw[spec.name] = parse_cli_value(spec, value if isinstance(value, list) else [value])
        except OptionsError as error:
            problems.extend(error.problems)
    if problems:
        raise OptionsError(problems)
    return validate_options(raw)
