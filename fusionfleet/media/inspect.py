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
            duration = _duration_s(stream, time_base)
            audio = [_duration_s(track, track.time_base or Fraction(1, 1_000_000)) for track in container.streams.audio]
    except av.FFmpegError as error:
        raise MediaError(f"{path.name} does not decode: {error}") from error
    return MediaSummary(frames, duration, width, height, codec, tuple(audio))


def _duration_s(stream: av.stream.Stream, time_base: Fraction) -> float:
    """A stream's duration: its own where the container stores one (MP4, MOV), else the DURATION tag
    FFmpeg's Matroska and WebM muxer writes for each track; 0.0 when neither says."""
    if stream.duration:
        return float(stream.duration * time_base)
    tag = stream.metadata.get("DURATION") or stream.metadata.get("duration") or ""
    hours, _, rest = tag.partition(":")
    minutes, _, seconds = rest.partition(":")
    try:
        return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    except ValueError:
        return 0.0
