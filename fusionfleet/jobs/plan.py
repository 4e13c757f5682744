"""Segment planning: cut a video's frames into short segments of whole frames. Pure functions.

Boundaries are frame numbers, not times, so every frame of the source lands in exactly one
segment and the merged result has the source's frame count by construction.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any


@dataclass(frozen=True)
class SegmentPolicy:
    target_seconds: float = 4.0
    min_seconds: float = 2.0
    max_seconds: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.min_seconds <= self.target_seconds <= self.max_seconds:
            raise ValueError("segment seconds must satisfy 0 < min <= target <= max")


@dataclass(frozen=True)
class Segment:
    """Frames [start_frame, end_frame) of the target; times are exact microseconds of those frames.

    `warm_from`: a test render's frame is rendered as the whole job renders it, its engine run from
    the start of the job's segment that holds it (fusionfleet.jobs.trial); None for every other segment.
    """

    index: int
    start_frame: int
    end_frame: int
    start_time_us: int
    end_time_us: int
    warm_from: int | None = None

    @property
    def frame_count(self) -> int:
        return self.end_frame - self.start_frame

    @property
    def engine_start(self) -> int:
        """The first frame the engine's own part of this segment starts from (before any lead-in)."""
        return self.start_frame if self.warm_from is None else self.warm_from

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.warm_from is None:
            del data["warm_from"]  # a plan item as it always was
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Segment:
        warm = data.get("warm_from")
        return cls(
            index=int(data["index"]),
            start_frame=int(data["start_frame"]),
            end_frame=int(data["end_frame"]),
            start_time_us=int(data["start_time_us"]),
            end_time_us=int(data["end_time_us"]),
            warm_from=None if warm is None else int(warm),
        )


def frame_time_us(frame: int, fps: Fraction) -> int:
    """Start time of `frame` in microseconds, rounded down (exact for integer and NTSC rates)."""
    return (frame * 1_000_000 * fps.denominator) // fps.numerator


def segment_count(frame_count: int, fps: Fraction, policy: SegmentPolicy) -> int:
    """How many segments: nearest to the target length, within [min, max] seconds wherever possible."""
    seconds = frame_count / fps
    fewest = max(1, math.ceil(seconds / Fraction(policy.max_seconds)))
    most = max(1, math.floor(seconds / Fraction(policy.min_seconds)))
    preferred = max(1, round(seconds / Fraction(policy.target_seconds)))
    if fewest > most:
        return fewest
    return min(max(preferred, fewest), most)


def plan_segments(
    frame_count: int, fps: Fraction, policy: SegmentPolicy | None = None, first: int = 0
) -> tuple[Segment, ...]:
    """Split frames [first, first + frame_count) (a job's trimmed range) into consecutive segments whose
    lengths differ by at most one frame."""
    if frame_count <= 0:
        raise ValueError("a plan needs at least one frame")
    if fps <= 0:
        raise ValueError("fps must be positive")
    return cut_segments(frame_count, fps, segment_count(frame_count, fps, policy or SegmentPolicy()), first)


def cut_segments(frame_count: int, fps: Fraction, count: int, first: int = 0) -> tuple[Segment, ...]:
    """`count` consecutive segments of whole frames (at most one frame apart) covering [first, first + frame_count)."""
    if frame_count <= 0 or count <= 0:
        raise ValueError("a plan needs at least one frame and one segment")
    count = min(count, frame_count)
    base, extra = divmod(frame_count, count)
    segments = []
    start = first
    for index in range(count):
        end = start + base + (1 if index < extra else 0)
        segments.append(Segment(index, start, end, frame_time_us(start, fps), frame_time_us(end, fps)))
        start = end
    return tuple(segments)


def requested_plan_problem(
    segments: int | None, cut_at: tuple[int, ...], frame_count: int, first: int = 0
) -> str | None:
    """What is wrong with a manifest's own plan for frames [first, first + frame_count); None when it can be cut.

    Segments of at least two frames: a segment of one frame has no frame to start its temporal state from."""
    if segments is not None and cut_at:
        return "plan: give segments or cut_at, not both"
    if segments is not None and not 1 <= segments <= frame_count // 2:
        return f"plan.segments: {segments} segments of at least 2 frames do not fit the job's {frame_count} frames"
    if cut_at:
        end = first + frame_count
        bounds = (first, *cut_at, end)
        if any(later - earlier < 2 for earlier, later in itertools.pairwise(bounds)):
            return (
                f"plan.cut_at: cuts must rise, each at least 2 frames after the one before and before the last"
                f" 2 frames, within the job's frames [{first}, {end})"
            )
    return None


def cut_at_frames(cuts: tuple[int, ...], frame_count: int, fps: Fraction, first: int = 0) -> tuple[Segment, ...]:
    """Segments that start at `first` and at each cut (frame numbers of the target), covering
    [first, first + frame_count); the cuts checked by `requested_plan_problem`."""
    bounds = (first, *cuts, first + frame_count)
    return tuple(
        Segment(index, start, end, frame_time_us(start, fps), frame_time_us(end, fps))
        for index, (start, end) in enumerate(itertools.pairwise(bounds))
    )
