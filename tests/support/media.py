"""Test media made on the fly from what packages ship (no binaries in the repository)."""

from __future__ import annotations

from pathlib import Path

from fusionfleet.media.runner import run_ffmpeg
from fusionfleet.samples import write_video

__all__ = ["ffmpeg", "remux", "write_video"]


def ffmpeg(*args: str) -> None:
    run_ffmpeg(["-hide_banner", "-nostdin", "-loglevel", "error", "-y", *args], timeout_s=120, what="test media")


def remux(source: Path, destination: Path, *extra: str) -> Path:
    ffmpeg("-i", str(source), "-c", "copy", *extra, str(destination))
    return destination
