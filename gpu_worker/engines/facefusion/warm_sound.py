"""The warm FaceFusion process's ears: what FaceFusion's lip syncer hears with each frame of a segment.

Loaded by `warm_server.py` from beside it, in FaceFusion's interpreter: it imports only numpy and
FaceFusion, never the project.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

LIP_SYNCER = "lip_syncer"  # the only processor that reads the voice (its inputs' source_voice_frame)


class Sound:
    """What the lip syncer hears with each frame: FaceFusion's own audio frames of the job's audio source.

    FaceFusion hears audio only in a video run (workflows.core.conditional_get_source_audio_frame: frame
    number - trim start, at the processing rate); the target here is an image, so those two functions read
    the same audio frames by the number the worker sends with each frame (its place in the whole target).

    The voice is the job's, extracted once by its analysis step (`voice_spectrogram`) and sent as a file:
    its frames are FaceFusion's own `extract_audio_frames` of it, which is all `read_voice` does after the
    spectrogram. Without that file (a job analysed before the step made it) FaceFusion's `read_static_voice`
    extracts it here, as it did in every segment (the lip syncer's post_process clears its cache).
    """

    def __init__(self) -> None:
        from facefusion import audio
        from facefusion.workflows import core

        self.fps, self.start, self.path = 0.0, 0, None
        self.listens = False  # a lip syncer is among the segment's processors
        self.stored: str | None = None  # the job's voice spectrogram, where its analysis step kept it
        self.voices: dict[tuple[str, float], list[Any]] = {}  # its frames, per file and rate
        # The segment's first frames ask together on FaceFusion's threads: the file is read once (lru_cache,
        # which read_static_voice relies on, lets each of them extract it).
        self.reading = threading.Lock()
        core.conditional_get_source_audio_frame = lambda number: self.frame(audio.get_audio_frame, number)
        core.conditional_get_source_voice_frame = self.voice_frame

    def frame(self, read: Callable[[str, float, int], Any], number: int) -> Any:
        from facefusion import audio

        found = read(self.path, self.fps, number - self.start) if self.path and self.fps else None
        return found if np.any(found) else audio.create_empty_audio_frame()

    def voice_frame(self, number: int) -> Any:
        from facefusion import audio

        if not self.listens:
            # Nothing else reads the voice: extracting it (a model over the whole file) would be wasted.
            return audio.create_empty_audio_frame()
        if self.stored is None or not self.fps:
            return self.frame(audio.get_voice_frame, number)
        with self.reading:
            frames = self.voices.get((self.stored, self.fps))
            if frames is None:
                spectrogram = np.load(self.stored, allow_pickle=False)
                frames = self.voices[(self.stored, self.fps)] = audio.extract_audio_frames(spectrogram, self.fps)
        index = number - self.start  # as audio.get_voice_frame looks a frame up
        found = frames[index] if index in range(len(frames)) else None
        return found if np.any(found) else audio.create_empty_audio_frame()

    def segment(self, header: dict[str, Any] | None, paths: list[str], processors: list[str] | None = None) -> None:
        """The segment's rate and trim start; a new audio source is read afresh (one job's at a time)."""
        from facefusion import audio
        from facefusion.filesystem import filter_audio_paths

        self.fps, self.start = (float(header["fps"]), int(header["start"])) if header else (0.0, 0)
        self.listens = LIP_SYNCER in (processors or [])
        stored = header.get("voice") if header else None
        if stored != self.stored:
            self.voices.clear()  # one job's voice at a time
            self.stored = stored
        path = next(iter(filter_audio_paths(paths)), None)
        if path != self.path:
            audio.read_static_audio.cache_clear()
            audio.read_static_voice.cache_clear()
            self.path = path


def voice_spectrogram(path: str, fps: float) -> Any:
    """The voice FaceFusion's `read_voice(path, fps)` extracts, as the spectrogram its frames are cut from.

    FaceFusion's own `read_voice` runs unchanged; its last step, `extract_audio_frames`, is watched for
    the spectrogram it is given (the rate only decides where the frames are cut, not the spectrogram).
    None where FaceFusion reads no audio from the file.
    """
    from facefusion import audio

    seen: list[Any] = []
    extract = audio.extract_audio_frames

    def watched(spectrogram: Any, rate: float) -> Any:
        seen.append(spectrogram)
        return extract(spectrogram, rate)

    audio.extract_audio_frames = watched
    try:
        audio.read_voice(path, fps)
    finally:
        audio.extract_audio_frames = extract
    return seen[0] if seen else None
