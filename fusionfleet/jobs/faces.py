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
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_FACES = 8  # people mapped in one job
# The engines that render `faces` (every other engine that swaps faces refuses them at submit).
MAPPING_ENGINES = ("classic", "facefusion")


class FaceMapping(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    source: tuple[str, ...] = Field(min_length=1, max_length=16)
    reference: str | None = None
    reference_frame: int | None = Field(default=None, ge=0)
    reference_face_position: int = Field(default=0, ge=0)

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
    if faces and mode != "reference":
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
    return problems


def engine_problem(engine: str) -> str | None:
    """Why `engine` cannot render a job with `faces`, or None. Pure."""
    if engine in MAPPING_ENGINES:
        return None
    return (
        f"faces: the {engine} engine cannot put several faces on several people; submit it with engine: "
        f"{' or '.join(MAPPING_ENGINES)}"
    )
