"""The clips the local-stack benchmarks render, kept under .fusionfleet/bench-media so a later run reuses them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetctl.samples import write_video

BENCH_MEDIA = Path(__file__).resolve().parents[1] / ".fusionfleet" / "bench-media"


def bench_clip(name: str, seconds: float, width: int, height: int, **video: Any) -> Path:
    """The clip `name` in the bench-media folder: fleetctl.samples.write_video's (25 fps unless `video` says),
    written only when it is not there yet."""
    BENCH_MEDIA.mkdir(parents=True, exist_ok=True)
    clip = BENCH_MEDIA / name
    if not clip.exists():
        write_video(clip, seconds=seconds, width=width, height=height, **video)
    return clip
