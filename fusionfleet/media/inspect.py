"""Inspect a file the system produced (a segment, a merged output): what a check compares."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av

from fusionfleet.errors import MediaError


@dataclass(frozen=True)
class MediaSummary:
    frame_count: int
    duration_s: float
    width: int
    height: int
    codec: str
    audio_durations_s: tuple[float, ...]


def summarize(path: Path, decode: bool = True) -> MediaSummary:
    """Count frames by decoding (a file that does not decode fails here, not at the user), or, with
    `decode=False`, by demuxing: for a stream copy of already-checked segments, packets are frames."""
    try:
        with av.open(str(path), mode="r", options={"protocol_whitelist": "file"}) as container:
            if not container.streams.video:
                raise MediaError(f"{path.name} has no video stream")
            stream = container.streams.video[0]
            time_base = stream.time_base or Fraction(1, 1_000_000)
            width, height, codec = (
                stream.codec_context.width,
                stream.codec_context.height,
                stream.codec_context.name,
            )
            if decode:
                frames = sum(1 for _ in container.decode(stream))
            else:
                frames = sum(1 for packet in container.demux(stream) if packet.size)
            duration = float(stream.duration * time_base) if stream.duration else 0.0
            audio = []
            for track in container.streams.audio:
                track_base = track.time_base or Fraction(1, 1_000_000)
                audio.append(float(track.duration * track_base) if track.duration else 0.0)
    except av.FFmpegError as error:
        raise MediaError(f"{path.name} does not decode: {error}") from error
    return MediaSummary(frames, duration, width, height, codec, tuple(audio))
