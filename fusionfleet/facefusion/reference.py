"""Job-level decisions that FaceFusion makes once per video, made once per job.

In reference mode (FaceFusion's default) without a reference image, FaceFusion takes the reference face
from frame `reference_frame_number` of the whole video, once. A segment must not take it from its own
first frame: after a cut to other people a later segment would then swap someone else. The slicer
decodes that frame once and stores it beside the job; every segment takes its reference from it, as
from a reference image.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_SELECTOR_MODE = "reference"  # FaceFusion's default


def reference_frame_wanted(options: Mapping[str, object], has_reference_image: bool) -> int | None:
    """The frame of the whole video the job's reference face comes from, or None when it needs none."""
    if has_reference_image or options.get("face_selector_mode", DEFAULT_SELECTOR_MODE) != "reference":
        return None
    return int(str(options.get("reference_frame_number", 0)))


def reference_frame_problem(frame: int, frame_count: int) -> str | None:
    """Why the job cannot take its reference from `frame` of a video of `frame_count` frames, or None."""
    if frame < frame_count:
        return None
    return (
        f"options.reference_frame_number: {frame} is past the target's last frame ({frame_count - 1}); "
        "the reference face is taken from that frame of the whole video"
    )
