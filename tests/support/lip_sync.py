"""Lip-sync jobs for the FaceFusion harness's warm engine: 40 frames of the harness's face with a voice, cut
into segments as the worker cuts them (each with its lead-in), and the pictures each frame came out as."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from fleetctl.harness.pictures import clip_images
from fusionfleet.jobs.timeline import Timeline
from gpu_worker.engines.base import Engine, EngineJob, Frame, Image
from tests.support import facefusion_harness as harness

FRAMES = 40


def lip_job(tmp_path: Path, voice: Path, start: int = 0) -> EngineJob:
    """A lip-sync job of FRAMES frames at 25 fps from frame `start`, the harness's face as its source."""
    line = Timeline(start, FRAMES, 25, 1, 25, 1, "same")
    return EngineJob(job_id="lips", sources=(harness.face_image(),), options={"processors": ["lip_syncer"]},
                     fps=25.0, work_dir=tmp_path / "work", audio=voice, timeline=line)  # fmt: skip


def segment(first: int, end: int, lead_in: int = 4) -> list[Frame]:
    """Frames [first, end) of the target, after `lead_in` frames the worker gives as context."""
    begin = max(0, first - lead_in)
    pictures = clip_images(end)[begin:]  # each frame's picture is its own, whichever segment has it
    return [
        Frame(index, image, emit=index >= first, number=index)
        for index, image in zip(range(begin, end), pictures, strict=True)
    ]


def mouths(images: Iterable[Image], frames: list[Frame]) -> dict[int, Image]:
    """The rendered picture of each frame the segment emits, by frame index."""
    return {frame.index: image for frame, image in zip(frames, images, strict=True) if frame.emit}


def in_segments(engine: Engine, job: EngineJob, cuts: Iterable[tuple[int, int]]) -> dict[int, Image]:
    """Every frame's picture with the job rendered segment by segment ([first, end) each, with its lead-in)."""
    pictures: dict[int, Image] = {}
    for first, end in cuts:
        frames = segment(first, end)
        pictures.update(mouths(engine.render(job, frames), frames))
    return pictures
