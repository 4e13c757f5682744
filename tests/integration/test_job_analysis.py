"""The job's content-analysis verdict is made once over the whole target and then only read."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from fleetctl.samples import grace_hopper_path
from fusionfleet import layout
from fusionfleet.errors import InputRejected
from fusionfleet.facefusion.content_analysis import refusal_reason
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.messages import JobContext, ObjectRef, RenderTask
from gpu_worker.attempt import Attempt
from gpu_worker.engines.base import EngineJob, Frame, Image
from gpu_worker.engines.pool import EnginePool
from gpu_worker.rendering.job_analysis import job_content_verdict
from gpu_worker.rendering.render import InlineRenderer, RenderDeps
from gpu_worker.rendering.sources import SourceCache
from tests.support.fakes import FakeStorage
from tests.support.jobs import MEDIA, WORK, halves, job_context
from tests.support.media import decode_all


class Analyser:
    """An engine with a content analyser that flags the frames it is told to, by their stamp order."""

    name = "facefusion"

    def __init__(self, flag: set[int]) -> None:
        self.flag = flag
        self.seen: list[int] = []  # how many images each call got
        self.decided: list[bool] = []  # EngineJob.content_decided of each render

    def prepare(self) -> None:
        pass

    def validate(self, job: EngineJob) -> None:
        pass

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        self.decided.append(job.content_decided)
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


class Pool:
    def __init__(self, engine: Analyser) -> None:
        self.engine = engine

    def get(self, name: str) -> Analyser:
        return self.engine

    def close(self) -> None:
        pass


def _render(storage: FakeStorage, job: JobContext, engine: Analyser, tmp_path: Path) -> None:
    storage.put_bytes(MEDIA, "inputs/face.jpg", grace_hopper_path().read_bytes())
    deps = RenderDeps(
        storage, cast(EnginePool, Pool(engine)), SourceCache(storage, MediaLimits()), MediaLimits(), tmp_path, "w",
    )  # fmt: skip
    task = RenderTask(task_token="t", job=job, segment=halves(job.frame_count)[1])
    InlineRenderer(deps).render(task, Attempt(), threading.Event(), threading.Event())()


def test_a_segment_of_a_refused_job_fails_with_the_jobs_verdict_and_renders_nothing(clip: Path, tmp_path: Path) -> None:
    # GIVEN a job whose whole-video verdict is a refusal (1 of 4 samples flagged: 25 %)
    storage = FakeStorage()
    job, engine = _job(storage, clip), Analyser(flag={0})
    # WHEN its second segment renders THEN it is a rejected input with FaceFusion's numbers, not retried
    with pytest.raises(InputRejected, match="flagged 1 of the 4 frames sampled across the whole video"):
        _render(storage, job, engine, tmp_path)
    assert engine.decided == []


def test_a_segment_of_a_passed_job_renders_without_a_second_decision(clip: Path, tmp_path: Path) -> None:
    storage = FakeStorage()
    job, engine = _job(storage, clip), Analyser(flag=set())
    _render(storage, job, engine, tmp_path)
    assert engine.decided == [True]
    assert storage.get_bytes(WORK, layout.segment_record_key(job.job_id, 1))


class Keeping(Analyser):
    """Keeps the images it was given, to tell which frames they are."""

    def __init__(self, flag: set[int]) -> None:
        super().__init__(flag)
        self.images: list[np.ndarray[Any, Any]] = []

    def analyse_content(self, images: Iterable[Image]) -> list[bool]:
        kept = [np.asarray(image) for image in images]
        self.images.extend(kept)
        return super().analyse_content(kept)


def test_a_test_renders_verdict_is_over_its_own_frames_as_facefusions_preview_judges_the_frame_it_shows(
    clip: Path,
) -> None:
    # GIVEN a test render of frames 70 and 12 of a 100-frame clip (4 s at 25 fps)
    storage = FakeStorage()
    job = _job(storage, clip, trial_frames=(70, 12))
    analyser = Keeping(flag=set())
    # WHEN its verdict is made THEN exactly those two frames were analysed, in order, not the whole video's
    # four samples (FaceFusion's preview analyses the frame it shows, uis/components/preview.py)
    verdict = job_content_verdict(storage, job, analyser)
    assert verdict is not None and analyser.seen == [2]
    _info, decoded = decode_all(clip)
    assert [
        int(np.abs(image.astype(int) - decoded[n].astype(int)).max())
        for image, n in zip(analyser.images, (12, 70), strict=True)
    ] == [0, 0]
    assert (verdict.frames, verdict.sampled, verdict.refused) == ((12, 70), 2, False)
    # AND its start is told even when it ends before the first 5 s report (the dashboards show it analysing)
    started = json.loads(storage.get_bytes(WORK, layout.content_analysis_progress_key(job.job_id)))
    assert started["frames_read"] == 0 and started["started_at"] > 0
    # AND one flagged frame refuses the test render, saying which frames it judged
    other = FakeStorage()
    flagged = job_content_verdict(other, _job(other, clip, trial_frames=(70, 12)), Analyser(flag={1}))
    assert flagged is not None and flagged.refused
    assert refusal_reason(flagged).startswith(
        "FaceFusion's content analyser flagged 1 of the test render's 2 frames (12, 70)"
    )
