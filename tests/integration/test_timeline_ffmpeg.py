"""The timeline's frame mapping is FFmpeg's own: FaceFusion's writer and extractor commands, run on numbered
frames by FFmpeg 9 (the fleet's) and FFmpeg 6 (FaceFusion's, where its environment is here), shown frame
for frame to be the frames `Timeline.shown` says."""

from __future__ import annotations

import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from fleetctl.harness.facefusion import binaries_dir, facefusion_python
from fusionfleet.jobs.timeline import timeline
from fusionfleet.media.runner import ffmpeg_exe

SIDE = 16
FRAME = SIDE * SIDE * 3


def binaries() -> list[str]:
    found = [ffmpeg_exe()]
    if facefusion_python().exists():
        found.append(str(binaries_dir() / "ffmpeg"))
    return found


def numbered(count: int) -> bytes:
    return b"".join(bytes([index % 256]) * FRAME for index in range(count))


def shown(raw: bytes) -> list[int]:
    return [raw[offset] for offset in range(0, len(raw), FRAME)]


def expected(options: dict[str, object], count: int, fps: Fraction) -> list[int]:
    line = timeline(options, count, fps)
    return [frame % 256 for frame in range(line.start, line.end) for _ in range(line.shown(frame))]


def raw_args(rate: str) -> list[str]:
    return ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{SIDE}x{SIDE}", "-r", rate]


@pytest.mark.parametrize("ffmpeg", binaries())
@pytest.mark.parametrize(
    ("fps", "options"),
    [
        (Fraction(25), {"output_video_fps": 30.0, "trim_frame_start": 7, "trim_frame_end": 93}),
        (Fraction(30000, 1001), {"output_video_fps": 60.0}),
        (Fraction(24), {"output_video_fps": 25.0, "trim_frame_start": 11}),
        (Fraction(25), {"output_video_fps": 15.0, "trim_frame_end": 80}),
    ],
)
def test_facefusions_memory_writer_shows_the_frames_the_timeline_says(
    ffmpeg: str, fps: Fraction, options: dict[str, object]
) -> None:
    # GIVEN the frames of the range piped as FaceFusion's writer takes them (`-r temp -i pipe:0`, fps=out)
    count = 100
    line = timeline(options, count, fps)
    piped = numbered(count)[line.start * FRAME : line.end * FRAME]
    temp, out = str(float(line.temp_fps)), str(float(line.output_fps))
    written = subprocess.run(
        [ffmpeg, "-loglevel", "error", *raw_args(temp), "-i", "pipe:0", "-vf", f"fps={out}", "-f", "rawvideo",
         "-pix_fmt", "rgb24", "pipe:1"], input=piped, capture_output=True, check=True,
    ).stdout  # fmt: skip
    # THEN FFmpeg shows exactly the frames the timeline says, each as many times
    assert shown(written) == expected(options, count, fps)


@pytest.mark.parametrize("ffmpeg", binaries())
@pytest.mark.parametrize(
    ("fps", "options"),
    [
        (Fraction(25), {"output_video_fps": 15.0, "trim_frame_start": 7, "trim_frame_end": 83}),
        (Fraction(30), {"output_video_fps": 12.0, "trim_frame_start": 30}),
        (Fraction(25), {"output_video_fps": 24000 / 1001, "trim_frame_start": 3, "trim_frame_end": 61}),
    ],
)
def test_facefusions_disk_extraction_keeps_the_frames_the_timeline_says(
    ffmpeg: str, fps: Fraction, options: dict[str, object], tmp_path: Path
) -> None:
    # GIVEN a lossless target of numbered frames
    count, target = 100, tmp_path / "target.mp4"
    subprocess.run(
        [ffmpeg, "-loglevel", "error", *raw_args(f"{fps.numerator}/{fps.denominator}"), "-i", "pipe:0",
         "-c:v", "libx264rgb", "-qp", "0", "-g", "1", str(target)], input=numbered(count), check=True,
    )  # fmt: skip
    # WHEN FaceFusion's disk workflow extracts the range (trim, then fps at the lower rate, -vsync 0)
    line = timeline({**options, "workflow_strategy": "disk"}, count, fps)
    assert line.mode == "select"
    chain = f"trim=start_frame={line.start}:end_frame={line.end},fps={float(line.temp_fps)}"
    # (FaceFusion's `-vsync 0`; FFmpeg 7 on calls it `-fps_mode passthrough`)
    passthrough = ["-vsync", "0"] if ffmpeg != ffmpeg_exe() else ["-fps_mode", "passthrough"]
    extracted = subprocess.run(
        [ffmpeg, "-loglevel", "error", "-i", str(target), "-vf", chain, *passthrough, "-f", "rawvideo",
         "-pix_fmt", "rgb24", "pipe:1"], capture_output=True, check=True,
    ).stdout  # fmt: skip
    # THEN it keeps exactly the frames the timeline says
    assert shown(extracted) == expected({**options, "workflow_strategy": "disk"}, count, fps)
