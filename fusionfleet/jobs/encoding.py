"""The per-job encoder settings, fixed at planning so every segment concatenates by stream copy.

Built from a validated manifest's options and the probed video: which options the fleet takes is
decided once, in the manifest's validation pass (fusionfleet.jobs.manifest), before any media is read.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from fusionfleet.facefusion.requirements import video_keeps_alpha
from fusionfleet.jobs.audio import audio_plan
from fusionfleet.jobs.manifest import check_encoder_options, invalid_manifest
from fusionfleet.jobs.output_format import (
    CPU_ENCODERS,
    DEFAULT_CONTAINER,
    fix_video_encoder,
    output_problems,
    video_encoder_problem,
)
from fusionfleet.media.colour import BT709
from fusionfleet.media.gpu_media import cpu_codec, job_codec

DEFAULT_ENCODER = "libx264"
DEFAULT_QUALITY = 80
DEFAULT_PRESET = "veryfast"
LOSSLESS_H264_PROFILE = "high444"
CHUNK_SECONDS = 2.0


@dataclass(frozen=True)
class EncoderSettings:
    codec: str
    profile: str
    pix_fmt: str
    crf: int
    preset: str
    fps_num: int
    fps_den: int
    width: int
    height: int
    timescale: int
    keyint: int
    # Part of the job's settings: x264's output depends on its thread count, and a redelivered
    # segment must come out byte-identical whichever worker renders it.
    threads: int = 2
    # Checkpoint granularity inside a segment, fixed per job for the same reason.
    chunk_frames: int = 0
    # The output's colour: "bt709" converts with BT.709's matrix in TV range and tags it so, as
    # FaceFusion writes (fusionfleet.media.colour); "" (jobs planned before) converts untagged.
    colour: str = ""
    # The output's container (fusionfleet.jobs.output_format): the merge writes it, and the codec is the one
    # FaceFusion would use in it. Jobs planned before containers were chosen are MP4.
    container: str = DEFAULT_CONTAINER
    # The frames carry FaceFusion's alpha (background_remover's matte, where FaceFusion writes it: VP9 in
    # yuva420p): the engine yields BGRA, piped to the encoder as such, and the segments keep it to the output.
    alpha: bool = False
    # A pixel format the frames are converted to before the colour conversion: FaceFusion's disk workflow merges
    # its frames into VP9 through `format=yuva420p` first (ffmpeg_builder.keep_video_alpha, ahead of
    # convert_color_space), so its YUV comes from BT.601's matrix then converted to BT.709's. "": none.
    convert_first: str = ""

    @property
    def fps(self) -> Fraction:
        return Fraction(self.fps_num, self.fps_den)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderSettings:
        return cls(**data)


def quality_to_crf(quality: int, codec: str = "libx264") -> int:
    """FaceFusion's output_video_quality (0..100, higher is better) to the encoder's CRF: x264/x265's 51..0,
    VP9's 63..0 (ffmpeg_builder.set_video_quality). Raw video has none."""
    if codec == "libvpx-vp9":
        return round(63 - quality * 0.63)
    return round(51 - quality * 0.51)


def track_timescale(fps: Fraction) -> int:
    """A timescale in which one frame lasts a whole number of ticks, at least 10000 ticks a second."""
    multiple = max(1, math.ceil(10_000 / fps.numerator))
    return fps.numerator * multiple


def even(value: int) -> int:
    """4:2:0 chroma needs even dimensions; odd ones are padded by one edge pixel."""
    return value + (value % 2)


def output_size(width: int, height: int, scale: float, engine: str) -> tuple[int, int]:
    """The job's output picture size, decided at planning so every segment and the merge agree. Pure.

    `facefusion`: FaceFusion's own (vision.scale_resolution): each side times the scale, truncated,
    then rounded to an even number, above the target's too (up to its 8×). FaceFusion processes at the
    smaller of that and the target's size (vision.restrict_video_resolution; the warm engine does the
    same) and its writer scales what comes back (larger, from the frame enhancer, or at the target's
    size) to this size: the segments' encoder does it here. The built-in engines: scaled and rounded,
    odd sides padded by one pixel.
    """
    if engine == "facefusion":
        return round(int(width * scale) / 2) * 2, round(int(height * scale) / 2) * 2
    if scale != 1.0:
        width, height = max(2, round(width * scale)), max(2, round(height * scale))
    return even(width), even(height)


MAX_OUTPUT_SIDE = 8192  # H.264 and HEVC encoders' widest picture (level 6.2: 8192×4320)
MAX_OUTPUT_PIXELS = 8192 * 4320


def output_size_problem(width: int, height: int) -> str | None:
    """Why an output of this size cannot be encoded, said at submit; None when it can. Pure."""
    if max(width, height) > MAX_OUTPUT_SIDE or width * height > MAX_OUTPUT_PIXELS:
        return (
            f"options.output_video_scale: the output would be {width}×{height}, larger than the encoders' "
            f"{MAX_OUTPUT_SIDE}×4320; choose a smaller scale"
        )
    return None


def encoder_settings(
    width: int,
    height: int,
    fps: Fraction,
    options: dict[str, Any],
    max_segment_frames: int,
    threads: int = 2,
    device: str = "cpu",
    engine: str = "",
    container: str = DEFAULT_CONTAINER,
) -> EncoderSettings:
    """The settings for one job, from the displayed picture size, the rate, the job's options and the
    output's container (its encoder the one FaceFusion would use there: output_format.fix_video_encoder).

    The options are a validated manifest's; any other caller (the single-machine `swap`) gets the
    manifest's JobRejected, with every encoder problem, for options the fleet does not take. What the
    fleet's device or the container rules out is refused here, at planning, before anything is queued.
    """
    check_encoder_options(options, device)
    named = options.get("output_video_encoder")
    # The fleet's encoder device decides the default (fusionfleet.media.gpu_media): once, for every segment.
    codec = fix_video_encoder(container, job_codec(None if named is None else str(named), DEFAULT_ENCODER, device))
    audio = audio_plan(engine, options, container).settings
    # The encoder FaceFusion's swap put in its place (a named one was judged by check_encoder_options).
    problems = [problem for problem in [video_encoder_problem(codec, device)] if problem]
    problems += output_problems(container, codec, audio.encoder if audio is not None else None)
    if problems:
        raise invalid_manifest(problems)
    preset = str(options.get("output_video_preset", DEFAULT_PRESET))
    quality = int(options.get("output_video_quality", DEFAULT_QUALITY))
    width, height = output_size(width, height, float(options.get("output_video_scale", 1.0)), engine)
    profile, pix_fmt = CPU_ENCODERS[cpu_codec(codec)]
    crf = quality_to_crf(quality, codec)
    if codec == "libx264" and crf == 0:
        # Quality 100 is x264's lossless mode (FaceFusion passes CRF 0 too), which the High profile
        # refuses; High 4:4:4 Predictive is the profile lossless H.264 is coded in, whatever the chroma.
        profile = LOSSLESS_H264_PROFILE
    chunk = max(1, min(max_segment_frames, round(float(fps) * CHUNK_SECONDS)))
    disk_vp9 = engine == "facefusion" and codec == "libvpx-vp9" and options.get("workflow_strategy") == "disk"
    return EncoderSettings(
        codec=codec,
        profile=profile,
        pix_fmt=pix_fmt,
        crf=crf,
        preset=preset,
        fps_num=fps.numerator,
        fps_den=fps.denominator,
        width=width,
        height=height,
        timescale=track_timescale(fps),
        # An IDR at the start of every chunk (so chunks and segments join by stream copy), none forced inside.
        keyint=chunk,
        threads=threads,
        chunk_frames=chunk,
        colour=BT709,
        container=container,
        alpha=engine == "facefusion" and video_keeps_alpha(options, codec),
        convert_first="yuva420p" if disk_vp9 else "",
    )
