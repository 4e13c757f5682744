"""The warm FaceFusion process's ears: what FaceFusion's lip syncer hears with each frame of a segment.

Loaded by `warm_server.py` from beside it, in FaceFusion's interpreter: it imports only numpy and
FaceFusion, never the project.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class Sound:
    """What the lip syncer hears with each frame: FaceFusion's own audio frames of the job's audio source.

    FaceFusion hears audio only in a video run (workflows.core.conditional_get_source_audio_frame: frame
    number - trim start, at the processing rate); the target here is an image, so those two functions read
    the same audio frames by the number the worker sends with each frame (its place in the whole target).
    """

    def __init__(self) -> None:
        from facefusion import audio
        from facefusion.workflows import core

        self.fps, self.start, self.path = 0.0, 0, None
        core.conditional_get_source_audio_frame = lambda number: self.frame(audio.get_audio_frame, number)
        core.conditional_get_source_voice_frame = lambda number: self.frame(audio.get_voice_frame, number)

    def frame(self, read: Callable[[str, float, int], Any], number: int) -> Any:
        from facefusion import audio

        found = read(self.path, self.fps, number - self.start) if self.path and self.fps else None
        return found if np.any(found) else audio.create_empty_audio_frame()

    def segment(self, header: dict[str, Any] | None, paths: list[str]) -> None:
        """The segment's rate and trim start; a new audio source is read afresh (one job's at a time)."""
        from facefusion import audio
        from facefusion.filesystem import filter_audio_paths

        self.fps, self.start = (float(header["fps"]), int(header["start"])) if header else (0.0, 0)
        path = next(iter(filter_audio_paths(paths)), None)
        if path != self.path:
            audio.read_static_audio.cache_clear()
            audio.read_static_voice.cache_clear()
            self.path = path
