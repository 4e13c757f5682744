"""What a probe found in a video, as plain data: shared by the planner, the messages and the workers
without importing PyAV (the dead-letter and watchdog Lambdas read messages and ship no PyAV)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any


@dataclass(frozen=True)
class AudioTrack:
    index: int
    codec: str
    channels: int
    sample_rate: int
    start_s: float
    duration_s: float


@dataclass(frozen=True)
class VideoInfo:
    container: str
    codec: str
    width: int
    height: int
    rotation: int
    fps_num: int
    fps_den: int
    frame_count: int
    duration_s: float
    start_s: float
    variable_frame_rate: bool
    size_bytes: int
    audio: tuple[AudioTrack, ...] = ()
    # The video's transfer characteristic by ffmpeg's name ("" when unspecified): PQ and HLG targets
    # are tone-mapped to BT.709 when decoded (fusionfleet.media.colour).
    color_transfer: str = ""

    @property
    def fps(self) -> Fraction:
        return Fraction(self.fps_num, self.fps_den)

    @property
    def display_size(self) -> tuple[int, int]:
        """Width and height as shown, after the rotation the container asks for."""
        if self.rotation in (90, 270):
            return self.height, self.width
        return self.width, self.height

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VideoInfo:
        fields = dict(data)
        fields["audio"] = tuple(AudioTrack(**track) for track in data.get("audio", ()))
        return cls(**fields)


@dataclass(frozen=True)
class AudioInfo:
    """What a probe found in an audio source: plain data that travels in the job's context."""

    container: str  # the demuxer its bytes were sniffed as (fusionfleet.media.sniff.AUDIO_CONTAINERS)
    codec: str
    sample_rate: int
    channels: int
    duration_s: float

    @property
    def suffix(self) -> str:
        """The file name ending FaceFusion recognises this format by (filesystem.is_audio)."""
        if self.container == "ogg":
            return ".opus" if self.codec in ("opus", "libopus") else ".ogg"
        return {"wav": ".wav", "mp3": ".mp3", "flac": ".flac", "mov": ".m4a"}[self.container]

    @property
    def muxer(self) -> str:
        return "ipod" if self.container == "mov" else self.container

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
