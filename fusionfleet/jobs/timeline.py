"""Which target frames a job renders and how they become the output's frames: FaceFusion's trim and
`output_video_fps`, decided once at planning so every segment and the merge agree frame for frame. Pure.

Read from FaceFusion 3.8.1 (workflows/to_video.py, vision.py, ffmpeg.py, ffmpeg_builder.py):

- `trim_frame_start`/`trim_frame_end` are clamped to the target (vision.restrict_trim_frame) and
  frames [start, end) are rendered; the tracker's neighbours may lie outside them.
- The rate frames are processed at is `temp = min(target fps, output_video_fps)`
  (vision.restrict_video_fps), and the output runs at `output_video_fps`.
- Its memory workflow (the default) pipes every frame of the range into its writer at `temp`
  (`-r temp -i pipe:0`) with ffmpeg's `fps=output_video_fps` filter: a higher rate repeats frames
  (`duplicate`), a lower one keeps every frame at the lower rate, which slows the video down
  (`retime`: FaceFusion's own result, its audio as long as the range).
- Its disk workflow extracts frames with `trim=…,fps=temp` on the target's own timestamps and
  numbers them from `start` (`select` at a lower rate: frames dropped, the n-th kept frame counted
  as frame `start + n`); merging at `output_video_fps` repeats frames at a higher rate.

The fps filter's rule, checked against FFmpeg 6 (FaceFusion's) and 9 (the fleet's) frame by frame in
tests/integration/test_timeline_ffmpeg.py: frame k's time in output frames is
`P(k) = round((k - origin) × out / in)`, rounded half away from zero, and output slot t shows the
last frame with `P(k) <= t`; output ends at `P(end)`. So frame k is shown `P(k + 1) - P(k)` times.
The lip syncer hears the source audio at `frame number - start` frames of `temp`
(workflows/core.conditional_get_source_audio_frame).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Literal

Mode = Literal["same", "duplicate", "retime", "select"]

# FaceFusion's normalize_fps: an output rate is kept within 1..60.
MIN_FPS, MAX_FPS = 1.0, 60.0


def _round(value: Fraction) -> int:
    """AV_ROUND_NEAR_INF: to the nearest integer, halves away from zero."""
    return math.floor(value + Fraction(1, 2)) if value >= 0 else -math.floor(-value + Fraction(1, 2))


def rate(value: float | Fraction) -> Fraction:
    """A frame rate as FFmpeg reads the decimal text FaceFusion writes (av_d2q: within 1/1001000)."""
    return Fraction(value).limit_denominator(1_001_000) if not isinstance(value, Fraction) else value


@dataclass(frozen=True)
class Timeline:
    """Target frames [start, end) rendered, and the output at `output_fps`; see the module's notes."""

    start: int
    end: int
    fps_num: int  # the target's rate
    fps_den: int
    out_num: int  # the output's rate
    out_den: int
    mode: Mode

    @property
    def source_fps(self) -> Fraction:
        return Fraction(self.fps_num, self.fps_den)

    @property
    def output_fps(self) -> Fraction:
        return Fraction(self.out_num, self.out_den)

    @property
    def temp_fps(self) -> Fraction:
        """The rate FaceFusion processes frames at (and hears the source audio at)."""
        return min(self.source_fps, self.output_fps)

    @property
    def frames(self) -> int:
        """Target frames rendered."""
        return self.end - self.start

    def _position(self, frame: int) -> int:
        """P(frame): where `frame` starts on the output's frame grid (in output frames, from the range's start)."""
        if self.mode in ("same", "retime"):
            return frame - self.start
        ratio = self.output_fps / self.source_fps
        if self.mode == "duplicate":  # piped from the range's start, timed from 0
            return _round((frame - self.start) * ratio)
        return _round(frame * ratio) - _round(self.start * ratio)  # the target's own timestamps

    def shown(self, frame: int) -> int:
        """How many output frames show target frame `frame` (0: dropped at a lower rate)."""
        if not self.start <= frame < self.end:
            return 0
        return self._position(frame + 1) - self._position(frame)

    def output_frames(self, first: int | None = None, end: int | None = None) -> int:
        """Output frames made from target frames [first, end) (the whole range by default)."""
        first = self.start if first is None else max(first, self.start)
        end = self.end if end is None else min(end, self.end)
        return max(0, self._position(end) - self._position(first))

    def frame_number(self, frame: int) -> int:
        """The number FaceFusion's processors give target frame `frame` (its disk workflow at a lower rate
        counts kept frames from `start`)."""
        if self.mode == "select":
            return self.start + self._position(frame)
        return frame

    @property
    def duration_s(self) -> Fraction:
        """The output video's length."""
        return self.output_frames() / self.output_fps

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def output_rate(options: Mapping[str, object], source_fps: Fraction) -> Fraction:
    """The output's rate: the job's `output_video_fps` (FaceFusion keeps it within 1..60), else the target's."""
    wanted = options.get("output_video_fps")
    if wanted is None:
        return source_fps
    assert isinstance(wanted, int | float)
    return rate(max(MIN_FPS, min(float(wanted), MAX_FPS)))


def trim_range(options: Mapping[str, object], frame_count: int) -> tuple[int, int]:
    """FaceFusion's restrict_trim_frame: each end clamped to the target, the missing ones its ends."""
    start, end = options.get("trim_frame_start"), options.get("trim_frame_end")
    first = max(0, min(int(start), frame_count)) if isinstance(start, int) else 0
    last = max(0, min(int(end), frame_count)) if isinstance(end, int) else frame_count
    return first, last


def trim_problem(options: Mapping[str, object], frame_count: int) -> str | None:
    """Why the job's trim leaves no frame to render (FaceFusion says only "temp frames not found"), or None."""
    first, last = trim_range(options, frame_count)
    if last > first:
        return None
    given = ", ".join(f"{name} {options[name]}" for name in ("trim_frame_start", "trim_frame_end") if name in options)
    return f"options: {given} leave no frame of the target's {frame_count} to render"


def timeline(options: Mapping[str, object], frame_count: int, source_fps: Fraction) -> Timeline:
    """The job's timeline from its options and the target (a validated job: its trim leaves frames)."""
    first, last = trim_range(options, frame_count)
    out = output_rate(options, source_fps)
    if out == source_fps:
        mode: Mode = "same"
    elif out > source_fps:
        mode = "duplicate"
    else:
        mode = "select" if options.get("workflow_strategy") == "disk" else "retime"
    return Timeline(first, last, source_fps.numerator, source_fps.denominator, out.numerator, out.denominator, mode)
