"""A test render's plan: a few frames of the target, each rendered exactly as the whole job would render it. Pure.

A frame's pixels depend on more than the frame: an engine that carries state from frame to frame (the
classic engine's tracker and colour filters) renders frame k from the start of the job's segment that
holds k, after that segment's lead-in. So each wanted frame is a one-frame segment whose engine starts
at its full-plan segment's first frame (`Segment.warm_from`): the worker decodes from there (a seek to
the keyframe before it, never the whole video), runs the engine over the frames up to k as the whole
job's segment would, and keeps only frame k. The plan is the one the slicer makes for the whole job at
the same moment (the same function of the video and the fleet), so frame k of the test render and
frame k of the full render come from the same engine run, pixel for pixel before encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from fusionfleet.jobs.plan import Segment, frame_time_us


def frames_problem(frames: Sequence[int], frame_count: int) -> str | None:
    """Why a test render cannot render these frames of a video of `frame_count` frames, or None."""
    past = [frame for frame in frames if frame >= frame_count]
    if not past:
        return None
    return (
        f"frames: {', '.join(map(str, past))} past the target's last frame ({frame_count - 1}); frames are "
        "numbered from 0 in the whole video"
    )


def trial_plan(frames: Sequence[int], full_plan: Sequence[Segment], fps_num: int, fps_den: int) -> tuple[Segment, ...]:
    """One segment per wanted frame (in the order given), each warmed from its full-plan segment's start."""
    fps = Fraction(fps_num, fps_den)
    segments = []
    for index, frame in enumerate(frames):
        holder = next(segment for segment in full_plan if segment.start_frame <= frame < segment.end_frame)
        segments.append(
            Segment(
                index, frame, frame + 1, frame_time_us(frame, fps), frame_time_us(frame + 1, fps), holder.start_frame
            )
        )
    return tuple(segments)
