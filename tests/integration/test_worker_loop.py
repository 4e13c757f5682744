"""The worker loop on moto SQS/S3 with a recording orchestrator: the order of report and delete, retries, priorities."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetctl.samples import grace_hopper_path, read_stamp
from fusionfleet import layout
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import Progress, StepFunctions
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.errors import TokenGone
from fusionfleet.jobs.plan import SegmentPolicy
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.inspect import summarize
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.messages import JobContext, RenderTask
from fusionfleet.services.slicing import Slicer
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.lookahead import LookaheadPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import MergeHandler, RenderHandler
from gpu_worker.engines import registry
from gpu_worker.engines.base import EngineJob, Frame, Image
from gpu_worker.engines.pool import EnginePool
from gpu_worker.lifecycle import liveness
from gpu_worker.lifecycle.liveness import Liveness, Phase
from gpu_worker.lifecycle.stopping import StopSignal
from gpu_worker.merging.merge import MergeDeps
from gpu_worker.rendering.render import InlineRenderer, RenderDeps
from gpu_worker.rendering.sources import SourceCache
from tests.integration.conftest import Aws, upload
from tests.support.jobs import slicer_config

pytestmark = pytest.mark.timeout(120)
# An attempt's record, not the segment's task or winner records beside it.


class RecordingOrchestrator:
    """Stands in for Step Functions' callback API; checks the message is still held when it is called."""

    def __init__(self, queue: SqsQueue, urls: list[str], gone: bool = False) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self._queue = queue
        self._urls = urls
        self._gone = gone
        self.in_flight_at_report: list[int] = []

    def _held(self) -> int:
        return sum(self._queue.depth(url).in_flight for url in self._urls)

    def start(self, state_machine_arn: str, name: str, payload: dict[str, Any]) -> str:
        raise NotImplementedError

    def describe(self, execution_arn: str) -> Any:
        raise NotImplementedError

    def progress(self, execution_arn: str) -> Progress | None:
        return None

    def task_success(self, token: str, output: dict[str, Any]) -> None:
        self.in_flight_at_report.append(self._held())
        self.calls.append(("success", token, output))
        if self._gone:
            raise TokenGone("TaskTimedOut: gone")

    def task_failure(self, token: str, error: str, cause: str) -> None:
        self.in_flight_at_report.append(self._held())
        self.calls.append(("failure", token, (error, cause)))

    def heartbeat(self, token: str) -> None:
        self.calls.append(("heartbeat", token, None))


class FailingEngine:
    name = "failing"

    def prepare(self) -> None:
        return None

    def validate(self, job: EngineJob) -> None:
        return None

    def render(self, job: EngineJob, frames: Any) -> Iterator[Image]:
        for _frame in frames:
            raise RuntimeError("the GPU fell off")
            yield _frame.image

    def close(self) -> None:
        return None


class ShortEngine(FailingEngine):
    name = "short"

    def render(self, job: EngineJob, frames: Any) -> Iterator[Image]:
        for frame in list(frames)[:-1]:
            assert isinstance(frame, Frame)
            yield frame.image


class BlackEngine(FailingEngine):
    name = "black"

    def render(self, job: EngineJob, frames: Any) -> Iterator[Image]:
        for frame in frames:
            yield np.zeros_like(frame.image)


@pytest.fixture
def job(aws: Aws, clip: Path) -> JobContext:
    return sliced_job(aws, clip)


def sliced_job(aws: Aws, clip: Path) -> JobContext:
    """A real job context made by the slicer (moto runs no state machine, so tasks are sent by the test)."""
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/clip.mp4", clip)
    manifest = {"version": 1, "source": ["inputs/face.jpg"], "target": "inputs/clip.mp4", "engine": "copy"}
    aws.s3.put_object(Bucket=aws.media_bucket, Key="jobs/w.json", Body=json.dumps(manifest).encode())
    slicer = Slicer(
        S3Storage(aws.s3),
        StepFunctions(aws.sfn),
        SnsNotifier(aws.sns),
        slicer_config(
            aws.work_bucket,
            aws.state_machine_arn,
            aws.topic_arn,
            segments=SegmentPolicy(target_seconds=2, min_seconds=1, max_seconds=3),
        ),
    )
    outcome = slicer.handle(aws.media_bucket, "jobs/w.json")
    assert outcome.status == "started", outcome.reason
    payload = json.loads(aws.sfn.describe_execution(executionArn=outcome.execution_arn)["input"])
    return JobContext.model_validate(payload["job"])


def plan(aws: Aws, job: JobContext) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.plan_key(job.job_id))["Body"].read()
    )
    return items


def send_render(aws: Aws, queue: str, job: JobContext, segment: dict[str, Any], token: str, **job_changes: Any) -> None:
    body = {"task_token": token, "job": job.model_copy(update=job_changes).model_dump(mode="json"), "segment": segment}
    aws.sqs.send_message(QueueUrl=aws.queues[queue], MessageBody=json.dumps(body))


def queue_every_segment(aws: Aws, job: JobContext) -> list[dict[str, Any]]:
    """The job's plan (two segments at least), every segment sent to the normal queue as `token-<index>`."""
    segments = plan(aws, job)
    assert len(segments) >= 2
    for segment in segments:
        send_render(aws, "RenderQueueNormal", job, segment, f"token-{segment['index']}")
    return segments


def render_worker(
    aws: Aws,
    tmp_path: Path,
    orchestrator: RecordingOrchestrator,
    retry: RetryPolicy | None = None,
    stopping: threading.Event | None = None,
    faults_file: Path | None = None,
    lookahead: int = 0,
    liveness: Liveness | None = None,
) -> Worker[RenderTask]:
    storage = S3Storage(aws.s3)
    deps = RenderDeps(
        storage, EnginePool({}), SourceCache(storage, MediaLimits()), MediaLimits(), tmp_path, "test-worker",
        faults_file=faults_file, liveness=liveness,
    )  # fmt: skip
    handler = RenderHandler(InlineRenderer(deps), storage, "test-worker", stopping or threading.Event())
    urls = [aws.queues[name] for name in ("RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow")]
    return Worker(
        "test-worker", urls, handler, SqsQueue(aws.sqs), orchestrator,
        retry or RetryPolicy(max_attempts=3, backoff_s=(0,)), KeepPolicy(visibility_s=60), StopSignal(),
        idle_wait_s=0, lookahead=LookaheadPolicy(lookahead),
    )  # fmt: skip


def recorder(aws: Aws) -> RecordingOrchestrator:
    names = ("RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow", "MergeQueue")
    return RecordingOrchestrator(SqsQueue(aws.sqs), [aws.queues[n] for n in names])


def all_empty(aws: Aws) -> bool:
    queue = SqsQueue(aws.sqs)
    return all(queue.depth(url).total == 0 for url in aws.queues.values())


def test_a_segment_is_rendered_checked_uploaded_reported_then_deleted(
    aws: Aws, job: JobContext, tmp_path: Path
) -> None:
    # GIVEN the first segment's task in the normal queue
    first = plan(aws, job)[0]
    send_render(aws, "RenderQueueNormal", job, first, "token-0")
    orchestrator = recorder(aws)
    # WHEN a worker takes one task
    assert render_worker(aws, tmp_path, orchestrator).run(max_tasks=1) == 1
    # THEN it reported success while still holding the message, and deleted it afterwards
    assert [c[0] for c in orchestrator.calls if c[0] != "heartbeat"] == ["success"]
    assert orchestrator.in_flight_at_report == [1]
    assert all_empty(aws)
    # AND the segment exists with exactly its frames, and its record says so
    segment_path = tmp_path / "s.mp4"
    aws.s3.download_file(aws.work_bucket, layout.segment_key(job.job_id, 0), str(segment_path))
    assert summarize(segment_path).frame_count == first["end_frame"] - first["start_frame"]
    record = json.loads(
        aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.segment_record_key(job.job_id, 0))["Body"].read()
    )
    assert record["status"] == "succeeded" and record["frames"] == first["end_frame"] - first["start_frame"]
    # AND its attempt is recorded beside it, and the job's latest frame is there as a JPEG preview
    attempt = json.loads(
        aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.attempt_record_key(job.job_id, 0, 0, 1))["Body"].read()
    )
    assert attempt["status"] == "succeeded" and attempt["worker"] == "test-worker" and attempt["engine_s"] >= 0
    preview = aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.frame_preview_key(job.job_id))
    assert preview["Body"].read()[:2] == b"\xff\xd8" and preview["ContentType"] == "image/jpeg"


class RecordedLiveness(Liveness):
    """The liveness record's writes, in order (each also written to the file): noted under the writer's lock,
    so the list's order is the file's (noted before the lock, a frame's write could be listed after the idle
    write it preceded)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, every_s=0.0)
        self.phases: list[Phase] = []

    def _write_held(self, phase: Phase, allow_s: float | None = None) -> None:
        self.phases.append(phase)
        super()._write_held(phase, allow_s)


def test_the_render_loop_renews_its_liveness_record_with_each_frame_then_goes_idle(
    aws: Aws, job: JobContext, tmp_path: Path
) -> None:
    # GIVEN a worker whose render loop keeps a liveness record (issue 45: what the health check reads)
    first = plan(aws, job)[0]
    send_render(aws, "RenderQueueNormal", job, first, "token-0")
    alive = RecordedLiveness(tmp_path / "alive.json")
    # WHEN it renders one segment
    assert render_worker(aws, tmp_path, recorder(aws), liveness=alive).run(max_tasks=1) == 1
    # THEN the record said rendering, was renewed as frames came out of the engine, and ended idle
    frames = first["end_frame"] - first["start_frame"]
    assert alive.phases[0] is Phase.RENDERING and alive.phases[-1] is Phase.IDLE
    assert alive.phases.count(Phase.RENDERING) >= frames // 2, alive.phases
    found = liveness.read(tmp_path / "alive.json")
    assert found is not None and found.phase is Phase.IDLE


def test_with_lookahead_every_segment_is_rendered_once_reported_and_deleted(
    aws: Aws, job: JobContext, tmp_path: Path
) -> None:
    # GIVEN all of the job's segments in the normal queue, and a worker that takes its next task early
    segments = queue_every_segment(aws, job)
    orchestrator = recorder(aws)
    subject = render_worker(aws, tmp_path, orchestrator, lookahead=1)
    # WHEN it works through them
    assert subject.run(max_tasks=len(segments)) == len(segments)
    # THEN it took tasks early, each segment succeeded once, and every message is gone
    assert subject.lookahead.taken >= 1
    reported = sorted(c[1] for c in orchestrator.calls if c[0] == "success")
    assert reported == sorted(f"token-{s['index']}" for s in segments)
    assert all_empty(aws)
    # AND each segment has its frames and one attempt, its first
    for segment in segments:
        key = layout.segment_record_key(job.job_id, segment["index"])
        record = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=key)["Body"].read())
        assert record["frames"] == segment["end_frame"] - segment["start_frame"] and record["attempt"] == 1
        attempts = aws.s3.list_objects_v2(
            Bucket=aws.work_bucket, Prefix=layout.attempts_prefix(job.job_id, segment["index"])
        )
        kept = [a["Key"] for a in attempts["Contents"] if layout.parse_attempt_record_key(a["Key"]) is not None]
        assert kept == [layout.attempt_record_key(job.job_id, segment["index"], 0, 1)]


def test_high_priority_work_is_taken_first(aws: Aws, job: JobContext, tmp_path: Path) -> None:
    segments = plan(aws, job)
    send_render(aws, "RenderQueueLow", job, segments[0], "low")
    send_render(aws, "RenderQueueNormal", job, segments[0], "normal")
    send_render(aws, "RenderQueueHigh", job, segments[1], "high")
    orchestrator = recorder(aws)
    render_worker(aws, tmp_path, orchestrator).run(max_tasks=3)
    assert [c[1] for c in orchestrator.calls if c[0] == "success"] == ["high", "normal", "low"]


def test_a_failing_segment_is_retried_then_failed_with_the_last_error(
    aws: Aws, job: JobContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.FACTORIES, "failing", lambda env: FailingEngine())
    send_render(aws, "RenderQueueHigh", job, plan(aws, job)[0], "t", engine="failing")
    orchestrator = recorder(aws)
    # WHEN it fails on every one of its three attempts
    render_worker(aws, tmp_path, orchestrator).run(max_tasks=3)
    # THEN only the last attempt fails the token, with the engine's reason
    reports = [c for c in orchestrator.calls if c[0] != "heartbeat"]
    assert len(reports) == 1 and reports[0][0] == "failure"
    error, cause = reports[0][2]
    first = plan(aws, job)[0]
    assert error == "RuntimeError"
    assert cause == (
        f"segment 0 (frames {first['start_frame']}-{first['end_frame'] - 1}) of {job.job_id} "
        "failed after 3 attempts: RuntimeError: the GPU fell off"
    )
    record = json.loads(
        aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.segment_record_key(job.job_id, 0))["Body"].read()
    )
    assert record["status"] == "failed" and record["attempt"] == 3 and "the GPU fell off" in record["reason"]


@pytest.mark.parametrize(
    ("engine", "made", "reason"),
    [("short", ShortEngine, "returned 49 frames for 50"), ("black", BlackEngine, "black where the input is not")],
)
def test_an_engine_that_drops_a_frame_or_gives_black_fails_the_segment(
    aws: Aws, job: JobContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, made: type, reason: str
) -> None:
    monkeypatch.setitem(registry.FACTORIES, engine, lambda env: made())
    send_render(aws, "RenderQueueHigh", job, plan(aws, job)[0], "t", engine=engine)
    orchestrator = recorder(aws)
    render_worker(aws, tmp_path, orchestrator, RetryPolicy(max_attempts=1)).run(max_tasks=1)
    (failure,) = [c for c in orchestrator.calls if c[0] == "failure"]
    assert failure[2][0] == "SegmentFailed" and reason in failure[2][1]


def test_bad_input_fails_at_once_without_retries(aws: Aws, job: JobContext, tmp_path: Path) -> None:
    send_render(aws, "RenderQueueHigh", job, plan(aws, job)[0], "t", engine="facefusion")
    orchestrator = recorder(aws)
    render_worker(aws, tmp_path, orchestrator).run(max_tasks=1)
    (failure,) = [c for c in orchestrator.calls if c[0] == "failure"]
    assert failure[2][0] == "EngineUnavailable"
    assert all_empty(aws)


def test_a_gone_token_is_final(aws: Aws, job: JobContext, tmp_path: Path) -> None:
    send_render(aws, "RenderQueueHigh", job, plan(aws, job)[0], "stale")
    orchestrator = RecordingOrchestrator(SqsQueue(aws.sqs), list(aws.queues.values()), gone=True)
    render_worker(aws, tmp_path, orchestrator).run(max_tasks=1)
    assert [c[0] for c in orchestrator.calls if c[0] != "heartbeat"] == ["success"]
    assert all_empty(aws)


def test_a_malformed_message_is_dropped_and_its_token_failed(aws: Aws, tmp_path: Path) -> None:
    aws.sqs.send_message(QueueUrl=aws.queues["RenderQueueHigh"], MessageBody=json.dumps({"task_token": "t", "job": {}}))
    orchestrator = recorder(aws)
    render_worker(aws, tmp_path, orchestrator).run(max_tasks=1)
    assert [(c[0], c[1], c[2][0]) for c in orchestrator.calls] == [("failure", "t", "MalformedTask")]
    assert all_empty(aws)


def merge_once(aws: Aws, job: JobContext, tmp_path: Path) -> RecordingOrchestrator:
    """Send the job's merge task and let one merge worker take it."""
    body = json.dumps({"task_token": "m", "job": job.model_dump(mode="json")})
    aws.sqs.send_message(QueueUrl=aws.queues["MergeQueue"], MessageBody=body)
    orchestrator = recorder(aws)
    merge = Worker(
        "merge", [aws.queues["MergeQueue"]], MergeHandler(MergeDeps(S3Storage(aws.s3), tmp_path)), SqsQueue(aws.sqs),
        orchestrator, RetryPolicy(max_attempts=1), KeepPolicy(60), StopSignal(), idle_wait_s=0,
    )  # fmt: skip
    merge.run(max_tasks=1)
    return orchestrator


def test_merge_refuses_a_job_with_a_missing_segment_and_names_it(aws: Aws, job: JobContext, tmp_path: Path) -> None:
    # GIVEN only the first segment rendered
    send_render(aws, "RenderQueueHigh", job, plan(aws, job)[0], "t0")
    render_worker(aws, tmp_path, recorder(aws)).run(max_tasks=1)
    orchestrator = merge_once(aws, job, tmp_path)
    (failure,) = [c for c in orchestrator.calls if c[0] == "failure"]
    assert failure[2][0] == "SegmentFailed"
    assert "1 of 2 segments did not render: segment 1 (frames 50-99): no result" in failure[2][1]


def test_merge_joins_segments_frame_exactly_with_the_audio(aws: Aws, job: JobContext, tmp_path: Path) -> None:
    for segment in plan(aws, job):
        send_render(aws, "RenderQueueHigh", job, segment, f"t{segment['index']}")
    render_worker(aws, tmp_path, recorder(aws)).run(max_tasks=2)
    orchestrator = merge_once(aws, job, tmp_path)
    (success,) = [c for c in orchestrator.calls if c[0] == "success"]
    output = success[2]
    assert output["frames"] == 100 and output["audio_tracks"] == 1
    assert output["output"] == {
        "bucket": aws.media_bucket,
        "key": job.output.key,
        "uri": f"s3://{aws.media_bucket}/{job.output.key}",
    }
    result = tmp_path / "out.mp4"
    aws.s3.download_file(aws.media_bucket, job.output.key, str(result))
    summary = summarize(result)
    assert summary.frame_count == 100 and abs(summary.duration_s - 4.0) < 0.04
    assert len(summary.audio_durations_s) == 1 and abs(summary.audio_durations_s[0] - 4.0) < 0.05


def record_of(aws: Aws, job: JobContext, index: int) -> dict[str, Any]:
    key = layout.segment_record_key(job.job_id, index)
    value: dict[str, Any] = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=key)["Body"].read())
    return value


def test_a_failed_attempt_resumes_from_its_last_checkpoint(aws: Aws, job: JobContext, tmp_path: Path) -> None:
    # GIVEN the clip's second segment (frames 50-99) cut into two 25-frame chunks, and a fault that
    # fails the first attempt at frame 30 of the segment, after its first chunk was saved
    faults = tmp_path / "faults.json"
    segment = plan(aws, job)[1]
    chunk = job.encoder.chunk_frames
    assert chunk == 50 and segment["end_frame"] - segment["start_frame"] == 50
    settings = dataclasses.replace(job.encoder, chunk_frames=25, keyint=25)
    small = job.model_copy(update={"encoder": settings})
    faults.write_text(json.dumps([{"job": job.job_id, "segment": 1, "attempt": 1, "action": "fail", "at_frame": 30}]))
    body = {"task_token": "t", "job": small.model_dump(mode="json"), "segment": segment}
    aws.sqs.send_message(QueueUrl=aws.queues["RenderQueueHigh"], MessageBody=json.dumps(body))
    orchestrator = recorder(aws)
    # WHEN the first attempt fails at frame 30 and the second attempt runs
    render_worker(aws, tmp_path, orchestrator, faults_file=faults).run(max_tasks=2)
    # THEN the second attempt rendered only the second chunk and the segment is whole and exact
    assert [c[0] for c in orchestrator.calls if c[0] != "heartbeat"] == ["success"]
    record = record_of(aws, job, 1)
    assert record["attempt"] == 2 and record["resumed_from"] == 75 and record["frames_rendered"] == 25
    path = tmp_path / "resumed.mp4"
    aws.s3.download_file(aws.work_bucket, record["key"], str(path))  # a second delivery's own key (`.d2`)
    info = probe_video(RangeReader(FileRangeSource(path), "s"), "s", MediaLimits())
    stamps = [read_stamp(image) for _, image in iter_frames(RangeReader(FileRangeSource(path), "s"), info, 0, 50)]
    assert stamps == list(range(50, 100))
    # AND its checkpoints were cleared once the segment was saved
    assert (
        aws.s3.list_objects_v2(Bucket=aws.work_bucket, Prefix=layout.checkpoint_prefix(job.job_id, 1)).get("KeyCount")
        == 0
    )


def test_a_warm_stop_checkpoints_and_releases_the_segment(aws: Aws, job: JobContext, tmp_path: Path) -> None:
    settings = dataclasses.replace(job.encoder, chunk_frames=25, keyint=25)
    small = job.model_copy(update={"encoder": settings})
    send_render(aws, "RenderQueueHigh", small, plan(aws, job)[0], "t")
    stopping = threading.Event()
    stopping.set()  # SIGTERM arrived: stop after the current chunk
    orchestrator = recorder(aws)
    render_worker(aws, tmp_path, orchestrator, stopping=stopping).run(max_tasks=1)
    # THEN nothing was reported, the first chunk is saved, and the message is back in the queue
    assert [c for c in orchestrator.calls if c[0] != "heartbeat"] == []
    keys = [
        o["Key"]
        for o in aws.s3.list_objects_v2(Bucket=aws.work_bucket, Prefix=layout.checkpoint_prefix(job.job_id, 0))[
            "Contents"
        ]
    ]
    # (with the engine's state after it, so the next attempt continues exactly)
    assert sorted(key.rsplit("/", 1)[1] for key in keys) == ["0000000-0000025.mp4", "0000000-0000025.state"]
    assert SqsQueue(aws.sqs).depth(aws.queues["RenderQueueHigh"]).visible == 1


def test_checkpoints_that_cannot_be_deleted_cost_the_rendered_segment_nothing(
    aws: Aws, job: JobContext, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a segment that checkpoints a chunk and then fails once, and a work bucket whose policy
    # refuses deleting checkpoints (a role without s3:DeleteObject)
    faults = tmp_path / "faults.json"
    segment = plan(aws, job)[1]
    small = job.model_copy(update={"encoder": dataclasses.replace(job.encoder, chunk_frames=25, keyint=25)})
    faults.write_text(json.dumps([{"job": job.job_id, "segment": 1, "attempt": 1, "action": "fail", "at_frame": 30}]))
    body = {"task_token": "t", "job": small.model_dump(mode="json"), "segment": segment}
    aws.sqs.send_message(QueueUrl=aws.queues["RenderQueueHigh"], MessageBody=json.dumps(body))
    prefix = layout.checkpoint_prefix(job.job_id, 1)
    deny = {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject", "Resource": f"arn:aws:s3:::work/{prefix}*"}
    aws.s3.put_bucket_policy(Bucket=aws.work_bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [deny]}))
    orchestrator = recorder(aws)
    # WHEN the second attempt finishes the segment
    render_worker(aws, tmp_path, orchestrator, faults_file=faults).run(max_tasks=2)
    # THEN the segment succeeded and its record says so
    assert [c[0] for c in orchestrator.calls if c[0] != "heartbeat"] == ["success"]
    assert record_of(aws, job, 1)["status"] == "succeeded"
    # AND the refusal was logged with the keys left behind, which are still there
    left = aws.s3.list_objects_v2(Bucket=aws.work_bucket, Prefix=prefix).get("Contents", [])
    assert left and "its checkpoints stay" in caplog.text and left[0]["Key"] in caplog.text
