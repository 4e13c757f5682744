"""ffmpeg command lines, built by small pure functions that each return an argv fragment.

Only files the system itself created and named are ever given to ffmpeg (user media is read by
PyAV through a RangeReader), and every input still carries a protocol whitelist and a forced format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from fusionfleet.jobs.audio import AudioCut, AudioPlan, AudioSettings, audio_encode_args
from fusionfleet.jobs.encoding import EncoderSettings
from fusionfleet.jobs.image_output import ImageOutput
from fusionfleet.jobs.output_format import (
    DEFAULT_CONTAINER,
    FASTSTART,
    MUXERS,
    copy_or_encode_audio,
    segment_muxer,
)
from fusionfleet.media.colour import output_filter
from fusionfleet.media.gpu_media import is_nvenc, nvenc_preset

# Audio codecs the MP4 muxer takes as they are (the worker's choice of file for the target's sound).
MP4_AUDIO_CODECS = frozenset({"aac", "mp3", "opus", "ac3", "eac3", "alac", "flac"})


@dataclass(frozen=True)
class AudioFile:
    muxer: str  # PyAV's format name, to write it
    demuxer: str  # ffmpeg's, to read it back


# The target's audio taken out by the worker, by suffix (gpu_worker.merging.audio.audio_file), and a job's audio
# source as the worker copies it (fusionfleet.media.source_audio.copy_audio: its own format's ending).
AUDIO_FILES = {
    ".m4a": AudioFile("mp4", "mov"), ".mka": AudioFile("matroska", "matroska"), ".wav": AudioFile("wav", "wav"),
    ".mp3": AudioFile("mp3", "mp3"), ".flac": AudioFile("flac", "flac"), ".ogg": AudioFile("ogg", "ogg"),
    ".opus": AudioFile("ogg", "ogg"),
}  # fmt: skip


def global_args() -> list[str]:
    return ["-hide_banner", "-nostdin", "-loglevel", "error", "-y"]


def raw_frames_input(width: int, height: int, settings: EncoderSettings) -> list[str]:
    """The engine's frames on stdin: BGR, or BGRA where the job keeps alpha (VP9's yuva420p then codes it)."""
    return [
        "-protocol_whitelist", "pipe",
        "-f", "rawvideo",
        "-pix_fmt", "bgra" if settings.alpha else "bgr24",
        "-s", f"{width}x{height}",
        "-framerate", f"{settings.fps_num}/{settings.fps_den}",
        "-i", "pipe:0",
    ]  # fmt: skip


def file_input(path: Path, demuxer: str, offset_s: float = 0.0) -> list[str]:
    offset = ["-itsoffset", f"{offset_s:.6f}"] if offset_s else []
    return [*offset, "-protocol_whitelist", "file", "-f", demuxer, "-i", str(path)]


def concat_input(list_path: Path) -> list[str]:
    # safe=1 (the default) refuses absolute paths and odd names in the list; ours are relative.
    return ["-protocol_whitelist", "file", "-f", "concat", "-safe", "1", "-i", str(list_path)]


def size_filter(width: int, height: int, settings: EncoderSettings) -> list[str]:
    """Scale frames of another size to the job's (frames an engine made larger, scaled outputs);
    pad odd sizes by repeating the edge pixel."""
    if (width, height) == (settings.width, settings.height):
        return []
    if width + width % 2 == settings.width and height + height % 2 == settings.height:
        pad_right, pad_bottom = settings.width - width, settings.height - height
        return [f"pad={settings.width}:{settings.height},fillborders=right={pad_right}:bottom={pad_bottom}:mode=smear"]
    return [f"scale={settings.width}:{settings.height}:flags=bicubic"]


def video_filters(width: int, height: int, settings: EncoderSettings) -> list[str]:
    """The size, then the job's colour conversion and tags (after FaceFusion's own pixel format where it converts
    first: `EncoderSettings.convert_first`), as one filter chain."""
    colour = output_filter(settings.colour)
    first = [f"format={settings.convert_first}"] if settings.convert_first else []
    chain = [*size_filter(width, height, settings), *first, *([colour] if colour else [])]
    return ["-vf", ",".join(chain)] if chain else []


def nvenc_encoder(settings: EncoderSettings) -> list[str]:
    """NVENC at the job's quality: constant quality `cq` = x264's CRF, an IDR opening every chunk and none
    forced inside (as x264's `keyint`/`scenecut=0`), the same profile, pixel format and timing."""
    return [
        "-c:v", settings.codec,
        "-preset", nvenc_preset(settings.preset),
        "-tune", "hq",
        "-rc", "vbr", "-cq", str(settings.crf), "-b:v", "0",
        "-profile:v", settings.profile,
        "-pix_fmt", settings.pix_fmt,
        "-g", str(settings.keyint), "-forced-idr", "1", "-no-scenecut", "1",
        "-fps_mode", "passthrough",
    ]  # fmt: skip


def vp9_encoder(settings: EncoderSettings) -> list[str]:
    """FaceFusion's VP9: its CRF alone (63..0) and yuva420p (ffmpeg_builder.set_video_quality, set_pixel_format);
    a chunk's first frame is a key frame (each chunk is an encode of its own), none forced inside."""
    return [
        "-c:v", "libvpx-vp9",
        "-crf", str(settings.crf),
        "-pix_fmt", settings.pix_fmt,
        "-threads", str(settings.threads),
        "-g", str(settings.keyint),
        "-fps_mode", "passthrough",
    ]  # fmt: skip


def raw_encoder(settings: EncoderSettings) -> list[str]:
    """FaceFusion's raw video: uncompressed rgb24."""
    return ["-c:v", "rawvideo", "-pix_fmt", settings.pix_fmt, "-fps_mode", "passthrough"]


def video_encoder(settings: EncoderSettings) -> list[str]:
    if is_nvenc(settings.codec):
        return nvenc_encoder(settings)
    if settings.codec == "libvpx-vp9":
        return vp9_encoder(settings)
    if settings.codec == "rawvideo":
        return raw_encoder(settings)
    params = f"keyint={settings.keyint}:min-keyint={settings.keyint}:scenecut=0:open-gop=0"
    x264 = settings.codec in ("libx264", "libx264rgb")
    params_flag = "-x264-params" if x264 else "-x265-params"
    # Frame-parallel encoding is not repeatable under CPU contention (the chaos run found x264
    # frame threads giving different bits for the same frames); slice/row parallelism is.
    if x264:
        params += ":sliced-threads=1" if settings.threads > 1 else ""
    else:
        params += ":frame-threads=1:log-level=error"
    # libx264rgb picks its own profile (High 4:4:4 Predictive for RGB).
    profile = ["-profile:v", settings.profile] if settings.profile else []
    return [
        "-c:v", settings.codec,
        "-preset", settings.preset,
        "-crf", str(settings.crf),
        *profile,
        "-pix_fmt", settings.pix_fmt,
        "-threads", str(settings.threads),
        params_flag, params,
        "-fps_mode", "passthrough",
    ]  # fmt: skip


def segment_output(path: Path, settings: EncoderSettings) -> list[str]:
    """A chunk or segment in the job's segment container (output_format.segment_muxer; the file keeps its
    `.mp4` name whatever holds it: the merge's concat demuxer reads each by its content)."""
    timescale = ["-video_track_timescale", str(settings.timescale)] if segment_muxer(settings.codec) == "mp4" else []
    return ["-an", *timescale, *segment_format(settings.codec), str(path)]


def segment_format(codec: str) -> list[str]:
    """The segments' muxer; Matroska bit-exact (else it writes a random segment UID, and a redelivered
    segment must be the same bytes whichever worker renders it)."""
    muxer = segment_muxer(codec)
    return [*(["-fflags", "+bitexact"] if muxer == "matroska" else []), "-f", muxer]


def encode_segment_argv(width: int, height: int, settings: EncoderSettings, output: Path) -> list[str]:
    """Arguments (after the executable): raw BGR (BGRA) frames on stdin → one segment with the job's settings."""
    return list(
        chain(
            global_args(),
            raw_frames_input(width, height, settings),
            video_filters(width, height, settings),
            video_encoder(settings),
            segment_output(output, settings),
        )
    )


def concat_argv(segment_list: Path, output: Path, codec: str = "libx264") -> list[str]:
    """Join chunks of one segment by stream copy (no audio: segments carry none), in the segments' container."""
    copy = ["-map", "0:v:0", "-c", "copy", *segment_format(codec), str(output)]
    return list(chain(global_args(), concat_input(segment_list), copy))


def join_argv(video_list: Path, output: Path, container: str = DEFAULT_CONTAINER) -> list[str]:
    """Whole videos one after another, by stream copy, as FaceFusion's job-run joins the steps that name one
    output (its `concat_video`: video and audio copied into the output's container, the index up front)."""
    copy = ["-c:v", "copy", "-c:a", "copy", *container_output(output, container)]
    return list(chain(global_args(), concat_input(video_list), copy))


def audio_codec_args(
    codecs: Sequence[str], settings: AudioSettings | None = None, container: str = DEFAULT_CONTAINER
) -> list[str]:
    """The job's audio settings when it has any; else copy audio the output's container accepts and re-encode
    the rest once (all tracks the same way: AAC, or Opus in a WebM, PCM in an MXF)."""
    if settings is not None:
        return audio_encode_args(settings)
    encoder = copy_or_encode_audio(container, list(codecs))
    if encoder is None:
        return ["-c:a", "copy"]
    return ["-c:a", encoder, *(["-b:a", "192k"] if encoder in ("aac", "libopus") else [])]


def container_output(output: Path, container: str) -> list[str]:
    """The output file in its container, its index up front where FaceFusion puts it (set_faststart)."""
    faststart = ["-movflags", "+faststart"] if container in FASTSTART else []
    return [*faststart, "-f", MUXERS[container], str(output)]


def cut_range(duration_s: float, start_s: float = 0.0, seek_zero: bool = False) -> list[str]:
    """FaceFusion's cut of the target's audio to the video (ffmpeg_builder.select_media_range), on the input.

    FaceFusion also seeks to 0.0 when nothing is trimmed, which in an MP4 with video costs nothing; in
    the audio-only MP4 the farm reads, a seek to 0 lands past AAC's priming packet and loses a frame
    of sound, so a start of 0 is left out there. In Matroska (`seek_zero`: the farm's copy of a Matroska
    or WebM target's sound) the seek to 0 drops the first Opus packet in FaceFusion's read and in the
    copy's alike, so it is kept: the samples are FaceFusion's (measured on a WebM target).
    """
    return [*(["-ss", str(start_s)] if start_s or seek_zero else []), "-to", str(duration_s)]


def merge_argv(
    segment_list: Path,
    audio: Path | None,
    audio_codecs: Sequence[str],
    audio_offset_s: float,
    output: Path,
    audio_settings: AudioSettings | None = None,
    plan: AudioPlan | None = None,
    duration_s: float = 0.0,
    cut: AudioCut | None = None,
    container: str = DEFAULT_CONTAINER,
) -> list[str]:
    """Concatenate the segments by stream copy and mux the original audio once over the timeline, into the
    job's container (fusionfleet.jobs.output_format).

    `plan` (fusionfleet.jobs.audio.audio_plan) overrides `audio_settings`: FaceFusion's way cuts the
    audio to `duration_s` (the video's), keeps the first track and always applies the volume filter.
    `cut` (fusionfleet.jobs.audio.audio_cut), where the job's timeline or its audio source says which
    part of the audio is read and how long the output's audio may be, overrides that cut.
    """
    plan = plan or AudioPlan(settings=audio_settings)
    if cut is None:
        cut = AudioCut((0.0, duration_s), duration_s) if plan.cut_to_video else AudioCut()
    inputs = concat_input(segment_list)
    maps = ["-map", "0:v:0"]
    codec = ["-c:v", "copy"]
    length: list[str] = []
    if audio is not None and plan.keep:
        encoded = plan.cut_to_video and plan.settings is not None
        # A trim's start is cut from the decoded sound where it is encoded anyway (sample-exact); a stream
        # copy can only start at a packet, so there the input is seeked.
        trim = cut.window if encoded and cut.window is not None and cut.window[0] > 0 else None
        matroska = AUDIO_FILES[audio.suffix].demuxer == "matroska"
        window = cut_range(cut.window[1], cut.window[0], matroska) if cut.window is not None and trim is None else []
        inputs += [*window, *file_input(audio, AUDIO_FILES[audio.suffix].demuxer, audio_offset_s)]
        maps += ["-map", "1:a:0" if plan.first_track_only else "1:a"]
        if encoded:
            assert plan.settings is not None
            codec += audio_encode_args(plan.settings, always_volume=True, trim=trim)
        else:
            codec += audio_codec_args(audio_codecs, plan.settings, container)
        length = ["-t", str(cut.length_s)] if cut.length_s is not None else []
    return list(
        chain(
            global_args(),
            inputs,
            maps,
            codec,
            length,
            container_output(output, container),
        )
    )


# The encoder each image format is written with (FaceFusion leaves the choice to ffmpeg's image2 muxer,
# which picks these by the output's extension).
IMAGE_ENCODERS = {"jpeg": "mjpeg", "png": "png", "webp": "libwebp", "bmp": "bmp", "tiff": "tiff"}


def image_quality(image_format: str, quality: int) -> list[str]:
    """FaceFusion's set_image_quality: WebP takes the quality itself, the rest a compression 31..0."""
    if image_format == "webp":
        return ["-q:v", str(quality)]
    return ["-q:v", str(round(31 - quality * 0.31))]


def finalize_image_argv(picture: Path, output: Path, image: ImageOutput) -> list[str]:
    """A rendered picture (our own lossless PNG) → the output image at the job's size, format and
    quality: FaceFusion's finalize_image (`-s` to the output's size, its quality mapping)."""
    return list(
        chain(
            global_args(),
            file_input(picture, "png_pipe"),
            ["-s", f"{image.width}x{image.height}"],
            ["-c:v", IMAGE_ENCODERS[image.format]],
            image_quality(image.format, image.quality),
            ["-frames:v", "1", "-update", "1", "-f", "image2", str(output)],
        )
    )
