"""Probe a target video: what the planner needs, read through a RangeReader with PyAV.

The demuxer is the one `sniff_video` chose and nothing else; network protocols are off (the
reader does the I/O), external data references stay disabled, and every read is bounded by the
reader's deadline.
"""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction
from typing import Any

import av

from fusionfleet.errors import InputRejected
from fusionfleet.media.colour import transfer_name
from fusionfleet.media.info import AudioTrack, VideoInfo
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.ranges import RangeReader
from fusionfleet.media.sniff import SNIFF_BYTES, VIDEO_CONTAINERS, sniff_video

# AudioTrack and VideoInfo live in fusionfleet.media.info (no PyAV there); they are re-exported here
# for the modules that probe and use them together.
__all__ = ["SAFE_DEMUXER_OPTIONS", "AudioTrack", "VideoInfo", "frame_timestamps", "open_video", "probe_video"]

# No protocol matches "none": a demuxer that tries to open another resource is refused.
SAFE_DEMUXER_OPTIONS = {"protocol_whitelist": "none", "enable_drefs": "0"}


def open_video(reader: RangeReader, demuxer: str, what: str, hwaccel: Any = None) -> av.container.InputContainer:
    """`hwaccel`: PyAV's hardware decoder for the video stream (NVDEC: gpu_worker/rendering/media_probe.py)."""
    try:
        return av.open(reader, mode="r", format=demuxer, options=dict(SAFE_DEMUXER_OPTIONS), hwaccel=hwaccel)
    except av.FFmpegError as error:
        container = VIDEO_CONTAINERS.get(demuxer, demuxer)
        raise InputRejected(f"{what} could not be read as {container}: {_ffmpeg_reason(error)}") from error


def _ffmpeg_reason(error: Exception) -> str:
    message = str(error)
    if "moov atom not found" in message or "Invalid data found" in message:
        return "the file is truncated or damaged (no index found)"
    return message


def _audio_tracks(container: av.container.InputContainer) -> tuple[AudioTrack, ...]:
    tracks = []
    for stream in container.streams.audio:
        context = stream.codec_context
        time_base = stream.time_base or Fraction(1, max(1, context.sample_rate or 1))
        duration = float(stream.duration * time_base) if stream.duration else 0.0
        if not duration and container.duration:
            duration = container.duration / 1_000_000
        start = float(stream.start_time * time_base) if stream.start_time is not None else 0.0
        tracks.append(
            AudioTrack(
                index=stream.index,
                codec=context.name,
                channels=context.channels,
                sample_rate=context.sample_rate,
                start_s=start,
                duration_s=duration,
            )
        )
    return tuple(tracks)


def frame_timestamps(
    container: av.container.InputContainer, stream: Any, max_frames: int, size: int | None = None, what: str = "target"
) -> list[int]:
    """Every frame's timestamp (the stream's time base), in presentation order.

    MP4/MOV carry every sample's timestamp in the index, so nothing of the media data is read.
    Matroska's cues list only keyframes, so there the packets are demuxed (the whole file is read).
    `size`: the file's size, to refuse an index that points past its end.
    """
    entries = stream.index_entries
    timestamps: list[int] = []
    if container.format.name.startswith("mov") and entries is not None and len(entries) > 0:
        if len(entries) > max_frames:
            raise InputRejected(f"{what} claims {len(entries)} frames, over the limit of {max_frames}")
        timestamps = [entry.timestamp for entry in entries if not entry.is_discard]
        end = max(entry.pos + entry.size for entry in entries)
        if size is not None and end > size:
            raise InputRejected(f"{what} is truncated: its index needs {end} bytes, the file has {size}")
    else:
        count = 0
        for packet in container.demux(stream):
            if not packet.size:
                continue
            count += 1
            if count > max_frames:
                raise InputRejected(f"{what} has more than {max_frames} frames")
            if packet.pts is not None:
                timestamps.append(packet.pts)
    return sorted(timestamps)


def _frame_timing(
    container: av.container.InputContainer, stream: Any, limits: MediaLimits, size: int, what: str
) -> tuple[int, bool, int]:
    """(frame count, variable frame rate?, the commonest step between frames) from the frames' timestamps."""
    timestamps = frame_timestamps(container, stream, limits.max_frames, size, what)
    gaps = [later - earlier for earlier, later in itertools.pairwise(timestamps)]
    steps = set(gaps)
    # A constant-rate stream has one step (two where the time base does not divide the rate).
    variable = len(steps) > 1 and (max(steps) - min(steps)) > 1
    commonest = Counter(gaps).most_common(1)[0][0] if gaps else 0
    return len(timestamps), variable, commonest


def probe_video(reader: RangeReader, what: str, limits: MediaLimits) -> VideoInfo:
    if reader.size == 0:
        raise InputRejected(f"{what} is empty (0 bytes)")
    if reader.size > limits.max_bytes:
        raise InputRejected(f"{what} is {reader.size} bytes, over the limit of {limits.max_bytes} bytes")
    demuxer = sniff_video(reader.head(SNIFF_BYTES), what)
    with open_video(reader, demuxer, what) as container:
        if not container.streams.video:
            kind = "audio only" if container.streams.audio else "no streams"
            raise InputRejected(f"{what} has no video stream ({kind})")
        stream = container.streams.video[0]
        context = stream.codec_context
        width, height = int(context.width or 0), int(context.height or 0)
        if width <= 0 or height <= 0:
            raise InputRejected(f"{what} has no usable picture size ({width}×{height})")
        if width > limits.max_width or height > limits.max_height:
            raise InputRejected(f"{what} is {width}×{height}, over the limit of {limits.max_width}×{limits.max_height}")
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        if not rate or rate <= 0:
            raise InputRejected(f"{what} has no frame rate")
        fps = Fraction(rate).limit_denominator(1001)
        if fps > limits.max_fps:
            raise InputRejected(f"{what} runs at {float(fps):.3f} fps, over the limit of {limits.max_fps:g}")
        time_base = stream.time_base or Fraction(1, 1_000_000)
        start_s = float(stream.start_time * time_base) if stream.start_time is not None else 0.0
        duration_s = duration_within(container, stream, time_base, limits, what)
        audio = _audio_tracks(container)
        codec = context.name
        transfer = transfer_name(context.color_trc)
        frame_count, variable, step = _frame_timing(container, stream, limits, reader.size, what)
        if frame_count <= 0:
            raise InputRejected(f"{what} contains no video frames")
        nominal = _nominal_rate(step, time_base, limits) if variable else None
        if nominal is not None:
            # A variable-rate video's grid is its nominal rate (one over its commonest step between frames),
            # round(duration × that rate) slots: every frame has a slot of its own, where the average rate put
            # some two to a slot and dropped one (fusionfleet.media.decode).
            fps = nominal
        if not variable or duration_s <= 0:
            # A constant-rate video lasts exactly its frames (containers pad durations with audio).
            duration_s = frame_count / float(fps)
        if variable:
            frame_count = max(1, round(duration_s * fps))
    rotation = _check_decodes(reader, demuxer, what)
    return VideoInfo(
        container=demuxer,
        codec=codec,
        width=width,
        height=height,
        rotation=rotation,
        fps_num=fps.numerator,
        fps_den=fps.denominator,
        frame_count=frame_count,
        duration_s=duration_s,
        start_s=start_s,
        variable_frame_rate=variable,
        size_bytes=reader.size,
        audio=audio,
        color_transfer=transfer,
    )


def duration_within(
    container: av.container.InputContainer, stream: Any, time_base: Fraction, limits: MediaLimits, what: str
) -> float:
    """The stream's duration in seconds (the container's where the stream states none, 0 where neither does);
    InputRejected over the limit."""
    if stream.duration:
        duration_s = float(stream.duration * time_base)
    elif container.duration:
        duration_s = container.duration / 1_000_000
    else:
        duration_s = 0.0
    if duration_s > limits.max_duration_s:
        raise InputRejected(f"{what} lasts {duration_s:.0f} s, over the limit of {limits.max_duration_s:.0f} s")
    return duration_s


def _nominal_rate(step: int, time_base: Fraction, limits: MediaLimits) -> Fraction | None:
    """The rate of a variable-rate video's commonest step between frames, where it is one a video can have.

    Not ffprobe's r_frame_rate: Matroska's millisecond timestamps make FFmpeg guess the average there."""
    if step <= 0:
        return None
    nominal = (1 / (step * Fraction(time_base))).limit_denominator(1001)
    return nominal if nominal <= limits.max_fps else None


def _check_decodes(reader: RangeReader, demuxer: str, what: str) -> int:
    """Decode the first picture (a header that parses is not yet a video that plays).

    Returns the counter-clockwise display rotation in degrees (0, 90, 180, 270) the frame asks for.
    """
    reader.seek(0)
    with open_video(reader, demuxer, what) as container:
        stream = container.streams.video[0]
        try:
            for frame in container.decode(stream):
                return round(float(frame.rotation or 0) / 90.0) % 4 * 90
        except av.FFmpegError as error:
            raise InputRejected(f"{what} does not decode: {_ffmpeg_reason(error)}") from error
    raise InputRejected(f"{what} contains no decodable video frame")
