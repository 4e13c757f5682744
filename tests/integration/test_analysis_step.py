"""A job's content analysis as its own task on the render queue: moto SQS/S3, the real worker loop and engine host."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fusionfleet import layout
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.jobs.timeline import timeline
from fusionfleet.media.limits import MediaLimits
from fusionfleet.messages import JobContext, ObjectRef, parse_render_queue_message
from gpu_worker.delivery.analysis_task import AnalysisHandler
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.render_queue import RenderQueueHandler
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import RenderHandler
from gpu_worker.engines import registry
from gpu_worker.engines.base import EngineJob, Frame, Image
from gpu_worker.engines.pool import EnginePool
from gpu_worker.lifecycle.stopping import StopSignal
from gpu_worker.rendering.render import InlineRenderer, RenderDeps
from gpu_worker.rendering.sources import SourceCache
from tests.integration.conftest import Aws
from tests.integration.test_worker_loop import plan, recorder, send_render, sliced_job

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def job(aws: Aws, clip: Path) -> JobContext:
    return sliced_job(aws, clip)


class FlagsEvery(threading.local):
    """A content analyser that flags every `nth` sampled frame and records what it was shown."""

    name = "analysing"

    def __init__(self, nth: int) -> None:
        self.nth = nth
        self.sampled: list[int] = []
        self.rendered: list[bool] = []

    def prepare(self) -> None:
        return None

    def validate(self, job: EngineJob) -> None:
        return None

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        self.rendered.append(job.content_decided)
        return (frame.image for frame in frames)

    def analyse_content(self, images: Iterable[Image]) -> list[bool]:
        shown = [np.asarray(image).shape for image in images]
        self.sampled.append(len(shown))
        return [self.nth > 0 and position % self.nth == 0 for position in range(len(shown))]

    def close(self) -> None:
        return None


def analysing_job(job: JobContext, aws: Aws) -> JobContext:
    where = ObjectRef(bucket=aws.work_bucket, key=layout.content_analysis_key(job.job_id))
    return job.model_copy(update={"engine": "analysing", "content_analysis": where})


def send_analysis(aws: Aws, job: JobContext, token: str) -> None:
    body = {"task_token": token, "job": job.model_dump(mode="json"), "step": "content_analysis"}
    aws.sqs.send_message(QueueUrl=aws.queues["RenderQueueNormal"], MessageBody=json.dumps(body))


def worker(aws: Aws, tmp_path: Path, orchestrator: Any) -> Worker[Any]:
    storage = S3Storage(aws.s3)
    deps = RenderDeps(storage, EnginePool({}), SourceCache(storage, MediaLimits()), MediaLimits(), tmp_path, "w-1")
    renderer, stopping = InlineRenderer(deps), threading.Event()
    handler = RenderQueueHandler(
        RenderHandler(renderer, storage, "w-1", stopping), AnalysisHandler(renderer, storage, stopping)
    )
    urls = [aws.queues[name] for name in ("RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow")]
    return Worker(
        "w-1", urls, handler, SqsQueue(aws.sqs), orchestrator, RetryPolicy(max_attempts=3, backoff_s=(0,)),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0,
    )  # fmt: skip


def test_the_analysis_step_makes_the_verdict_once_and_the_segments_only_read_it(
    aws: Aws, job: JobContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a job whose engine analyses content (none flagged), its analysis task on its render queue
    engine = FlagsEvery(0)
    monkeypatch.setitem(registry.FACTORIES, "analysing", lambda env: engine)
    analysing = analysing_job(job, aws)
    send_analysis(aws, analysing, "token-analysis")
    orchestrator = recorder(aws)
    # WHEN a render worker takes it
    assert worker(aws, tmp_path, orchestrator).run(max_tasks=1) == 1
    # THEN the whole 4 s, 25 fps target was sampled once at FaceFusion's rate (frames 0, 25, 50, 75), the
    # verdict is kept beside the job and is the task's answer, and the message is gone
    assert engine.sampled == [4]
    ((kind, token, output),) = [call for call in orchestrator.calls if call[0] != "heartbeat"]
    assert (kind, token) == ("success", "token-analysis")
    assert output["refused"] is False and output["sampled"] == 4
    kept = json.loads(
        aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.content_analysis_key(job.job_id))["Body"].read()
    )
    assert kept == output
    assert SqsQueue(aws.sqs).depth(aws.queues["RenderQueueNormal"]).total == 0
    # WHEN the job's segments render THEN none analyses again: each renders with the job's verdict
    for segment in plan(aws, job):
        send_render(aws, "RenderQueueNormal", analysing, segment, f"token-{segment['index']}")
    segments = len(plan(aws, job))
    assert worker(aws, tmp_path, orchestrator).run(max_tasks=segments) == segments
    assert engine.sampled == [4] and engine.rendered == [True] * segments
    # AND a second delivery of the step (its answer lost) answers from the kept verdict without decoding
    send_analysis(aws, analysing, "token-again")
    worker(aws, tmp_path, orchestrator).run(max_tasks=1)
    assert engine.sampled == [4]
    assert ("success", "token-again", output) in orchestrator.calls


def test_a_refused_verdict_fails_the_step_at_once_with_facefusions_numbers(
    aws: Aws, job: JobContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a target whose analyser flags every other sampled frame (50 %: FaceFusion's limit is 10 %)
    monkeypatch.setitem(registry.FACTORIES, "analysing", lambda env: FlagsEvery(2))
    send_analysis(aws, analysing_job(job, aws), "token-refused")
    orchestrator = recorder(aws)
    # WHEN a worker takes the step THEN its token fails at once (no retry: the target is what it is)
    worker(aws, tmp_path, orchestrator).run(max_tasks=1)
    ((kind, token, (error, cause)),) = [call for call in orchestrator.calls if call[0] != "heartbeat"]
    assert (kind, token, error) == ("failure", "token-refused", "InputRejected")
    assert "flagged 2 of the 4 frames sampled across the whole video (50 %; its limit is 10 %)" in cause
    assert SqsQueue(aws.sqs).depth(aws.queues["RenderQueueNormal"]).total == 0


def test_render_queue_messages_are_told_apart_by_their_step() -> None:
    segment = {"index": 0, "start_frame": 0, "end_frame": 1, "start_time_us": 0, "end_time_us": 40000}
    with pytest.raises(ValueError, match="step"):
        parse_render_queue_message(json.dumps({"task_token": "t", "job": {}, "step": "something else"}))
    with pytest.raises(ValueError, match="job"):
        parse_render_queue_message(json.dumps({"task_token": "t", "segment": segment}))


def test_a_trimmed_jobs_analysis_samples_only_its_range_at_the_targets_own_frame_numbers(
    aws: Aws, job: JobContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a job of frames 10..89 of the 100-frame, 25 fps clip: FaceFusion analyses frames 25, 50 and 75
    engine = FlagsEvery(0)
    monkeypatch.setitem(registry.FACTORIES, "analysing", lambda env: engine)
    line = timeline({"trim_frame_start": 10, "trim_frame_end": 90}, 100, job.video.fps)
    send_analysis(aws, analysing_job(job, aws).model_copy(update={"timeline": line, "frame_count": 80}), "token")
    orchestrator = recorder(aws)
    # WHEN a worker makes the verdict THEN it sampled those three frames only
    worker(aws, tmp_path, orchestrator).run(max_tasks=1)
    ((kind, _token, output),) = [call for call in orchestrator.calls if call[0] != "heartbeat"]
    assert kind == "success" and output["sampled"] == 3 and engine.sampled == [3]
