"""Decode frames [start, end) of a video, frame-exactly, as upright BGR images.

Frames of a constant-rate video are placed on the plan's grid by their timestamps (index = round(t·fps)),
so the same frame number means the same picture on every worker, whatever the GOP structure; a gap in
the source repeats the previous picture, as ffmpeg's fps filter does. A variable-rate video's frame n is
its n-th frame in presentation order, as FaceFusion reads it (FFmpeg with `-vsync 0`: no frame dropped
or repeated, numbered as they come); the count FaceFusion asks of it (its duration × its nominal rate)
may pass its last frame, and those frames are black, as FaceFusion's are.
Pictures are BT.709 SDR: PQ and HLG targets go through the tone-mapping FaceFusion reads them with
(fusionfleet.media.colour), in PyAV's filter graph; others are converted by the matrix they are tagged with.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import av
import numpy as np
import numpy.typing as npt

from fusionfleet.errors import InputRejected, MediaError
from fusionfleet.media.colour import TONE_MAP_FILTER, tone_maps
from fusionfleet.media.probe import VideoInfo, frame_timestamps, open_video
from fusionfleet.media.reader import RangeReader

Image = npt.NDArray[np.uint8]


def upright(image: Image, rotation: int) -> Image:
    """Undo the container's display rotation (counter-clockwise degrees) so faces stand upright."""
    turns = (rotation // 90) % 4
    return np.ascontiguousarray(np.rot90(image, k=turns)) if turns else image


def _checked(frame: av.VideoFrame, info: VideoInfo, what: str) -> av.VideoFrame:
    """The limits were checked on the header; a stream that changes size mid-way is refused here."""
    if (frame.width, frame.height) != (info.width, info.height):
        raise MediaError(
            f"{what}: a frame is {frame.width}×{frame.height}, the video's header says {info.width}×{info.height}"
        )
    return frame


class Pictures:
    """Decoded frames to upright BGR pictures, tone-mapped to BT.709 where the target is PQ or HLG."""

    def __init__(self, stream: av.video.stream.VideoStream, info: VideoInfo) -> None:
        self._rotation = info.rotation
        self._graph: av.filter.Graph | None = None
        if tone_maps(info.color_transfer):
            graph = av.filter.Graph()
            graph.link_nodes(
                graph.add_buffer(template=stream),
                graph.add("scale", TONE_MAP_FILTER.removeprefix("scale=")),
                graph.add("format", "bgr24"),
                graph.add("buffersink"),
            ).configure()
            self._graph = graph

    def __call__(self, frame: av.VideoFrame) -> Image:
        if self._graph is None:
            image: Image = frame.to_ndarray(format="bgr24")  # type: ignore[assignment]
        else:
            self._graph.push(frame)
            image = self._graph.pull().to_ndarray()  # type: ignore[assignment]
        return upright(image, self._rotation)


def grid_index(time_s: float, start_s: float, fps: Fraction) -> int:
    return round((time_s - start_s) * fps.numerator / fps.denominator)


class _Numbering:
    """A variable-rate video's frame numbers: each frame's place in presentation order.

    MP4/MOV: the index lists every sample by decoding time; decoding from a keyframe of a closed GOP,
    the keyframe is presented after exactly the samples decoded before it, and every later frame comes
    one after another, so frame = the keyframe's rank among the decoding times + frames since. Other
    containers: every packet's presentation time, demuxed (as the probe does), ranked.
    """

    def __init__(self, container: av.container.InputContainer, stream: Any, info: VideoInfo) -> None:
        entries = stream.index_entries
        self._decoding: list[int] = []
        self._presenting: dict[int, int] = {}
        if container.format.name.startswith("mov") and entries is not None and len(entries) > 0:
            self._decoding = sorted(entry.timestamp for entry in entries if not entry.is_discard)
        else:
            times = frame_timestamps(container, stream, max(info.frame_count * 2, 1))
            self._presenting = {pts: number for number, pts in enumerate(times)}
            container.seek(0, stream=stream, backward=True, any_frame=False)  # the demuxing read it through
        self._first: int | None = None
        self._since = 0

    def seek_to(self, number: int) -> int | None:
        """The timestamp to seek to for frame `number` (None: no such frame in the video)."""
        times = self._decoding or sorted(self._presenting, key=self._presenting.__getitem__)
        return times[number] if number < len(times) else None

    def decode(self, container: av.container.InputContainer, stream: Any) -> Iterator[av.VideoFrame]:
        """The stream's frames from where the container stands; the first packet's decoding time is noted
        (a decoded frame's own `dts` is that of the packet that pushed it out, later with B-frames)."""
        for packet in container.demux(stream):
            if self._decoding and self._first is None and packet.dts is not None and packet.size:
                if not packet.is_keyframe:
                    raise InputRejected("a variable-rate video whose decoding does not start on a keyframe")
                self._first = bisect.bisect_left(self._decoding, packet.dts)
            yield from packet.decode()

    def number(self, frame: av.VideoFrame, what: str) -> int:
        if self._presenting:
            found = self._presenting.get(frame.pts if frame.pts is not None else -1)
            if found is None:
                raise MediaError(f"{what}: a frame at {frame.pts} is not among the video's packets")
            return found
        number = (self._first or 0) + self._since
        self._since += 1
        return number


def iter_frames(
    reader: RangeReader,
    info: VideoInfo,
    start: int,
    end: int,
    what: str = "target",
    threads: int = 0,
    hwaccel: Any = None,
) -> Iterator[tuple[int, Image]]:
    """Yield (frame number, image) for every frame number in [start, end), in order (`hwaccel`: see open_video)."""
    if not 0 <= start < end:
        raise ValueError(f"bad frame range [{start}, {end})")
    fps = info.fps
    reader.seek(0)
    with open_video(reader, info.container, what, hwaccel) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        if threads:
            stream.codec_context.thread_count = threads
        time_base = stream.time_base or Fraction(1, 1_000_000)
        picture = Pictures(stream, info)
        numbering = _Numbering(container, stream, info) if info.variable_frame_rate else None
        if numbering is not None:
            at = numbering.seek_to(start)
            if start > 0 and at is not None:
                container.seek(at, stream=stream, backward=True, any_frame=False)
        elif start > 0:
            # Land on the keyframe at or before the first wanted frame, then decode forward.
            seconds = info.start_s + Fraction(start) / fps
            container.seek(int(seconds / time_base), stream=stream, backward=True, any_frame=False)
        wanted = start
        previous: av.VideoFrame | None = None  # converted only when a gap needs it
        try:
            frames = numbering.decode(container, stream) if numbering is not None else container.decode(stream)
            for frame in frames:
                if frame.pts is None:
                    continue
                _checked(frame, info, what)
                if numbering is not None:
                    index = numbering.number(frame, what)
                else:
                    index = grid_index(float(frame.pts * time_base), info.start_s, fps)
                if index < wanted:
                    previous = frame
                    continue
                image = picture(frame)
                # A gap on the grid repeats the last picture before it.
                while wanted < index and wanted < end:
                    yield wanted, picture(previous) if previous is not None else image
                    wanted += 1
                if wanted >= end:
                    return
                yield wanted, image
                wanted += 1
                previous = frame
                if wanted >= end:
                    return
        except av.FFmpegError as error:
            raise MediaError(f"{what}: decoding failed near frame {wanted}: {error}") from error
        if previous is not None and numbering is not None:
            # A variable-rate video's nominal count passes its last frame: FaceFusion's reader runs dry
            # there and it renders an empty picture, which its writer makes a black frame.
            black = np.zeros_like(picture(previous))
            while wanted < end:
                yield wanted, black
                wanted += 1
            return
        # A constant-rate source that ends a frame short (a grid's rounding) repeats its last picture once.
        if previous is not None and end - wanted == 1:
            yield wanted, picture(previous)
            return
    raise MediaError(f"{what}: the video ended at frame {wanted}, before frame {end} of the plan")
