"""The frame-copy engine: output frame = input frame. Used to test and benchmark the pipeline."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gpu_worker.engines.base import EngineJob, Frame, Image


class CopyEngine:
    name = "copy"

    def prepare(self) -> None:
        return None

    def validate(self, job: EngineJob) -> None:
        return None

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        for frame in frames:
            yield frame.image

    def close(self) -> None:
        return None
