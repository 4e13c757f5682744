"""A test render's plan: a few frames of the target, each rendered exactly as the whole job would render it. Pure.

A frame's pixels depend on more than the frame: an engine that carries state from frame to frame (the
classic engine's tracker and colour filters) renders frame k from the start of the job's segment that
holds k, after that segment's lead-in. So each wanted frame is a one-frame segment whose engine starts
at its full-plan segment's first frame (`Segment.warm_from`): the worker decodes from there (a seek to
the keyframe before it, never the whole video), runs the engine over the frames up to k as the whole
job's segment would, and keeps only frame k. The plan is the one the slicer makes for the whole job at
the same moment (the same function of the video and the fleet), so frame k of the test render and
frame k of the full render come from the same engine run, pixel for pixel before encoding.

An engine that carries no state (FaceFusion, whose output for frame k depends on k and its tracker's
window alone, beside the job-level decisions made once) declares how many frames before k it needs
(fusionfleet.jobs.decisions.context_frames): its run starts there instead, never before the segment's
start, so a frame late in a long segment costs its window, not the segment. The frames after k that it
looks ahead to are the worker's to feed (gpu_worker.rendering.stills).
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


def spread_frames(count: int, start: int, end: int) -> tuple[int, ...]:
    """`count` frames evenly spread over target frames [start, end), the first and the last included (one:
    the middle one), in order, each once: a poster strip of the target, chosen where its length is known
    (the slicer) by a client that cannot read it (a browser that does not play the codec). Fewer when the
    range holds fewer frames."""
    length = end - start
    if count <= 0 or length <= 0:
        return ()
    if count == 1:
        return (start + (length - 1) // 2,)
    # Rounded to the nearest frame, in whole numbers: frame i is at i/(count-1) of the way from first to last.
    return tuple(sorted({start + (i * (length - 1) + (count - 1) // 2) // (count - 1) for i in range(count)}))


def trimmed_frames_problem(frames: Sequence[int], start: int, end: int) -> str | None:
    """Why a test render cannot render these frames of a job that renders target frames [start, end), or None:
    a frame the trim leaves out is no frame of the full render to preview."""
    outside = [frame for frame in frames if not start <= frame < end]
    if not outside:
        return None
    return (
        f"frames: {', '.join(map(str, outside))} outside the job's trimmed range of target frames [{start}, {end}) "
        "(trim_frame_start / trim_frame_end)"
    )


def trial_plan(
    frames: Sequence[int], full_plan: Sequence[Segment], fps_num: int, fps_den: int, context: int | None = None
) -> tuple[Segment, ...]:
    """One segment per wanted frame (in the order given), each warmed from its full-plan segment's start, or,
    given the engine's `context` (frames before a frame its output depends on), from `context` frames
    before it where that is later: the full render's run of that segment saw those frames too."""
    fps = Fraction(fps_num, fps_den)
    segments = []
    for index, frame in enumerate(frames):
        holder = next(segment for segment in full_plan if segment.start_frame <= frame < segment.end_frame)
        warm = holder.start_frame if context is None else max(holder.start_frame, frame - context)
        times = frame_time_us(frame, fps), frame_time_us(frame + 1, fps)
        segments.append(Segment(index, frame, frame + 1, *times, warm))
    return tuple(segments)
