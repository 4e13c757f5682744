"""Which of a job's options FaceFusion gets as they are, which the engine owns, which it refuses.

Every option of the catalogue is FaceFusion 3.8.1's own, so almost all go to FaceFusion one-to-one
(`fusionfleet.facefusion.options.to_cli_args`). A few are not FaceFusion's business in this pipeline: the
output video settings belong to the worker's own encoder, which reads them from the same options,
and the reference frame is numbered in the whole video while FaceFusion sees one segment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from fusionfleet.facefusion.options import OptionsError, to_cli_args, validate_options
from fusionfleet.facefusion.requirements import SourceKind, processors_of, source_problems, workflow_problems
from fusionfleet.jobs.decisions import tracker_window
from gpu_worker.engines.base import EngineError, EngineJob

__all__ = [
    "ENGINE_OWNED", "check_options", "forwarded", "look_ahead", "option_args", "processors_of", "reference_position",
]  # fmt: skip

_ENCODER = "applied by the worker's encoder when it encodes the segment (fusionfleet.jobs.encoding)"
ENGINE_OWNED: Mapping[str, str] = MappingProxyType(
    {
        "output_video_encoder": _ENCODER,
        "output_video_preset": _ENCODER,
        "output_video_quality": _ENCODER,
        "output_video_scale": _ENCODER,
        "output_video_fps": _ENCODER,
        # The planner plans only the range and every segment is a part of it (fusionfleet.jobs.timeline).
        "trim_frame_start": "the range the job's segments cover",
        "trim_frame_end": "the range the job's segments cover",
        # FaceFusion's input has no audio track; the merge puts the target's audio back.
        "output_audio_volume": "set to 0: the segment FaceFusion renders has no audio",
        "reference_frame_number": "translated into the frame's position in the segment",
        # Checked against the target's kind at submit; every segment FaceFusion gets is a video, an image
        # target's a one-frame one, so its own image workflow is never the one to run here.
        "workflow_mode": "checked against the target at submit; the segment is always a video",
    }
)


def check_options(job: EngineJob) -> dict[str, object]:
    """The job's normalised options, or EngineError naming every option FaceFusion would not take."""
    try:
        options = validate_options(dict(job.options))
    except OptionsError as error:
        raise EngineError("FaceFusion cannot take these options: " + "; ".join(error.problems)) from error
    # Validation refuses all of these at submit (fusionfleet.facefusion.requirements); checked again so a job
    # that reached the worker another way is told the same reason rather than FaceFusion's silence.
    kinds: list[SourceKind] = ["image" for _ in job.sources]
    if job.audio is not None:
        kinds.append("audio")
    problems = workflow_problems(options) + source_problems(options, kinds)
    if problems:
        raise EngineError("FaceFusion cannot render this job: " + "; ".join(problems))
    return options


def forwarded(options: Mapping[str, object]) -> dict[str, object]:
    """The options FaceFusion gets as they are, with its processors spelled out."""
    kept = {name: value for name, value in options.items() if name not in ENGINE_OWNED}
    kept["processors"] = list(processors_of(options))
    return kept


def option_args(options: Mapping[str, object]) -> list[str]:
    """The job's part of FaceFusion's argv, in catalogue order."""
    return to_cli_args(forwarded(options))


def look_ahead(options: Mapping[str, object]) -> int:
    """Frames after a frame that FaceFusion's output for it depends on: its tracker's window, the one a
    test render's plan starts that many frames before the frame (fusionfleet.jobs.decisions.CONTEXT)."""
    return tracker_window(options)


def reference_position(options: Mapping[str, object], indices: Sequence[int], emits: Sequence[bool]) -> int:
    """Where the reference frame is among the frames FaceFusion gets.

    The job numbers it in the whole video, and a segment holds only some of those frames. Where it
    holds the job's frame, that one; else, as the built-in engine does, the segment's first frame of
    its own (after the lead-in), which is frame 0 (FaceFusion's default) in the first segment.
    """
    wanted = options.get("reference_frame_number")
    if isinstance(wanted, int) and wanted in indices:
        return list(indices).index(wanted)
    return next((position for position, emit in enumerate(emits) if emit), 0)
