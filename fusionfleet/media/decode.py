"""Decode frames [start, end) of a video, frame-exactly, as upright BGR images.

Frames are placed on the constant-rate grid of the plan by their timestamps (index = round(t·fps)),
so the same frame number means the same picture on every worker, whatever the GOP structure or a
variable frame rate; a gap in the source repeats the previous picture, as ffmpeg's fps filter does. A
variable-rate video's grid is its nominal rate (fusionfleet.media.probe), so no two frames share a slot:
every frame is kept at its own time and the sound stays in sync. FaceFusion instead numbers such frames
one after another and renders black past the last (docs/engines.md): a documented difference.
Pictures are BT.709 SDR: PQ and HLG targets go through the tone-mapping FaceFusion reads them with
(fusionfleet.media.colour), in PyAV's filter graph; others are converted by the matrix they are tagged with.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import av
import numpy as np
import numpy.typing as npt

from fusionfleet.errors import MediaError
from fusionfleet.media.colour import TONE_MAP_FILTER, tone_maps
from fusionfleet.media.probe import VideoInfo, open_video
from fusionfleet.media.ranges import RangeReader

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
        if start > 0:
            # Land on the keyframe at or before the first wanted frame, then decode forward.
            seconds = info.start_s + Fraction(start) / fps
            container.seek(int(seconds / time_base), stream=stream, backward=True, any_frame=False)
        wanted = start
        previous: av.VideoFrame | None = None  # converted only when a gap needs it
        try:
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                _checked(frame, info, what)
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
        # A source that ends early (rounding of a variable-rate grid) repeats its last picture once.
        if previous is not None and end - wanted == 1:
            yield wanted, picture(previous)
            return
    raise MediaError(f"{what}: the video ended at frame {wanted}, before frame {end} of the plan")
