"""The frame-copy engine: output frame = input frame. Used to test and benchmark the pipeline."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gpu_worker.engines.base import EngineJob, Frame, Image, StateUnreadable


class CopyEngine:
    name = "copy"

    def prepare(self) -> None:
        return None

    def validate(self, job: EngineJob) -> None:
        return None

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        for frame in frames:
            yield frame.image

    def save_state(self) -> bytes:
        # Nothing carries from frame to frame: a resumed render needs no lead-in.
        return b""

    def load_state(self, state: bytes) -> None:
        if state:
            raise StateUnreadable("the copy engine carries no state")

    def close(self) -> None:
        return None
