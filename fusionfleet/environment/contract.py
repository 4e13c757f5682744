"""An environment contract: a frozen dataclass whose fields each name the variable they come from.

    @dataclass(frozen=True)
    class SlicerEnvironment:
        work_bucket: str = variable("WORK_BUCKET")
        encoder_threads: int = variable("ENCODER_THREADS", 2)

`from_env(SlicerEnvironment, os.environ)` reads it (an entry point does, nowhere else), `to_env(value)`
writes all of it back, `env_of(SlicerEnvironment, work_bucket=…)` writes just the settings given (the
local stack starts each process with those, leaving the rest to the environment it inherits), and
`names(SlicerEnvironment)` lists the variables (a static test holds template.yaml to them). Each
default is written once: the components' classes declare their fields with `settings.reader(component)`,
which takes each name and default from the settings table (fusionfleet/environment/settings.py).

Values are read by the field's type: str, int, float, bool, Path, `tuple[str, ...]` (comma-separated),
or any of these `| None`. An empty variable counts as unset.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from fusionfleet.errors import FusionFleetError

ENV = "env"  # the field metadata key that holds the variable's name
_FALSE = ("0", "false", "off", "no")
T = TypeVar("T")


class EnvironmentInvalid(FusionFleetError):
    """A variable is missing or cannot be read as its field's type; the message names it."""


def variable(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A field read from variable `name`; without a default the variable is required."""
    return dataclasses.field(default=default, metadata={ENV: name})


def names(contract: type[Any]) -> frozenset[str]:
    """Every variable the contract reads."""
    return frozenset(field.metadata[ENV] for field in dataclasses.fields(contract) if ENV in field.metadata)


def from_env(contract: type[T], env: Mapping[str, str]) -> T:
    """The contract's values from `env`; EnvironmentInvalid names a missing or unreadable variable."""
    hints = typing.get_type_hints(contract)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(contract):  # type: ignore[arg-type]
        name = field.metadata.get(ENV)
        if name is None:
            continue
        raw = env.get(name, "")
        if raw == "":
            if field.default is dataclasses.MISSING:
                raise EnvironmentInvalid(f"{name} is not set")
            continue
        try:
            values[field.name] = _parse(hints[field.name], raw)
        except ValueError:
            raise EnvironmentInvalid(f"{name} is not {_what(hints[field.name])}: {raw!r}") from None
    return contract(**values)


def to_env(value: Any) -> dict[str, str]:
    """The variables that make `from_env` read `value` back; unset (None) fields are left out."""
    return {
        field.metadata[ENV]: _text(getattr(value, field.name))
        for field in dataclasses.fields(value)
        if ENV in field.metadata and getattr(value, field.name) is not None
    }


def env_of(contract: type[Any], **settings: Any) -> dict[str, str]:
    """The variables for just these settings (field names) of `contract`; the component reads the
    others from whatever environment it inherits, as it would without them."""
    fields = {field.name: field for field in dataclasses.fields(contract) if ENV in field.metadata}
    unknown = sorted(set(settings) - set(fields))
    if unknown:
        raise TypeError(f"{contract.__name__} has no setting {', '.join(unknown)}")
    return {fields[name].metadata[ENV]: _text(value) for name, value in settings.items() if value is not None}


def _text(item: Any) -> str:
    if isinstance(item, bool):
        return "1" if item else "0"
    if isinstance(item, tuple):
        return ",".join(str(part) for part in item)
    return str(item)


def _base(hint: Any) -> Any:
    """`X | None` → X."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return inner
    return hint


def _parse(hint: Any, raw: str) -> Any:
    kind = _base(hint)
    if typing.get_origin(kind) is tuple:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if kind is bool:
        return raw.strip().lower() not in _FALSE
    if kind is int:
        return int(raw)
    if kind is float:
        return float(raw)
    if kind is Path:
        return Path(raw)
    return raw


def _what(hint: Any) -> str:
    kind = _base(hint)
    return {int: "a whole number", float: "a number"}.get(kind, "readable")
