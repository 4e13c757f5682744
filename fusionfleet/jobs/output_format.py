"""The output video's container and its video and audio encoders, chosen as FaceFusion 3.8.1 chooses them. Pure.

FaceFusion writes the container its output path names (the farm's default output keeps the target's
extension, as FaceFusion's output pattern does), encodes with `output_video_encoder` and
`output_audio_encoder`, and swaps an encoder a container cannot take for one it can
(ffmpeg.fix_video_encoder / fix_audio_encoder: a WebM is always VP9 and Opus, an MP4 or MKV never raw
video, ...). Its pixel format follows the encoder (ffmpeg_builder.set_pixel_format: VP9 in yuva420p,
raw video in rgb24, the rest yuv420p; libx264rgb codes RGB whatever it is asked).

The farm's rules beyond FaceFusion's, each said at submit: encoders the fleet has no hardware for
(AMF, Quick Sync, VideoToolbox; NVENC on a fleet that does not encode with it), and the few
combinations on which FaceFusion's own run fails (raw RGB in an AVI, sound in an MPEG program stream).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from fusionfleet.media.gpu_media import NVENC_CODECS

# FaceFusion's VideoFormat (types.py) by extension, with the FFmpeg muxer that writes each.
MUXERS: Mapping[str, str] = MappingProxyType(
    {
        "avi": "avi", "m4v": "ipod", "mkv": "matroska", "mov": "mov", "mp4": "mp4", "mpeg": "mpeg",
        "mxf": "mxf", "webm": "webm", "wmv": "asf",
    }
)  # fmt: skip
# What each container's output is served as.
CONTENT_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "avi": "video/x-msvideo", "m4v": "video/x-m4v", "mkv": "video/x-matroska", "mov": "video/quicktime",
        "mp4": "video/mp4", "mpeg": "video/mpeg", "mxf": "application/mxf", "webm": "video/webm",
        "wmv": "video/x-ms-wmv",
    }
)  # fmt: skip
DEFAULT_CONTAINER = "mp4"
# Containers whose index FaceFusion moves to the front (ffmpeg_builder.set_faststart).
FASTSTART = frozenset({"m4v", "mov", "mp4"})

# FaceFusion's VideoEncoder list (types.py), in its order; the first the FFmpeg has is its default.
FACEFUSION_VIDEO_ENCODERS = (
    "libx264", "libx264rgb", "libx265", "libvpx-vp9", "h264_nvenc", "hevc_nvenc", "h264_amf", "hevc_amf",
    "h264_qsv", "hevc_qsv", "h264_videotoolbox", "hevc_videotoolbox", "rawvideo",
)  # fmt: skip
DEFAULT_VIDEO_ENCODER = "libx264"
# The encoders of that list every worker has (the static FFmpeg of imageio-ffmpeg: `ffmpeg -encoders`), with
# the profile ("": the encoder's own choice) and pixel format each writes.
CPU_ENCODERS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "libx264": ("high", "yuv420p"),
        "libx264rgb": ("", "rgb24"),
        "libx265": ("main", "yuv420p"),
        "libvpx-vp9": ("", "yuva420p"),
        "rawvideo": ("", "rgb24"),
    }
)
# Encoders no worker of the fleet can run, and why.
UNAVAILABLE_ENCODERS: Mapping[str, str] = MappingProxyType(
    {
        "h264_amf": "needs an AMD GPU's AMF; the fleet's GPUs are NVIDIA",
        "hevc_amf": "needs an AMD GPU's AMF; the fleet's GPUs are NVIDIA",
        "h264_qsv": "needs Intel Quick Sync; the fleet has no Intel GPU",
        "hevc_qsv": "needs Intel Quick Sync; the fleet has no Intel GPU",
        "h264_videotoolbox": "is Apple's VideoToolbox, which runs on macOS only (not in the fleet's FFmpeg)",
        "hevc_videotoolbox": "is Apple's VideoToolbox, which runs on macOS only (not in the fleet's FFmpeg)",
    }
)
# The encoders a job may name whatever the fleet: the CPU ones, and NVENC (judged against the fleet's device).
NAMEABLE_ENCODERS = (*CPU_ENCODERS, *sorted(NVENC_CODECS))

# FaceFusion's AudioEncoder list (types.py).
FACEFUSION_AUDIO_ENCODERS = ("flac", "aac", "libmp3lame", "libopus", "libvorbis", "pcm_s16le", "pcm_s32le")
# The audio encoders each container holds in a file that players play (after FaceFusion's fix); an MP4
# takes Vorbis and PCM from FFmpeg, but most players then refuse the file.
CONTAINER_AUDIO_ENCODERS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "mp4": frozenset({"aac", "libmp3lame", "libopus", "flac"}),
        "m4v": frozenset({"aac"}),
        "mov": frozenset({"aac", "libmp3lame", "pcm_s16le", "pcm_s32le"}),
        "mkv": frozenset(FACEFUSION_AUDIO_ENCODERS),
        "webm": frozenset({"libopus", "libvorbis"}),
        "avi": frozenset({"aac", "libmp3lame", "flac", "pcm_s16le", "pcm_s32le"}),
        "wmv": frozenset({"aac"}),
        "mxf": frozenset({"pcm_s16le"}),
        "mpeg": frozenset(),
    }
)
# Audio codecs each container takes as they are (the farm's engines copy the target's sound), and the
# encoder for any other: a job's sound is copied where it can be, re-encoded once where it cannot.
MKV_AUDIO_CODECS = ("aac", "mp3", "opus", "vorbis", "flac", "ac3", "eac3", "alac", "dts", "pcm_s16le", "pcm_s24le",
                    "pcm_s32le", "pcm_f32le")  # fmt: skip
COPYABLE_AUDIO: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "mp4": frozenset({"aac", "mp3", "opus", "ac3", "eac3", "alac", "flac"}),
        "m4v": frozenset({"aac", "ac3"}),
        "mov": frozenset({"aac", "mp3", "ac3", "eac3", "alac", "pcm_s16le", "pcm_s24le", "pcm_s32le"}),
        "mkv": frozenset(MKV_AUDIO_CODECS),
        "webm": frozenset({"opus", "vorbis"}),
        "avi": frozenset({"mp3", "ac3", "aac", "pcm_s16le"}),
        "wmv": frozenset({"aac", "mp3"}),
        "mxf": frozenset({"pcm_s16le"}),
        "mpeg": frozenset(),
    }
)
REENCODED_AUDIO: Mapping[str, str] = MappingProxyType({"webm": "libopus", "mxf": "pcm_s16le"})


def container_of_key(key: str) -> str | None:
    """The container an output key names (its extension, any case), or None for one FaceFusion writes no video to."""
    name = key.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return extension if extension in MUXERS else None


def default_video_suffix(target_key: str) -> str:
    """A video job's default output extension: the target's, as FaceFusion's output keeps it, where the farm
    writes that container; else `.mp4`."""
    container = container_of_key(target_key)
    return f".{container}" if container and not container_problem(container) else f".{DEFAULT_CONTAINER}"


def fix_video_encoder(container: str, encoder: str) -> str:
    """FaceFusion's ffmpeg.fix_video_encoder: the encoder it really uses for this container."""
    if container in ("m4v", "mpeg", "mxf", "wmv"):
        return "libx264"
    if container in ("mkv", "mp4") and encoder == "rawvideo":
        return "libx264"
    if container == "mov" and encoder == "libvpx-vp9":
        return "libx264"
    if container == "webm":
        return "libvpx-vp9"
    return encoder


def fix_audio_encoder(container: str, encoder: str) -> str:
    """FaceFusion's ffmpeg.fix_audio_encoder: the audio encoder it really uses for this container."""
    if container == "avi" and encoder == "libopus":
        return "aac"
    if container in ("m4v", "mpeg", "wmv"):
        return "aac"
    if container == "mov" and encoder in ("flac", "libopus"):
        return "aac"
    if container == "mxf":
        return "pcm_s16le"
    if container == "webm":
        return "libopus"
    return encoder


def segment_muxer(codec: str) -> str:
    """How a segment (and each chunk) of a job is stored between the workers and the merge: MP4 for H.264 and
    HEVC (exact frame timing), Matroska for VP9 (the only one that keeps its alpha), NUT for raw video."""
    if codec == "libvpx-vp9":
        return "matroska"
    if codec == "rawvideo":
        return "nut"
    return "mp4"


def container_problem(container: str) -> str | None:
    """Why the farm does not write this container, or None."""
    if container == "mpeg":
        return (
            "an MPEG program stream cannot hold the AAC sound FaceFusion writes to it (FaceFusion's own run "
            "fails); use .mp4, .mov or .mkv"
        )
    if container in ("avi", "wmv"):
        # Measured: an AVI's AAC reads 88 ms long, an ASF (WMV) file 82 ms long for 1 s of video, so the
        # merge's check of the output against its source cannot hold. A known gap (docs/engines.md).
        return (
            f"the farm does not write .{container} outputs yet (the merge's check of frames and durations "
            "cannot read them exactly: a known gap); use .mp4, .mov, .mkv or .webm"
        )
    return None


def video_encoder_problem(encoder: str, device: str) -> str | None:
    """Why the fleet cannot encode with a named encoder (`device`: the fleet's encoder device; "" where it is
    not known, as at the API: NVENC is then left to the slicer), or None."""
    if encoder in UNAVAILABLE_ENCODERS:
        return f"options.output_video_encoder: {encoder!r} {UNAVAILABLE_ENCODERS[encoder]}"
    if encoder in NVENC_CODECS and device and device != "nvenc":
        return (
            f"options.output_video_encoder: {encoder!r} needs NVIDIA's NVENC on every render worker, and this "
            f"fleet encodes on the {device} (VIDEO_ENCODER_DEVICE); use {_cpu_twin(encoder)}"
        )
    if encoder not in CPU_ENCODERS and encoder not in NVENC_CODECS:
        return (
            f"options.output_video_encoder: {encoder!r} is not available on this fleet "
            f"(supported: {', '.join(NAMEABLE_ENCODERS)})"
        )
    return None


def _cpu_twin(encoder: str) -> str:
    return "libx265" if encoder.startswith("hevc") else "libx264"


def output_problems(container: str, video_encoder: str, audio_encoder: str | None) -> list[str]:
    """What a container cannot hold of what FaceFusion would put in it (the encoders already fixed)."""
    problems = []
    if problem := container_problem(container):
        problems.append(f"output: .{container}: {problem}")
    if container == "avi" and video_encoder == "rawvideo":
        problems.append(
            "options.output_video_encoder: 'rawvideo' is written as RGB (FaceFusion's rgb24), which an AVI cannot "
            "hold (FaceFusion's own run fails); use a .mov output for raw video"
        )
    if audio_encoder is not None and audio_encoder not in CONTAINER_AUDIO_ENCODERS.get(container, frozenset()):
        held = ", ".join(sorted(CONTAINER_AUDIO_ENCODERS.get(container, ()))) or "none"
        problems.append(
            f"options.output_audio_encoder: {audio_encoder!r} does not belong in a .{container} output that "
            f"players play (supported there: {held})"
        )
    return problems


def copy_or_encode_audio(container: str, codecs: tuple[str, ...] | list[str]) -> str | None:
    """The audio encoder for sound the farm would copy into this container: None to copy it as it is."""
    if all(codec in COPYABLE_AUDIO.get(container, frozenset()) for codec in codecs):
        return None
    return REENCODED_AUDIO.get(container, "aac")
