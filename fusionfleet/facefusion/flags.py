"""FaceFusion's processing options as command-line flags, for every command that takes them.

The `fusionfleet submit` CLI and the worker's `swap` command both offer the whole catalogue under
FaceFusion's own flag names (`--face-selector-mode many`) and turn what was given back into the
validated options a manifest carries.
"""

from __future__ import annotations

import argparse
from typing import Any

from fusionfleet.facefusion.catalogue import DEFAULTS
from fusionfleet.facefusion.options import CATALOGUE, OptionsError, OptionSpec, parse_cli_value, validate_options

# Choices short enough to read in the flag's own placeholder (`{many,one,reference}`); longer lists
# are named in the help, up to a screenful (the deep swapper's 157 models are counted, not listed).
_INLINE_CHOICES = 50
_LISTED_CHOICES = 24
_FIRST_OF_LONG = 4


def add_facefusion_options(parser: argparse.ArgumentParser) -> None:
    """FaceFusion's processing options under their own flag names (`--face-selector-mode many`), in
    FaceFusion's groups and order, each with its choices or range and FaceFusion's default."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for spec in CATALOGUE.values():
        title = group_of(spec)
        group = groups.get(title)
        if group is None:
            group = groups[title] = parser.add_argument_group(f"FaceFusion's {title} options")
        group.add_argument(
            spec.flag,
            dest=f"ff_{spec.name}",
            nargs="+" if spec.multiple else None,
            metavar=placeholder(spec),
            help=help_of(spec).replace("%", "%%") if spec.help else argparse.SUPPRESS,
        )


def group_of(spec: OptionSpec) -> str:
    """FaceFusion's help group: its processors' options all sit under `processors`."""
    processors = CATALOGUE["processors"].choices or ()
    return "processors" if spec.group.replace(" ", "_") in processors else spec.group


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)


def placeholder(spec: OptionSpec) -> str:
    """What the flag takes, as FaceFusion's own help writes it: `{a,b}`, `[0.0..1.0:0.05]`, or a name."""
    if spec.choices is not None:
        inline = "{" + ",".join(str(choice) for choice in spec.choices) + "}"
        return inline if len(inline) <= _INLINE_CHOICES else spec.name.rsplit("_", 1)[-1].upper()
    if spec.minimum is not None and spec.maximum is not None:
        step = "" if spec.step is None or (spec.kind == "int" and spec.step == 1) else f":{_number(spec.step)}"
        return f"[{_number(spec.minimum)}..{_number(spec.maximum)}{step}]"
    return "N" if spec.kind == "int" else "X"


def help_of(spec: OptionSpec) -> str:
    """The option's help, the choices its placeholder could not hold, and FaceFusion's default."""
    text = spec.help
    choices = spec.choices or ()
    if choices and not placeholder(spec).startswith("{"):
        long = len(choices) > _LISTED_CHOICES
        listed = ", ".join(str(choice) for choice in choices[: _FIRST_OF_LONG if long else _LISTED_CHOICES])
        more = f", … ({len(choices)} in all)" if long else ""
        text += f"; one of {listed}{more}"
    default = DEFAULTS.get(spec.name)
    if default is not None:
        shown = " ".join(map(str, default)) if isinstance(default, tuple) else str(default)
        text += f" (default: {shown})"
    return text


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
