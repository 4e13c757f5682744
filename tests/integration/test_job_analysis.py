"""The job's content-analysis verdict is made once over the whole target and then only read."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fusionfleet import layout
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.reader import FileRangeSource, RangeReader
from fusionfleet.messages import JobContext, ObjectRef
from gpu_worker.engines.base import EngineJob, Frame, Image
from gpu_worker.job_analysis import job_content_verdict
from tests.support.fakes import FakeStorage
from tests.support.jobs import MEDIA, WORK, job_context


class Analyser:
    """An engine with a content analyser that flags the frames it is told to, by their stamp order."""

    name = "facefusion"

    def __init__(self, flag: set[int]) -> None:
        self.flag = flag
        self.seen: list[int] = []  # how many images each call got

    def prepare(self) -> None:
        pass

    def validate(self, job: EngineJob) -> None:
        pass

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        return (frame.image for frame in frames)

    def analyse_content(self, images: Iterable[Image]) -> list[bool]:
        shapes = [np.asarray(image).shape for image in images]
        self.seen.append(len(shapes))
        return [position in self.flag for position in range(len(shapes))]

    def close(self) -> None:
        pass


def _job(storage: FakeStorage, clip: Path, **changes: Any) -> JobContext:
    info = probe_video(RangeReader(FileRangeSource(clip), "clip"), "clip", MediaLimits())
    storage.put_bytes(MEDIA, "inputs/clip.mp4", clip.read_bytes())
    where = ObjectRef(bucket=WORK, key=layout.content_analysis_key("clip-0123456789abcdef"))
    return job_context(
        frame_count=info.frame_count,
        video=info,
        target=ObjectRef(bucket=MEDIA, key="inputs/clip.mp4", size=clip.stat().st_size),
        engine="facefusion",
        **{"content_analysis": where, **changes},
    )


def test_the_first_segment_makes_the_verdict_and_the_others_read_it(clip: Path) -> None:
    # GIVEN a 4 s, 25 fps job whose engine analyses content, and no verdict yet
    storage = FakeStorage()
    job = _job(storage, clip)
    analyser = Analyser(flag={1})
    # WHEN a segment asks for the job's verdict THEN the whole target is sampled at FaceFusion's rate
    verdict = job_content_verdict(storage, job, analyser)
    assert verdict is not None and analyser.seen == [4]  # frames 0, 25, 50, 75
    assert verdict.flagged == 1 and verdict.sampled == 4 and verdict.refused  # 25 % > 10 %
    # AND it is kept beside the job
    assert job.content_analysis is not None
    kept = json.loads(storage.get_bytes(WORK, job.content_analysis.key))
    assert kept["refused"] is True and kept["every"] == 25
    # WHEN other segments ask THEN they read it: the analyser runs no more
    assert job_content_verdict(storage, job, analyser) == verdict
    assert analyser.seen == [4]


def test_no_verdict_where_the_job_or_the_engine_does_not_make_one(clip: Path) -> None:
    storage = FakeStorage()
    assert job_content_verdict(storage, _job(storage, clip, content_analysis=None), Analyser(set())) is None

    class Plain(Analyser):
        analyse_content = None  # type: ignore[assignment]

    assert job_content_verdict(storage, _job(storage, clip), Plain(set())) is None
