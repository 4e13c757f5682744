"""The content-analysis verdict, made once per job over the whole video as FaceFusion makes it. Pure.

FaceFusion 3.8.1 (content_analyser.analyse_video) reads every frame of the target, analyses those
whose number is a multiple of int(fps) — one a second — and refuses the video when more than 10 %
of the analysed frames are flagged. Run per segment, the same rule sees two or three samples and one
flagged frame fails a job that one run over the whole video passes. So the verdict is a job-level
decision: made once over the whole target, in a step of its own before the Map (a task on the job's
render queue: gpu_worker/delivery/analysis_task.py, gpu_worker/rendering/job_analysis.py), written beside the job
(`work/<job>/content-analysis.json`) and read by every segment, which does not decide again. While it
runs, how far it has read is kept beside it (`AnalysisProgress`).

A test render's verdict is over its own frames only: FaceFusion's preview analyses the frame it shows
(uis/components/preview.py, analyse_frame), not the whole video, and reading a 30-minute clip to answer
three frames took most of the answer's time. The whole render still makes the whole-video verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from pydantic import BaseModel, ConfigDict

# content_analyser.analyse_video: `return bool(rate > 10.0)`.
LIMIT_PERCENT = 10.0


class ContentVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    every: int  # one frame in `every` was analysed: frame numbers 0, every, 2 × every, …
    sampled: int
    flagged: int
    rate_percent: float
    limit_percent: float = LIMIT_PERCENT
    refused: bool
    # A test render's verdict is over its own frames only (these), as FaceFusion's preview analyses the
    # frame it shows; empty for a whole render's verdict over the whole video.
    frames: tuple[int, ...] = ()


class AnalysisProgress(BaseModel):
    """How far a running content analysis has read the target (`work/<job>/content-analysis-progress.json`)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    frames_read: int
    frame_count: int
    sampled: int
    worker: str = ""
    started_at: float = 0.0
    updated_at: float = 0.0

    @property
    def percent(self) -> float:
        return 100.0 * self.frames_read / self.frame_count if self.frame_count else 0.0


def sample_step(fps: Fraction | float) -> int:
    """FaceFusion's `int(video_fps)`: one analysed frame per whole second of frame rate."""
    return max(1, int(fps))


def sampled_frames(frame_count: int, fps: Fraction | float) -> range:
    """The frame numbers FaceFusion analyses in a whole video of `frame_count` frames."""
    return range(0, frame_count, sample_step(fps))


def judge(flags: Sequence[bool], every: int) -> ContentVerdict:
    """FaceFusion's verdict from the flags of the sampled frames, in their order."""
    sampled, flagged = len(flags), sum(bool(flag) for flag in flags)
    rate = flagged / sampled * 100 if sampled and flagged else 0.0
    return ContentVerdict(
        every=every, sampled=sampled, flagged=flagged, rate_percent=round(rate, 4), refused=rate > LIMIT_PERCENT
    )


def refusal_reason(verdict: ContentVerdict) -> str:
    if verdict.frames:
        return (
            f"FaceFusion's content analyser flagged {verdict.flagged} of the test render's {verdict.sampled} "
            f"frames ({', '.join(map(str, verdict.frames))}): its preview obscures such a frame, the farm "
            "renders none of them"
        )
    return (
        f"FaceFusion's content analyser refused the target: it flagged {verdict.flagged} of the "
        f"{verdict.sampled} frames sampled across the whole video ({verdict.rate_percent:g} %; its limit is "
        f"{verdict.limit_percent:g} %)"
    )
