"""What FaceFusion 3.8.1's workflow and processors need from a job, so a job that lacks it is refused at submit.

FaceFusion finds out late: its processors' `pre_process` refuses a run without a face image
(face_swapper: "choose an image for the source") or an audio file (lip_syncer: "choose an audio
for the source"), and `core.conditional_process` returns 2, without a word, when the workflow does
not fit the target. On a farm that is after the job was queued, planned and analysed; these rules
say it at validation instead (the slicer, `fusionfleet swap`, the tenant API's start), from the
options and the kinds of the job's sources. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fusionfleet.media.sniff import SourceKind

__all__ = [
    "SourceKind",
    "alpha_problems",
    "detector_problems",
    "processors_of",
    "source_problems",
    "target_workflow_problems",
    "workflow_problems",
]

# FaceFusion's default `--processors` (program.py).
DEFAULT_PROCESSORS = ("face_swapper",)
# Processors whose pre_process needs a face image among the sources (face_swapper's has_image check).
NEEDS_FACE_IMAGE = frozenset({"face_swapper"})
# Processors whose pre_process needs an audio file among the sources (lip_syncer's has_audio check).
NEEDS_AUDIO = frozenset({"lip_syncer"})


def processors_of(options: Mapping[str, object]) -> tuple[str, ...]:
    """The processors FaceFusion runs for these options, in order."""
    value = options.get("processors")
    if isinstance(value, list | tuple):
        return tuple(str(item) for item in value)
    return DEFAULT_PROCESSORS


def workflow_problems(options: Mapping[str, object]) -> list[str]:
    """Workflow options whose effect the farm cannot reproduce, whatever the target."""
    if options.get("temp_frame_format") == "jpeg" and options.get("workflow_strategy") == "disk":
        # FaceFusion's disk workflow stores every frame as a JPEG between extraction, each processor and the
        # merge; the farm keeps frames in memory, losslessly. PNG, BMP and TIFF are lossless there too,
        # and in the memory workflow FaceFusion writes no temp frame at all, so those pass as they are.
        return [
            "options.temp_frame_format: 'jpeg' with the disk workflow makes FaceFusion's frames lossy between its "
            "steps, which the farm (frames kept in memory, losslessly) does not reproduce; use png, bmp or tiff, "
            "or the memory workflow"
        ]
    return []


def target_workflow_problems(options: Mapping[str, object], image_target: bool) -> list[str]:
    """A `workflow_mode` that does not fit the target's kind (FaceFusion's core returns 2 without a word)."""
    mode = options.get("workflow_mode")
    if mode == "image-to-image" and not image_target:
        return ["options.workflow_mode: 'image-to-image' renders an image target, and the target is a video "
                "(leave it out, or use 'image-to-video')"]  # fmt: skip
    if mode == "image-to-video" and image_target:
        return ["options.workflow_mode: 'image-to-video' renders a video target, and the target is an image "
                "(leave it out, or use 'image-to-image')"]  # fmt: skip
    return []


def detector_problems(options: Mapping[str, object]) -> list[str]:
    """Face detection set so that FaceFusion's face swapper can never find the source's face."""
    model = options.get("face_detector_model", "yolo_face")
    if "face_swapper" in processors_of(options) and model == "yolo_face" and options.get("face_detector_score") == 1.0:
        # face_detector.detect_with_yolo_face keeps scores *above* the threshold; no score is above 1.
        return [
            "options.face_detector_score: 1.0 lets yolo_face find no face at all (it keeps scores above the "
            "threshold), so the face swapper would refuse every source; use at most 0.95"
        ]
    return []


def source_problems(options: Mapping[str, object], kinds: Sequence[SourceKind]) -> list[str]:
    """What the job's processors need and its sources lack, one sentence each (the kinds in `source` order)."""
    problems = []
    processors = processors_of(options)
    images, audios = kinds.count("image"), kinds.count("audio")
    if audios > 1:
        # FaceFusion hears the first audio source only (get_first(filter_audio_paths(...))).
        problems.append(f"source: {audios} audio files given; FaceFusion hears only the first, so give one audio file")
    for processor in processors:
        if processor in NEEDS_FACE_IMAGE and not images:
            problems.append(f"source: {processor} needs a face image among the sources (JPEG, PNG or WebP)")
        if processor in NEEDS_AUDIO and not audios:
            problems.append(
                f"source: {processor} needs an audio file among the sources (WAV, MP3, FLAC, Ogg/Opus or M4A) "
                "to sync the lips to"
            )
    return problems


# Image formats FaceFusion's temp image and output keep an alpha channel in (cv2.imwrite of its RGBA frame,
# then FFmpeg's png, libwebp, bmp and tiff encoders); JPEG drops it.
ALPHA_IMAGE_FORMATS = frozenset({"png", "webp", "bmp", "tiff"})


def alpha_problems(
    options: Mapping[str, object], video_encoder: str | None, image_formats: tuple[str, str] | None
) -> list[str]:
    """Where FaceFusion would write background_remover's matte as an alpha channel, which the farm's frames
    (BGR, three channels, end to end) do not carry: a known gap, refused rather than written without it.

    FaceFusion merges the matte into its frame (vision.conditional_merge_vision_mask) and keeps it where the
    frame and the output hold alpha: a VP9 video (yuva420p) whose frames carried it (the disk workflow's
    PNG, BMP or TIFF frames, or the memory workflow's `temp_pixel_format` bgra), and an image whose target
    and output formats both hold it. `video_encoder`: the job's encoder (a video); `image_formats`: the
    target's and the output's formats (an image).
    """
    if "background_remover" not in processors_of(options):
        return []
    why = ("the farm's frames carry no alpha channel (a known gap, docs/engines.md), so the background would "
           "come out opaque")  # fmt: skip
    if image_formats is not None:
        target, output = image_formats
        if target in ALPHA_IMAGE_FORMATS and output in ALPHA_IMAGE_FORMATS:
            return [
                f"options.processors: background_remover on a {target.upper()} image with a {output.upper()} "
                f"output: FaceFusion writes the removed background as transparency, and {why}; choose a .jpg "
                "output (no transparency, as FaceFusion writes it)"
            ]
        return []
    disk = options.get("workflow_strategy") == "disk" and options.get("temp_frame_format", "png") != "jpeg"
    if video_encoder == "libvpx-vp9" and (disk or options.get("temp_pixel_format") == "bgra"):
        return [
            "options.processors: background_remover with a VP9 output (.webm or libvpx-vp9) "
            f"{'in the disk workflow' if disk else 'with temp_pixel_format bgra'}: FaceFusion writes the removed "
            f"background as transparency (yuva420p), and {why}; choose another encoder or container, or the "
            "memory workflow with temp_pixel_format bgr24 (FaceFusion then writes no alpha either)"
        ]
    return []
