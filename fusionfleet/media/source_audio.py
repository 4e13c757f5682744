"""An audio source (what FaceFusion's lip syncer hears, and what the output then carries): probe and copy.

FaceFusion tells an audio source from a face image by its file name (flac, m4a, mp3, ogg, opus,
wav) and hands it to its own ffmpeg. Here the file's first bytes decide (fusionfleet.media.sniff), it
is opened only with that demuxer and the safe demuxer options, one packet is decoded to prove it
plays, and what reaches FaceFusion or the merge's ffmpeg is a copy this code wrote: the first audio
stream's packets, unchanged, in a fresh file of the same format (`copy_audio`). So no playlist,
concat script or data reference in an upload ever reaches ffmpeg, and the samples are the user's.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from fusionfleet.errors import InputRejected, MediaError
from fusionfleet.media.info import AudioInfo
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import SAFE_DEMUXER_OPTIONS, duration_within
from fusionfleet.media.ranges import RangeReader
from fusionfleet.media.sniff import AUDIO_CONTAINERS, MOV, SNIFF_BYTES, sniff_audio

__all__ = ["CODECS", "AudioInfo", "copy_audio", "probe_audio"]

# The codecs each container may carry here, and the muxer and file name FaceFusion reads the copy by.
# WAV is PCM only: FFmpeg's WAV muxer takes anything, players (and FaceFusion's format list) do not.
_PCM = ("pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_u8")
CODECS: dict[str, tuple[str, ...]] = {
    "wav": _PCM,
    "mp3": ("mp3", "mp3float"),
    "flac": ("flac",),
    "ogg": ("vorbis", "opus", "libvorbis", "libopus"),
    MOV: ("aac", "alac"),
}


def _open(source: RangeReader, demuxer: str, what: str) -> av.container.InputContainer:
    try:
        return av.open(source, mode="r", format=demuxer, options=dict(SAFE_DEMUXER_OPTIONS))
    except av.FFmpegError as error:
        raise InputRejected(f"{what} could not be read as {AUDIO_CONTAINERS[demuxer]}: {error}") from error


def _audio_stream(container: av.container.InputContainer, demuxer: str, what: str) -> Any:
    # Cover art (an attached picture) is not a video.
    cover = av.stream.Disposition.attached_pic
    if any(not stream.disposition & cover for stream in container.streams.video):
        raise InputRejected(f"{what} is a video, not an audio file: give a video as the target, or its sound as audio")
    if not container.streams.audio:
        raise InputRejected(f"{what} holds no audio stream")
    stream = container.streams.audio[0]
    codec = stream.codec_context.name
    if codec not in CODECS[demuxer]:
        raise InputRejected(
            f"{what} carries {codec} audio in {AUDIO_CONTAINERS[demuxer]}, which is not taken here "
            f"(accepted: {', '.join(CODECS[demuxer])})"
        )
    return stream


def probe_audio(reader: RangeReader, what: str, limits: MediaLimits) -> AudioInfo:
    """The source's format, codec and length, or InputRejected saying what is wrong with it."""
    if reader.size == 0:
        raise InputRejected(f"{what} is empty (0 bytes)")
    if reader.size > limits.max_bytes:
        raise InputRejected(f"{what} is {reader.size} bytes, over the limit of {limits.max_bytes} bytes")
    demuxer = sniff_audio(reader.head(SNIFF_BYTES))
    if demuxer is None:
        raise InputRejected(f"{what} is not an audio file ({', '.join(AUDIO_CONTAINERS.values())})")
    with _open(reader, demuxer, what) as container:
        stream = _audio_stream(container, demuxer, what)
        context = stream.codec_context
        time_base = stream.time_base or Fraction(1, max(1, context.sample_rate or 1))
        duration = duration_within(container, stream, time_base, limits, what)
        try:
            decoded = next(iter(container.decode(stream)), None)
        except av.FFmpegError as error:
            raise InputRejected(f"{what} does not decode: {error}") from error
        if decoded is None or not context.sample_rate:
            raise InputRejected(f"{what} contains no decodable sound")
        info = AudioInfo(demuxer, context.name, int(context.sample_rate), int(context.channels), round(duration, 6))
    if info.duration_s <= 0:
        raise InputRejected(f"{what} has no duration")
    return info


def copy_audio(reader: RangeReader, info: AudioInfo, folder: Path, what: str) -> Path:
    """The source's first audio stream, packets unchanged, in a new file of its format; its path.

    Named `source-audio` plus the ending FaceFusion knows the format by. The packets are the user's
    (nothing is decoded or re-encoded), so FaceFusion and the merge hear exactly what was uploaded.
    """
    path = folder / f"source-audio{info.suffix}"
    try:
        with _open(reader, info.container, what) as source:
            stream = _audio_stream(source, info.container, what)
            with av.open(str(path), mode="w", format=info.muxer) as sink:
                copied = sink.add_stream_from_template(stream)
                for packet in source.demux(stream):
                    if packet.dts is None:
                        continue
                    packet.stream = copied
                    sink.mux(packet)
    except av.FFmpegError as error:
        raise MediaError(f"{what} could not be copied: {error}") from error
    return path
