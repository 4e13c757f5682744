"""Judging several faces on several people (issue 32): did each person get the face mapped to them?

Per frame and person: the judge (benchmarks.judge: dlib's CNN detector, 5-point alignment, ResNet
descriptor, none of which the classic engine swaps with) finds the person's face in the output
frame, in a square around the place the clip put them (the ground truth, not the engine's tracker),
and the person got the right face when that face is nearer the source mapped to them than any other
source. A face the judge finds in the target but not in the output counts as wrong; a person the
judge finds in neither is not judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from benchmarks.judge import Face, Image, Judge

Descriptor = npt.NDArray[np.float64]
# How far (pixels) a found face's centre may be from where the clip put the person's head.
MAX_OFFSET = 70.0
# The judge looks at a square this far around each person's place (its CNN detector on whole
# upsampled frames would cost seconds a frame on a CPU).
CROP = 80
ENLARGE = 1.5


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


def faces_around(judge: Judge, image: Image, place: tuple[float, float]) -> list[Face]:
    """The judge's faces in the square around `place`, in the frame's coordinates."""
    x0, y0 = max(0, round(place[0]) - CROP), max(0, round(place[1]) - CROP)
    x1, y1 = min(image.shape[1], round(place[0]) + CROP), min(image.shape[0], round(place[1]) + CROP)
    if x1 - x0 < 40 or y1 - y0 < 40:
        return []
    # Enlarged 1.5 times rather than dlib's 2 (its pyramid's step): faces of 70 pixels become 105, over
    # the detector's 80-pixel window, at half the cost.
    crop = cv2.resize(image[y0:y1, x0:x1], None, fx=ENLARGE, fy=ENLARGE, interpolation=cv2.INTER_LINEAR)
    return [
        Face(
            (
                round(face.box[0] / ENLARGE) + x0,
                round(face.box[1] / ENLARGE) + y0,
                round(face.box[2] / ENLARGE) + x0,
                round(face.box[3] / ENLARGE) + y0,
            ),
            face.descriptor,
        )
        for face in judge.faces(np.ascontiguousarray(crop), upsample=0)
    ]


def source_identity(judge: Judge, image: Image) -> Descriptor:
    """The judge's descriptor of a source image's largest face: found without upsampling where it is
    large enough (the packaged portraits are; upsampling a whole portrait twice costs a minute on a
    loaded CPU), else as `Judge.identity` finds it."""
    faces = judge.faces(image, upsample=0)
    if not faces:
        return judge.identity(image)
    return max(faces, key=lambda face: (face.box[2] - face.box[0]) * (face.box[3] - face.box[1])).descriptor


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
    verdicts = []
    for person, place in places.items():
        match = face_near(faces_around(judge, output, place), place)
        if match is None:
            # Not in the output: wrong, unless the judge cannot find them in the target either.
            seen = face_near(faces_around(judge, target, place), place) is not None
            verdicts.append(PersonFrame(frame, person, judged=seen, found=False))
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
