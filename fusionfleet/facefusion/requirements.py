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
    "image_keeps_alpha",
    "processors_of",
    "source_problems",
    "target_workflow_problems",
    "video_keeps_alpha",
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
# The one video encoder FaceFusion writes alpha with (ffmpeg_builder.set_pixel_format, keep_video_alpha: yuva420p).
ALPHA_VIDEO_ENCODER = "libvpx-vp9"
# background_remover's models whose colour is the model's own picture, not the frame's (corridor_key's
# forward gives a matte and a new picture): they change the frame even where the matte is dropped.
RECOLOURING_MODELS = frozenset({"corridor_key_1024", "corridor_key_2048"})


def video_keeps_alpha(options: Mapping[str, object], video_encoder: str) -> bool:
    """Whether FaceFusion writes background_remover's matte into this video as transparency.

    Its processors merge the matte into the frame (vision.conditional_merge_vision_mask); it reaches the
    encoder only where the frames carry it (the disk workflow's PNG, BMP or TIFF temp frames, read and
    written with their alpha; in the memory workflow only with `temp_pixel_format` bgra, else the writer's
    bgr24 pipe drops it) and the encoder holds it (VP9 in yuva420p; every other one is yuv420p or rgb24).
    """
    if "background_remover" not in processors_of(options) or video_encoder != ALPHA_VIDEO_ENCODER:
        return False
    if options.get("workflow_strategy") == "disk":
        return options.get("temp_frame_format", "png") != "jpeg"
    return options.get("temp_pixel_format") == "bgra"


def image_keeps_alpha(options: Mapping[str, object], target_format: str, output_format: str) -> bool:
    """Whether FaceFusion writes background_remover's matte into this image as transparency: its temp image is
    in the target's format (cv2.imwrite keeps the alpha in PNG, WebP, BMP and TIFF, drops it in JPEG), and
    finalize_image's FFmpeg keeps it where the output's format holds it."""
    return (
        "background_remover" in processors_of(options)
        and target_format in ALPHA_IMAGE_FORMATS
        and output_format in ALPHA_IMAGE_FORMATS
    )


def _alpha_of(colour: object) -> int:
    """The alpha of a fill or despill colour as FaceFusion normalises it (normalizer.normalize_color: one value
    is grey, two or three are opaque, four name it)."""
    values = list(colour) if isinstance(colour, list | tuple) else []
    return int(values[3]) if len(values) == 4 else (255 if values else 0)


def alpha_problems(
    options: Mapping[str, object], video_encoder: str | None, image_formats: tuple[str, str] | None
) -> list[str]:
    """background_remover where it would change nothing: its matte dropped (the output keeps no alpha, as
    FaceFusion writes it: `video_keeps_alpha`, `image_keeps_alpha`), a fill and a despill colour of alpha 0
    (FaceFusion's defaults: the picture's colours are left as they are) and a model that keeps the frame's
    colour. FaceFusion runs it and writes the target unchanged; the farm says so at submit instead.
    `video_encoder`: the job's encoder (a video); `image_formats`: the target's and the output's formats."""
    if "background_remover" not in processors_of(options):
        return []
    if image_formats is not None:
        kept = image_keeps_alpha(options, *image_formats)
    else:
        kept = video_encoder is not None and video_keeps_alpha(options, video_encoder)
    fill = _alpha_of(options.get("background_remover_fill_color", (0, 0, 0, 0)))
    despill = _alpha_of(options.get("background_remover_despill_color", (0, 0, 0, 0)))
    model = str(options.get("background_remover_model", "modnet"))
    if kept or fill or despill or model in RECOLOURING_MODELS:
        return []
    where = (
        f"a {image_formats[1].upper()} output of a {image_formats[0].upper()} target holds none"
        if image_formats is not None
        else "this video output holds none"
    )
    how = (
        "a PNG, WebP, BMP or TIFF target and output"
        if image_formats is not None
        else "a .webm or .mkv output in VP9 (libvpx-vp9) with temp_pixel_format bgra, or the disk workflow"
    )
    return [
        "options.processors: background_remover would change nothing: FaceFusion keeps the removed background "
        f"only as transparency, {where}, and the fill colour's alpha is 0 (its default); give "
        "background_remover_fill_color an alpha above 0 (e.g. 0 255 0 255 paints it green), or write "
        f"transparency: {how}"
    ]
