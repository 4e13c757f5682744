"""Judging several faces on several people (issue 32): did each person get the face mapped to them?

Per frame and person: the judge (benchmarks.judge: dlib's CNN detector, 5-point alignment, ResNet
descriptor, none of which the classic engine swaps with) finds the person's face in the target
frame, nearest the place the clip put them (the ground truth, not the engine's tracker); finds the
output's face at the same place; and the person got the right face when that face is nearer the
source mapped to them than any other source. A face the judge finds in the target but no longer in
the output counts as wrong; a person the judge does not find in the target is not judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.judge import SAME_PLACE_IOU, Face, Image, Judge, iou

Descriptor = npt.NDArray[np.float64]
# How far (pixels) a found face's centre may be from where the clip put the person's head.
MAX_OFFSET = 70.0


@dataclass(frozen=True)
class PersonFrame:
    """One person in one frame: what the judge saw."""

    frame: int
    person: str
    judged: bool  # the judge found them in the target frame
    found: bool  # and found a face at the same place in the output
    to_mapped: float | None = None
    to_other: float | None = None  # the nearest of the other sources

    @property
    def right(self) -> bool:
        if not self.found or self.to_mapped is None or self.to_other is None:
            return False
        return self.to_mapped < self.to_other

    def to_dict(self) -> dict[str, Any]:
        pairs = (("to_mapped", self.to_mapped), ("to_other", self.to_other))
        rounded = {name: None if value is None else round(value, 4) for name, value in pairs}
        return {"frame": self.frame, "person": self.person, "judged": self.judged, "found": self.found,
                "right": self.right, **rounded}  # fmt: skip


def _centre(face: Face) -> tuple[float, float]:
    return ((face.box[0] + face.box[2]) / 2, (face.box[1] + face.box[3]) / 2)


def face_near(faces: Sequence[Face], place: tuple[float, float]) -> Face | None:
    """The face whose centre is nearest `place`, within MAX_OFFSET."""
    scored = [(float(np.hypot(*np.subtract(_centre(face), place))), index) for index, face in enumerate(faces)]
    if not scored:
        return None
    distance, index = min(scored)
    return faces[index] if distance <= MAX_OFFSET else None


def judge_frame(
    judge: Judge,
    frame: int,
    target: Image,
    output: Image,
    places: Mapping[str, tuple[float, float]],
    mapping: Mapping[str, str],
    sources: Mapping[str, Descriptor],
) -> list[PersonFrame]:
    """`places`: person → where the clip put them; `mapping`: person → the source mapped to them;
    `sources`: source → the judge's descriptor of that source image."""
    before, after = judge.faces(target), judge.faces(output)
    verdicts = []
    for person, place in places.items():
        face = face_near(before, place)
        if face is None:
            verdicts.append(PersonFrame(frame, person, judged=False, found=False))
            continue
        match = max(after, key=lambda other: iou(face.box, other.box), default=None)
        if match is None or iou(face.box, match.box) < SAME_PLACE_IOU:
            verdicts.append(PersonFrame(frame, person, judged=True, found=False))
            continue
        mapped = mapping[person]
        to_mapped = float(np.linalg.norm(match.descriptor - sources[mapped]))
        to_other = min(float(np.linalg.norm(match.descriptor - d)) for name, d in sources.items() if name != mapped)
        verdicts.append(PersonFrame(frame, person, True, True, to_mapped, to_other))
    return verdicts


def summary(verdicts: Sequence[PersonFrame], segments: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Shares of judged person-frames with the right face: overall, per person and per segment."""

    def share(rows: Sequence[PersonFrame]) -> dict[str, Any]:
        judged = [row for row in rows if row.judged]
        right = sum(row.right for row in judged)
        return {"judged": len(judged), "right": right, "share": right / len(judged) if judged else None}

    people = sorted({row.person for row in verdicts})
    return {
        **share(verdicts),
        "people": {person: share([row for row in verdicts if row.person == person]) for person in people},
        "segments": [
            {"start": start, "end": end, **share([row for row in verdicts if start <= row.frame < end])}
            for start, end in segments
        ],
        "wrong": [row.to_dict() for row in verdicts if row.judged and not row.right],
    }
