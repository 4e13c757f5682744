"""A walk over FaceFusion's option catalogue: every option, with the values worth trying, judged by validation.

The tests that prove "no option is refused after a job was accepted" take each option set the walk
yields, keep those the submit-time validation accepts (the manifest, the engine's options, what the
job's sources must hold), and hand them to what a worker does with them: the engine's own checks
(tests/unit/test_no_late_refusal.py) and FaceFusion's parser and pre-processing in the warm process
(tests/integration/engines/test_no_late_refusal_facefusion.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.catalogue import CATALOGUE, DEPENDENT_CHOICES, OptionSpec
from fusionfleet.facefusion.image_models import IMAGE_MODELS
from fusionfleet.facefusion.requirements import SourceKind
from fusionfleet.jobs.engine_options import check_engine_options, check_sources
from fusionfleet.jobs.manifest import parse_manifest

# Options FaceFusion takes only together with another, and the other's value.
COMPANIONS: dict[str, dict[str, object]] = {
    "face_selector_age_start": {"face_selector_age_end": 100},
    "face_selector_age_end": {"face_selector_age_start": 0},
}
# The sources of every walked job: a face image and an audio file, so no processor lacks its input.
KINDS: tuple[SourceKind, ...] = ("image", "audio")


@dataclass(frozen=True)
class Case:
    """One option set to try: the option walked, its value, and the whole `options` object."""

    name: str
    value: object
    options: dict[str, object]

    @property
    def label(self) -> str:
        return f"{self.name}={json.dumps(self.value)}"


def _grid(spec: OptionSpec) -> list[object]:
    """The ends of a numeric range and a point on its grid in between."""
    low = float(spec.minimum if spec.minimum is not None else 0)
    high = float(spec.maximum if spec.maximum is not None else low + 10)
    if spec.kind == "int":
        step = int(spec.step or 1)
        middle = int(low) + (int(high - low) // 2 // step) * step
        return list(sorted({int(low), middle, int(high)}))
    size = spec.step or (high - low) / 4
    centre = low + round((high - low) / 2 / size) * size
    return list(sorted({low, round(centre, 6), high}))


def values(spec: OptionSpec) -> list[object]:
    """The values worth trying: every choice (of a model: every model the image carries), else the grid."""
    if spec.name in IMAGE_MODELS:
        singles: list[object] = list(IMAGE_MODELS[spec.name])
    elif spec.choices is not None:
        singles = list(spec.choices)
    else:
        singles = _grid(spec)
    if not spec.multiple:
        return singles
    lists: list[object] = [[value] for value in singles]
    most = spec.max_values or len(singles)
    lists.append(singles[:most])
    return lists


def cases() -> Iterator[Case]:
    """Every option with each of its values; a choice that depends on a model, with each model that offers it."""
    for name, spec in CATALOGUE.items():
        dependency = DEPENDENT_CHOICES.get(name)
        if dependency is not None:
            for model, offered in dependency.by_model.items():
                if model not in IMAGE_MODELS.get(dependency.model_option, (model,)):
                    continue
                for value in offered:
                    yield Case(name, value, {name: value, dependency.model_option: model})
            continue
        for walked in values(spec):
            yield Case(name, walked, {name: walked, **COMPANIONS.get(name, {})})


def submit_verdict(engine: str, options: dict[str, object], kinds: Sequence[SourceKind] = KINDS) -> str | None:
    """None when validation at submit accepts the job, else its reason."""
    raw = json.dumps(
        {"source": [f"source-{index}" for index in range(len(kinds))], "target": "clip.mp4", "engine": engine,
         "options": options}
    ).encode()  # fmt: skip
    try:
        manifest = parse_manifest(raw, "jobs/walk.json")
        check_engine_options(engine, manifest.options)
        check_sources(engine, manifest.options, kinds)
    except JobRejected as rejection:
        return rejection.reason
    return None


def accepted(engine: str, kinds: Sequence[SourceKind] = KINDS) -> list[Case]:
    """The walked option sets validation accepts for `engine` and these sources."""
    return [case for case in cases() if submit_verdict(engine, case.options, kinds) is None]
