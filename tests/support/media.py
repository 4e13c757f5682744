"""Test media made on the fly from what packages ship (no binaries in the repository)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from fleetctl.samples import write_video
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import VideoInfo, probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.runner import run_ffmpeg

__all__ = ["decode_all", "ffmpeg", "remux", "write_video"]


def decode_all(path: Path) -> tuple[VideoInfo, list[npt.NDArray[np.uint8]]]:
    """A video's probe and every frame, upright, in order."""
    info = probe_video(RangeReader(FileRangeSource(path), "v"), "v", MediaLimits())
    frames = [image for _, image in iter_frames(RangeReader(FileRangeSource(path), "v"), info, 0, info.frame_count)]
    return info, frames


def ffmpeg(*args: str) -> None:
    run_ffmpeg(["-hide_banner", "-nostdin", "-loglevel", "error", "-y", *args], timeout_s=120, what="test media")


def remux(source: Path, destination: Path, *extra: str) -> Path:
    ffmpeg("-i", str(source), "-c", "copy", *extra, str(destination))
    return destination
