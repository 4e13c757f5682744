"""FaceFusion 3.8.1 `headless-run` argv, built from small pure fragments.

Read from FaceFusion 3.8.1's facefusion/program.py (the flags), workflows/to_video.py (how the
trim range and the output are used) and ffmpeg.py / ffmpeg_builder.py (what the output flags
turn into).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_worker.engines.facefusion import decided_run
from gpu_worker.engines.facefusion.job_options import option_args

# FaceFusion takes targets by extension (filesystem.is_video, choices.video_formats: avi m4v mkv
# mov mp4 mpeg mxf webm wmv) and wants the output's extension to be the target's. MOV is the one
# where its encoder fix-up (ffmpeg.fix_video_encoder) keeps `rawvideo`, i.e. a lossless output,
# and whose timestamps are exact at any frame rate (Matroska rounds them to milliseconds, and
# FaceFusion seeks by time).
CONTAINER = ".mov"
DECIDED_RUN = Path(decided_run.__file__)
RAW_BYTES_PER_PIXEL = 3  # rawvideo output is rgb24 (ffmpeg_builder.set_pixel_format)


@dataclass(frozen=True)
class RunPaths:
    """Everything one run reads and writes; all absolute, since FaceFusion runs in its own folder."""

    config: Path
    temp: Path
    jobs: Path
    sources: tuple[Path, ...]
    target: Path
    output: Path
    # The job's audio source, a source like the images (FaceFusion tells them apart by the file's ending).
    audio: Path | None = None


def run_paths(folder: Path, source_count: int, audio: Path | None = None) -> RunPaths:
    folder = folder.absolute()
    return RunPaths(
        config=folder / "facefusion.ini",
        temp=folder / "temp",
        jobs=folder / "jobs",
        sources=tuple(folder / f"source-{index}.png" for index in range(source_count)),
        target=folder / f"target{CONTAINER}",
        output=folder / f"output{CONTAINER}",
        audio=audio,
    )


def command_args(python: str, home: Path, content_decided: bool = False) -> list[str]:
    # A job whose content verdict was made once runs FaceFusion without its per-run analysis step.
    script = str(DECIDED_RUN) if content_decided else str(home / "facefusion.py")
    return [python, script, "headless-run"]


def path_args(paths: RunPaths) -> list[str]:
    # An empty config file of our own: FaceFusion's built-in defaults, never a facefusion.ini
    # someone edited in the image. Temp and jobs folders per run: FaceFusion names its temp folder
    # after the target and its job after the current second, so shared ones would collide.
    return [
        "--config-path", str(paths.config),
        "--temp-path", str(paths.temp),
        "--jobs-path", str(paths.jobs),
        "--source-paths", *(str(path) for path in (*paths.sources, *([paths.audio] if paths.audio else []))),
        "--target-path", str(paths.target),
        "--output-path", str(paths.output),
    ]  # fmt: skip


def trim_args(start: int, count: int) -> list[str]:
    """Frames [start, start + count) of the target.

    The end is exclusive in FaceFusion 3.8.1: workflows/to_video.py process_memory_frames renders
    `range(trim_frame_start, trim_frame_end)`, vision.count_trim_frame_total is `end - start`, and
    the disk workflow's ffmpeg `trim=end_frame=` names the first frame dropped.
    """
    return ["--trim-frame-start", str(start), "--trim-frame-end", str(start + count)]


def reference_args(position: int) -> list[str]:
    return ["--reference-frame-number", str(position)]


def output_args(width: int, height: int, frames: int, raw_limit_bytes: int) -> list[str]:
    """Output settings that lose nothing before the worker's own encode.

    `rawvideo` is lossless (rgb24: the bt709 `scale` step of FaceFusion's writer leaves RGB as it
    is, as checked with FFmpeg 9 on its ffmpeg.create_video_writer arguments). Where that would be
    too big for the scratch disk, libx264 at quality 100 (crf 0: lossless in its yuv420p, so only
    what the worker's own yuv420p encode also does is lost: 4:2:0 chroma, limited-range rounding);
    ultrafast, since at crf 0 the preset
    changes only the size. Audio volume 0: FaceFusion then skips its audio step (to_video.py
    restore_audio) and just moves its result, which has no audio to restore anyway.
    """
    if width * height * RAW_BYTES_PER_PIXEL * frames <= raw_limit_bytes:
        video = ["--output-video-encoder", "rawvideo"]
    else:
        video = [
            "--output-video-encoder", "libx264", "--output-video-quality", "100", "--output-video-preset", "ultrafast"
        ]  # fmt: skip
    return [*video, "--output-audio-volume", "0"]


def log_args() -> list[str]:
    # info, not warn: below it FaceFusion disables its progress bars, and the content analyser's
    # verdict shows only in its "analysing" bar.
    return ["--log-level", "info"]


def headless_run_argv(
    python: str,
    home: Path,
    paths: RunPaths,
    options: Mapping[str, object],
    trim: tuple[int, int],
    reference: int,
    size: tuple[int, int],
    raw_limit_bytes: int,
    execution: Sequence[str],
    content_decided: bool = False,
) -> list[str]:
    """The whole command line of one FaceFusion run; `trim` is (first frame, frame count)."""
    start, count = trim
    width, height = size
    return [
        *command_args(python, home, content_decided),
        *path_args(paths),
        *trim_args(start, count),
        *reference_args(reference),
        *option_args(options),
        *output_args(width, height, count, raw_limit_bytes),
        *execution,
        *log_args(),
    ]
