"""Validation of a job's FaceFusion options against the catalogue, and their argv form.

The catalogue itself (every option's type, choices and range) is data in
``fusionfleet.facefusion.catalogue``; its names are re-exported here, so ``fusionfleet.facefusion.options`` stays the
one import for the options' users. ``validate_options`` normalises a manifest's ``options`` object
and reports every problem at once, ``to_cli_args`` writes FaceFusion's ``headless-run`` flags and
``parse_cli_value`` reads one command-line flag back.

Pure functions: no I/O and no FaceFusion import, so the slicer Lambda and the CLI can use them without
FaceFusion installed.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal

from fusionfleet.facefusion.catalogue import (
    CATALOGUE,
    DEPENDENT_CHOICES,
    FACEFUSION_VERSION,
    SYSTEM_OPTIONS,
    Choice,
    DependentChoices,
    Kind,
    OptionSpec,
)

__all__ = [
    "CATALOGUE",
    "DEPENDENT_CHOICES",
    "FACEFUSION_VERSION",
    "SYSTEM_OPTIONS",
    "Choice",
    "DependentChoices",
    "Kind",
    "OptionSpec",
    "OptionsError",
    "parse_cli_value",
    "to_cli_args",
    "validate_options",
]

# Longer choice lists (the deep swapper's 157 models) are not spelled out in error messages.
_MAX_LISTED_CHOICES = 24
# Float values within this of a grid point are FP noise (0.1 + 0.2), snapped onto the grid.
_GRID_TOLERANCE = 1e-9


class OptionsError(ValueError):
    """Invalid job options; ``problems`` holds one human sentence per problem."""

    problems: tuple[str, ...]

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


# --- validation ----------------------------------------------------------------------------------


class _ProblemError(Exception):
    """One problem with one value; becomes one sentence in OptionsError.problems."""


def _describe(value: object) -> str:
    """The value as a manifest (JSON) author would call it."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _grid_point(minimum: float, step: float, index: int) -> float:
    # Decimal arithmetic gives the float nearest the decimal grid value (0.35, not
    # 0.35000000000000003), which is what FaceFusion's rounded range holds and compares with.
    return float(Decimal(repr(minimum)) + index * Decimal(repr(step)))


def _check_number(spec: OptionSpec, value: int | float, label: str) -> int | float:
    """Range and grid checks; returns the value snapped onto the grid for floats."""
    low, high = spec.minimum, spec.maximum
    if low is not None and high is not None and not low <= value <= high:
        raise _ProblemError(f"{label}: {value!r} is outside {low!r}..{high!r}")
    if low is not None and value < low:
        raise _ProblemError(f"{label}: {value!r} is below the minimum {low!r}")
    if high is not None and value > high:
        raise _ProblemError(f"{label}: {value!r} is above the maximum {high!r}")
    if spec.step is None:
        return value
    origin = spec.minimum if spec.minimum is not None else 0
    if isinstance(value, int):
        if (value - origin) % spec.step != 0:
            raise _ProblemError(f"{label}: {value!r} is not on the grid {origin!r} + n * {spec.step!r}")
        return value
    index = round((value - origin) / spec.step)
    snapped = _grid_point(origin, spec.step, index)
    if abs(snapped - value) > _GRID_TOLERANCE:
        below = _grid_point(origin, spec.step, math.floor((value - origin) / spec.step))
        above = _grid_point(origin, spec.step, math.ceil((value - origin) / spec.step))
        raise _ProblemError(
            f"{label}: {value!r} is not a multiple of {spec.step!r} from {origin!r} (nearest: {below!r} or {above!r})"
        )
    return snapped


def _choices_text(spec: OptionSpec, value: Choice, label: str) -> str:
    assert spec.choices is not None
    suggestion = ""
    if isinstance(value, str):
        close = difflib.get_close_matches(value, [str(choice) for choice in spec.choices], n=1)
        if close:
            suggestion = f"; did you mean {close[0]!r}?"
    if len(spec.choices) > _MAX_LISTED_CHOICES:
        return f"{label}: {value!r} is not one of the {len(spec.choices)} known choices{suggestion}"
    listed = ", ".join(str(choice) for choice in spec.choices)
    return f"{label}: {value!r} is not one of {listed}{suggestion}"


def _normalise_scalar(spec: OptionSpec, value: object, label: str) -> Choice:
    result: Choice
    if spec.kind == "str":
        if not isinstance(value, str):
            raise _ProblemError(f"{label}: expected a string, got {_describe(value)}")
        result = value
    elif spec.kind == "int":
        # bool is an int subclass, and "80" is what a shell would pass: both mean a mistake here.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _ProblemError(f"{label}: expected a whole number, got {_describe(value)}")
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise _ProblemError(f"{label}: expected a whole number, got {value!r}")
        result = int(value)
    else:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _ProblemError(f"{label}: expected a number, got {_describe(value)}")
        result = float(value)
        if not math.isfinite(result):
            raise _ProblemError(f"{label}: expected a finite number, got {value!r}")
    if spec.choices is not None and result not in spec.choices:
        raise _ProblemError(_choices_text(spec, result, label))
    if isinstance(result, int | float):
        result = _check_number(spec, result, label)
    return result


def _normalise(spec: OptionSpec, value: object, label: str) -> tuple[object, list[str]]:
    """The normalised value and the problems found (all of a list's bad items, not just the first)."""
    if not spec.multiple:
        if isinstance(value, list | tuple):
            return None, [f"{label}: expected a single value, got a list"]
        try:
            return _normalise_scalar(spec, value, label), []
        except _ProblemError as problem:
            return None, [str(problem)]
    # A lone scalar stands for a one-item list, as `--face-mask-types box` does on the CLI.
    items = list(value) if isinstance(value, list | tuple) else [value]
    if not items:
        return None, [f"{label}: needs at least one value"]
    problems: list[str] = []
    if spec.max_values is not None and len(items) > spec.max_values:
        problems.append(f"{label}: takes at most {spec.max_values} values, got {len(items)}")
    normalised: list[Choice] = []
    for index, item in enumerate(items):
        item_label = f"{label}[{index}]" if isinstance(value, list | tuple) else label
        try:
            normalised.append(_normalise_scalar(spec, item, item_label))
        except _ProblemError as problem:
            problems.append(str(problem))
    return normalised, problems


def _unknown_text(name: str) -> str:
    label = f"options.{name}"
    # A CLI spelling (face-swapper-model, --face-swapper-model) is a near miss, not a typo.
    underscored = name.lstrip("-").replace("-", "_")
    if underscored != name and underscored in CATALOGUE:
        return f"{label}: unknown option; FaceFusion names are written with underscores: {underscored!r}"
    if underscored in SYSTEM_OPTIONS:
        return f"{label}: {underscored} is set by the worker, not by the job"
    close = difflib.get_close_matches(name, list(CATALOGUE), n=1)
    if close:
        return f"{label}: unknown option; did you mean {close[0]!r}?"
    return f"{label}: unknown option"


def _cross_check(options: Mapping[str, object], raw: Mapping[str, object]) -> list[str]:
    """Rules between options, checked only where both sides passed their own checks."""
    problems: list[str] = []
    for name, dependency in DEPENDENT_CHOICES.items():
        if name not in options or (dependency.model_option in raw and dependency.model_option not in options):
            continue
        model = options.get(dependency.model_option, dependency.default_model)
        allowed = dependency.by_model[str(model)]
        if options[name] not in allowed:
            whose = "" if dependency.model_option in options else " (FaceFusion's default)"
            problems.append(
                f"options.{name}: {options[name]!r} is not available with {dependency.model_option}"
                f" {model!r}{whose}, which takes {', '.join(allowed)}"
            )
    # FaceFusion builds range(start, end) from both; one alone makes it range(n, None) and crash,
    # and start >= end (unless both are 0, which means "no filter") drops every face.
    start, end = "face_selector_age_start", "face_selector_age_end"
    if (start in raw) != (end in raw):
        given, missing = (start, end) if start in raw else (end, start)
        problems.append(f"options.{given}: needs {missing} as well (FaceFusion filters on the range of both)")
    elif start in options and end in options:
        low, high = options[start], options[end]
        assert isinstance(low, int) and isinstance(high, int)
        if low >= high and (low or high):
            problems.append(f"options.{start}: {low} must be below {end} ({high})")
    return problems


def validate_options(raw: Mapping[str, object]) -> dict[str, object]:
    """Return the normalised options (ints for int options — accept 80 and 80.0 but not 80.5 or "80" or True;
    floats for float options — accept ints; lists for multiple options — accept a single scalar and wrap it;
    sorted keys) or raise OptionsError listing ALL problems at once: unknown names (suggest the closest known
    name with difflib when there is one), system-owned names, wrong types, values outside choices or range."""
    if not isinstance(raw, Mapping):
        raise OptionsError([f"options: expected an object of option names to values, got {_describe(raw)}"])
    problems: list[str] = []
    normalised: dict[str, object] = {}
    for name in sorted(raw, key=str):
        value = raw[name]
        if not isinstance(name, str):
            problems.append(f"options: option names must be strings, got {_describe(name)}")
            continue
        spec = CATALOGUE.get(name)
        if spec is None:
            if name in SYSTEM_OPTIONS:
                problems.append(f"options.{name}: {name} is set by the worker, not by the job")
            else:
                problems.append(_unknown_text(name))
            continue
        result, found = _normalise(spec, value, f"options.{name}")
        if found:
            problems.extend(found)
        else:
            normalised[name] = result
    problems.extend(_cross_check(normalised, raw))
    if problems:
        raise OptionsError(problems)
    return dict(sorted(normalised.items()))


def _cli_text(value: object) -> str:
    # repr, not %g: the shortest text that reads back as the same float (0.35, not 0.35000000000000003).
    if isinstance(value, float):
        return repr(value)
    return str(value)


def to_cli_args(options: Mapping[str, object]) -> list[str]:
    """FaceFusion argv fragment for validated options, in catalogue order: ["--face-swapper-model", "x",
    "--face-mask-types", "box", "occlusion", ...]; floats written without trailing noise (repr of float)."""
    # Validating again is cheap and makes sure FaceFusion's argparse never sees what it would refuse.
    normalised = validate_options(options)
    args: list[str] = []
    for name, spec in CATALOGUE.items():
        if name not in normalised:
            continue
        value = normalised[name]
        args.append(spec.flag)
        if isinstance(value, list):
            args.extend(_cli_text(item) for item in value)
        else:
            args.append(_cli_text(value))
    return args


def parse_cli_value(spec: OptionSpec, values: list[str]) -> object:
    """Turn CLI strings back into the typed value (for the fusionfleet CLI).

    Checks the option on its own (type, choices, range); rules between options are left to
    validate_options, which the CLI runs on the whole set.
    """
    if not values:
        raise OptionsError([f"{spec.flag}: needs a value"])
    if not spec.multiple and len(values) != 1:
        raise OptionsError([f"{spec.flag}: takes one value, got {len(values)}"])
    problems: list[str] = []
    typed: list[object] = []
    for text in values:
        if spec.kind == "str":
            typed.append(text)
            continue
        try:
            typed.append(int(text) if spec.kind == "int" else float(text))
        except ValueError:
            number = "a whole number" if spec.kind == "int" else "a number"
            problems.append(f"{spec.flag}: {text!r} is not {number}")
    if problems:
        raise OptionsError(problems)
    result, problems = _normalise(spec, typed if spec.multiple else typed[0], spec.flag)
    if problems:
        raise OptionsError(problems)
    return result
