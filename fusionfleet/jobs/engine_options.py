"""Which of FaceFusion's options each engine honours; a job naming one its engine would ignore is refused.

Every option a manifest may name is FaceFusion 3.8.1's. The `facefusion` engine hands them to
FaceFusion; the built-in engines implement a few of them with FaceFusion's meaning; the fleet's
encoder and merge apply the output ones for every engine. Anything else would be silently
ignored, so it is refused at validation with the engine's name and what it does honour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from fusionfleet.facefusion.catalogue import CATALOGUE
from fusionfleet.facefusion.image_models import image_model_problems
from fusionfleet.facefusion.requirements import SourceKind, detector_problems, source_problems, workflow_problems
from fusionfleet.jobs.audio import AUDIO_OPTIONS
from fusionfleet.jobs.faces import FaceMapping, engine_problem
from fusionfleet.jobs.manifest import ENGINE_NAMES, REFUSED_OPTIONS, invalid_manifest

# Applied by the fleet itself for every engine: the segment encoder (fusionfleet.jobs.encoding), the
# merge's audio (fusionfleet.jobs.audio), the planner, encoder and merge together for the frames
# rendered and the output's rate (fusionfleet.jobs.timeline), and an image target's output
# (fusionfleet.jobs.image_output). Each kind of target takes the other kind's output options and ignores
# them, as FaceFusion does, so one batch's options serve its images and its clips alike.
FLEET_OPTIONS = frozenset(
    {
        "output_video_encoder", "output_video_preset", "output_video_quality", "output_video_scale",
        "output_video_fps", "trim_frame_start", "trim_frame_end", *AUDIO_OPTIONS,
        "output_image_quality", "output_image_scale",
    }
)  # fmt: skip

# What each engine implements beyond the fleet's options. The built-in engine's selector follows
# FaceFusion's selector semantics for these names (gpu_worker/engines/classic/selector.py).
ENGINE_OPTIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "classic": frozenset(
            {
                "processors",
                "face_selector_mode",
                "face_selector_order",
                "reference_face_position",
                "reference_face_distance",
                "reference_frame_number",  # job-level: fusionfleet.facefusion.reference
                "face_swapper_weight",
            }
        ),
        "copy": frozenset(),
        "facefusion": frozenset(CATALOGUE) - FLEET_OPTIONS - frozenset(REFUSED_OPTIONS),
    }
)
assert set(ENGINE_OPTIONS) == set(ENGINE_NAMES), "every engine states the options it honours"

# A built-in engine swaps faces and does nothing else FaceFusion's processors do.
BUILT_IN_PROCESSORS = ("face_swapper",)


def selects_faces(engine: str) -> bool:
    """Whether the engine follows FaceFusion's face selector (and so needs the job's reference frame)."""
    return "face_selector_mode" in ENGINE_OPTIONS.get(engine, frozenset())


def faces_problem(engine: str, faces: tuple[FaceMapping, ...]) -> str | None:
    """Why the engine cannot render the job's `faces` (judged by the slicer and by the tenant API's
    `POST /jobs` alike), or None. Pure."""
    if faces and not selects_faces(engine):
        return f"faces: the {engine} engine swaps no faces; use classic"
    return engine_problem(engine, faces) if faces else None


def honoured(engine: str) -> frozenset[str]:
    return ENGINE_OPTIONS.get(engine, frozenset()) | FLEET_OPTIONS


def unsupported_option_problems(engine: str, options: Mapping[str, object]) -> list[str]:
    """One sentence per option the job's engine would not apply (options already validated; those refused
    for every engine are the manifest's to report)."""
    problems = []
    uses = sorted(ENGINE_OPTIONS.get(engine, frozenset()))
    for name, value in options.items():
        if name in REFUSED_OPTIONS:
            continue
        if name not in honoured(engine):
            also = f"; it uses {', '.join(uses)}" if uses else ""
            problems.append(
                f"options.{name}: the {engine} engine does not apply it{also} (and the output options); "
                "use the facefusion engine, or leave it out"
            )
        elif name == "processors" and engine != "facefusion":
            extra = [str(p) for p in (value if isinstance(value, list | tuple) else [value])]
            extra = [p for p in extra if p not in BUILT_IN_PROCESSORS]
            if extra:
                problems.append(
                    f"options.processors: the {engine} engine runs only face_swapper, not {', '.join(extra)}; "
                    "use the facefusion engine for the others"
                )
    if engine == "facefusion":
        # Its workers have only the models their image carries and no way to fetch another.
        problems.extend(image_model_problems(options))
        problems.extend(workflow_problems(options))
        problems.extend(detector_problems(options))
    return problems


def engine_source_problems(engine: str, options: Mapping[str, object], kinds: Sequence[SourceKind]) -> list[str]:
    """What the job's engine needs from its sources (images, one audio file) and they lack."""
    if engine == "facefusion":
        return source_problems(options, kinds)
    problems = source_problems({"processors": []}, kinds)  # one audio file at most, whatever the engine
    if engine != "copy" and "image" not in kinds:
        problems.append(f"source: the {engine} engine swaps faces and needs a face image (JPEG, PNG or WebP)")
    return problems


def check_sources(engine: str, options: Mapping[str, object], kinds: Sequence[SourceKind]) -> None:
    """Raise JobRejected naming everything the job's engine needs from its sources and they lack."""
    problems = engine_source_problems(engine, options, kinds)
    if problems:
        raise invalid_manifest(problems)


def check_engine_options(engine: str, options: Mapping[str, object]) -> None:
    """Raise JobRejected naming every option the job's engine would not apply."""
    problems = unsupported_option_problems(engine, options)
    if problems:
        raise invalid_manifest(problems)
