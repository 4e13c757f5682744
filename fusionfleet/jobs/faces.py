"""Several faces on several people: a job may map each source to a reference face.

`faces` in a manifest lists mappings; each says whose face (one source image, or several averaged as
FaceFusion averages them) goes on which person, and names that person by a reference face: an image
of them (`reference`), or a frame of the target and the face's position in it (`reference_frame`,
`reference_face_position`: FaceFusion's own way of naming a person, the position counted in
`face_selector_order`). Every person is found once per job (the slicer decodes the reference frames;
every segment reads the same references), so A's face lands on the same person in every segment.

The `classic` engine matches every reference in one pass: each face goes to the person whose
reference it is nearest (gpu_worker/engines/classic/selector.py `assign_people`). FaceFusion 3.8.1
swaps one source face per run and picks the faces by one reference: two people are two chained runs.
The `facefusion` engine runs them so, as chained passes inside one render of each segment, one per
mapping in order, each pass's reference face read from the ORIGINAL target (or the mapping's image) and
its frames the pass before's outputs (gpu_worker/engines/facefusion/chain.py, warm_chain.py).

A mapping may carry `options` of its own: a step of a FaceFusion job file's remix chain (swap, then enhance;
another selector a step). Its pass runs with them in place of the job's, and reads its reference face as
FaceFusion's job-run does, from the reference frame as the passes before left it. What a pass cannot do
differently from the job is refused (`pass_option_problems`): the job's range, size and rate are the job's.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fusionfleet.facefusion.catalogue import DEFAULTS
from fusionfleet.facefusion.options import OptionsError, validate_options

MAX_FACES = 8  # people mapped in one job
# The engines that render `faces` (every other engine that swaps faces refuses them at submit).
MAPPING_ENGINES = ("classic", "facefusion")
# The engine that renders a mapping with options of its own (a pass of FaceFusion's chain).
PASS_ENGINE = "facefusion"
# The job's, never a pass's: the frames rendered and the output's size and rate (a pass that changed them
# would change the frames the next pass gets), and the person's reference (the mapping's own fields).
JOB_ONLY = ("trim_frame_start", "trim_frame_end", "reference_frame_number", "reference_face_position")
SAME_AS_JOB = ("output_video_scale", "output_video_fps")


class FaceMapping(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    source: tuple[str, ...] = Field(min_length=1, max_length=16)
    reference: str | None = None
    reference_frame: int | None = Field(default=None, ge=0)
    reference_face_position: int = Field(default=0, ge=0)
    # A chain's step: its pass's own options, in FaceFusion's names (None: the job's).
    options: dict[str, Any] | None = None

    @field_validator("source", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else tuple(value) if isinstance(value, list) else value


def mapping_problems(faces: tuple[FaceMapping, ...], options: dict[str, object]) -> list[str]:
    """What is wrong with a manifest's `faces` beyond each entry's own fields. Pure."""
    problems = []
    for index, face in enumerate(faces):
        if (face.reference is None) == (face.reference_frame is None):
            problems.append(
                f"faces[{index}]: give the person's reference face as `reference` (an image of them) or "
                "`reference_frame` (a frame of the target showing them), one of the two"
            )
    mode = options.get("face_selector_mode", "reference")
    own = faces and all(face.options is not None for face in faces)  # each pass picks its faces itself
    if faces and mode != "reference" and not own:
        problems.append(
            f"faces: each mapping picks its person by a reference face, so options.face_selector_mode must be "
            f"'reference' (its default), not {mode!r}"
        )
    if faces and "reference_frame_number" in options:
        problems.append(
            "options.reference_frame_number: with `faces` each mapping names its own reference "
            "(`reference_frame` or `reference`)"
        )
    if faces and "reference_face_position" in options:
        problems.append(
            "options.reference_face_position: with `faces` each mapping names its own (`reference_face_position`)"
        )
    return problems + pass_option_problems(faces, options)


def pass_option_problems(faces: tuple[FaceMapping, ...], options: dict[str, object]) -> list[str]:
    """What is wrong with the mappings' own options (a chain's passes), as one sentence each. Pure."""
    problems: list[str] = []
    last = len(faces) - 1
    for index, face in enumerate(faces):
        if face.options is None:
            continue
        where = f"faces[{index}].options"
        try:
            own = validate_options(dict(face.options))
        except OptionsError as error:
            problems.extend(f"{where}.{problem.removeprefix('options.')}" for problem in error.problems)
            continue
        problems.extend(
            f"{where}.{name}: the job's, not a pass's (set it in the job's options or the mapping's own field)"
            for name in JOB_ONLY
            if name in own
        )
        problems.extend(
            f"{where}.{name}: {own[name]!r} differs from the job's; a pass cannot change the frames' size or rate"
            for name in SAME_AS_JOB
            if own.get(name, DEFAULTS.get(name)) != options.get(name, DEFAULTS.get(name))
        )
        processors = own.get("processors", DEFAULTS["processors"])
        if "lip_syncer" in processors:  # type: ignore[operator]
            problems.append(f"{where}.processors: the lip syncer hears the job's voice; it is not a pass's")
        if "frame_enhancer" in processors and index != last:  # type: ignore[operator]
            problems.append(
                f"{where}.processors: the frame enhancer makes larger frames, so only the last pass may run it"
            )
    return problems


def engine_problem(engine: str, faces: tuple[FaceMapping, ...] = ()) -> str | None:
    """Why `engine` cannot render a job with `faces`, or None. Pure."""
    if engine != PASS_ENGINE and any(face.options is not None for face in faces):
        return f"faces: only the {PASS_ENGINE} engine runs a mapping with options of its own (a chain's passes)"
    if engine in MAPPING_ENGINES:
        return None
    return (
        f"faces: the {engine} engine cannot put several faces on several people; submit it with engine: "
        f"{' or '.join(MAPPING_ENGINES)}"
    )
