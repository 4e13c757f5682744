"""What workers write for operators: attempt records, presence, the preview frame; and a cancel seen mid-task."""

from __future__ import annotations

import contextlib
import threading
import time

import cv2
import numpy as np

from fusionfleet import layout
from fusionfleet.jobs.loss import JobFailedMarker, mark_job_failed
from fusionfleet.jobs.plan import Segment
from fusionfleet.messages import RenderTask, WorkerBeat
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.facts import Standing
from gpu_worker.delivery.keeper import Keeper, KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import RenderHandler
from gpu_worker.errors import GivenBack
from gpu_worker.lifecycle.presence import Presence
from gpu_worker.lifecycle.stopping import StopSignal
from gpu_worker.rendering.render import preview_jpeg, write_preview
from tests.support.fakes import Clock, FakeOrchestrator, FakeQueue, FakeStorage
from tests.support.jobs import WORK, job_context
from tests.support.scripted import ScriptedRenderer, render_interrupted

QUEUE = "https://sqs.fake/render-high"
JOB = "clip-0123456789abcdef"


def task(index: int = 1, run: int = 0) -> RenderTask:
    return RenderTask(
        task_token="t", job=job_context(JOB, run=run), segment=Segment(index, 25, 50, 1_000_000, 2_000_000)
    )


def test_each_attempt_is_recorded_beside_the_segment_and_kept_across_attempts() -> None:
    storage = FakeStorage()
    handler = RenderHandler(ScriptedRenderer(), storage, "worker-7", threading.Event())
    handler.execute(task(run=1), threading.Event(), Attempt(number=2, sent_at=100.0, received_at=104.0))
    record = storage.json(WORK, layout.attempt_record_key(JOB, 1, 1, 2))
    assert record["status"] == "succeeded" and record["worker"] == "worker-7" and record["engine_s"] == 0.75
    assert record["queued_s"] == 4.0 and record["finished_at"] >= record["started_at"] > 0
    # AND a release is recorded as such, under its own attempt
    releasing = RenderHandler(ScriptedRenderer("release"), storage, "worker-8", threading.Event())
    with contextlib.suppress(GivenBack):
        releasing.execute(task(run=1), threading.Event(), Attempt(number=3))
    assert storage.json(WORK, layout.attempt_record_key(JOB, 1, 1, 3))["status"] == "released"
    assert storage.json(WORK, layout.attempt_record_key(JOB, 1, 1, 2))["status"] == "succeeded"


def test_a_job_cancelled_while_its_segment_renders_is_stopped_within_seconds_and_dropped() -> None:
    # GIVEN a worker rendering a segment that only ends when cancelled
    storage, queue, orchestrator = FakeStorage(), FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, task().model_dump_json())
    handler = RenderHandler(ScriptedRenderer("wait"), storage, "w", threading.Event())
    # WHEN the job's cancel marker appears while it renders (the token still beats fine)
    render_interrupted(handler, queue, orchestrator, QUEUE,
                       lambda: storage.put_json(WORK, layout.cancel_key(JOB), {"cancelled_at": "now"}))  # fmt: skip
    # THEN the worker stopped within seconds (that helper holds it to 5), reported nothing, and deleted the
    # message for good
    assert orchestrator.reports() == [] and queue.deleted == [message_id]
    assert storage.json(WORK, layout.attempt_record_key(JOB, 1, 0, 1))["status"] == "cancelled"


def _marker(segment: int = 0) -> JobFailedMarker:
    cause = f"segment {segment} of {JOB} failed after 3 attempts: SegmentFailed: the encoder fell over"
    return JobFailedMarker(job_id=JOB, segment=segment, attempts=3, error="SegmentFailed", cause=cause, by="w0", at=0)


def _render_worker(
    storage: FakeStorage, queue: FakeQueue, renderer: ScriptedRenderer, orchestrator: FakeOrchestrator | None = None
) -> Worker[RenderTask]:
    handler = RenderHandler(renderer, storage, "w", threading.Event())
    return Worker(
        "w", [QUEUE], handler, queue, orchestrator or FakeOrchestrator(), RetryPolicy(max_attempts=3),
        KeepPolicy(visibility_s=600, cancel_check_s=0.2), StopSignal(), idle_wait_s=0,
    )  # fmt: skip


def test_a_queued_segment_of_a_failed_job_is_dropped_unrendered() -> None:
    # GIVEN a job marked failed by another of its segments, and one of its segments still queued
    storage, queue, renderer = FakeStorage(), FakeQueue(), ScriptedRenderer()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, task(index=2).model_dump_json())
    assert mark_job_failed(storage, WORK, _marker(segment=0))
    orchestrator = FakeOrchestrator()
    worker = _render_worker(storage, queue, renderer, orchestrator)
    # WHEN a worker takes it
    message = worker.take()
    assert message is not None
    worker.execute(message)
    # THEN it spends no engine time, and the message is gone for good
    assert renderer.rendered == 0 and queue.deleted == [message_id]
    # AND its token failed once, naming the segment and the job's cause: the Map learns now, not when
    # the watchdog stops the execution (LocalStack's Map goes on past a failed item)
    ((kind, token, (error, cause)),) = orchestrator.reports()
    assert (kind, token, error) == ("failure", "t", "JobLost")
    assert cause.startswith(f"segment 2 (frames 25-49) of {JOB} dropped unrendered: the job is lost (w0): ")
    assert cause.endswith("SegmentFailed: the encoder fell over")


def test_a_dropped_segment_of_a_cancelled_job_has_its_token_woken_not_failed() -> None:
    # GIVEN a job cancelled (its execution stopped by the cancel) and also marked failed
    storage, queue, orchestrator = FakeStorage(), FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE)
    queue.send(QUEUE, task(index=2).model_dump_json())
    storage.put_json(WORK, layout.cancel_key(JOB), {"cancelled_at": "now"})
    mark_job_failed(storage, WORK, _marker(segment=0))
    worker = _render_worker(storage, queue, ScriptedRenderer(), orchestrator)
    message = worker.take()
    assert message is not None
    worker.execute(message)
    # THEN its token is only heartbeated (a stopped execution's waiting task is woken by it)
    assert orchestrator.reports() == [] and [c[0] for c in orchestrator.calls] == ["heartbeat", "heartbeat"]


def test_a_failed_marker_of_an_earlier_run_fails_no_token_and_the_segments_own_fails_it_with_its_cause() -> None:
    storage = FakeStorage()
    handler = RenderHandler(ScriptedRenderer(), storage, "w", threading.Event())
    mark_job_failed(storage, WORK, _marker(segment=0))
    # this segment's own failure: its token failed again with its own cause (the worker that marked the job
    # may have died before failing it; the simulation's workers found the job then waited for its heartbeat
    # timeout); a retry (run 1) is not lost by run 0's marker
    assert handler.standing(task(index=0)) == Standing(stopped=True, token_cause=_marker(segment=0).cause)
    assert handler.standing(task(index=2, run=1)) == Standing(stopped=True, token_cause=None)
    assert handler.standing(task(index=2)).token_cause is not None
    # a backup copy never holds the token's last word
    assert handler.standing(task(index=2).model_copy(update={"copy_number": 1})).token_cause is None


def test_a_segment_rendering_when_its_job_is_marked_failed_stops_within_seconds() -> None:
    # GIVEN a worker rendering a segment that only ends when told to stop
    storage, queue = FakeStorage(), FakeQueue()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, task().model_dump_json())
    orchestrator = FakeOrchestrator()
    worker = _render_worker(storage, queue, ScriptedRenderer("wait"), orchestrator)
    # WHEN another segment of its job fails for good while it renders
    timer = threading.Timer(0.5, lambda: mark_job_failed(storage, WORK, _marker(segment=0)))
    timer.start()
    began = time.monotonic()
    message = worker.take()
    assert message is not None
    worker.execute(message)
    # THEN it stopped within seconds and deleted the message
    assert time.monotonic() - began < 5 and queue.deleted == [message_id]
    # AND failed its token once with the job's cause
    ((kind, _token, (error, cause)),) = orchestrator.reports()
    assert (kind, error) == ("failure", "JobLost") and "the encoder fell over" in cause


def test_presence_is_written_at_start_updated_per_task_and_removed_on_a_clean_exit() -> None:
    storage, clock = FakeStorage(), Clock(1000.0)
    presence = Presence(storage, WORK, "worker-3", "render", engine="copy", every_s=0.05, clock=clock)
    presence.start()
    key = layout.worker_key("worker-3")
    assert WorkerBeat.model_validate(storage.json(WORK, key)).last_beat == 1000.0
    presence.begin(f"{JOB}:4", "classic")
    beat = WorkerBeat.model_validate(storage.json(WORK, key))
    assert (beat.current, beat.engine, beat.role) == (f"{JOB}:4", "classic", "render")
    presence.end(succeeded=True)
    clock.advance(7)
    time.sleep(0.2)  # the thread beats on its own
    beat = WorkerBeat.model_validate(storage.json(WORK, key))
    assert beat.current is None and beat.segments_done == 1 and beat.last_beat == 1007.0
    presence.close()
    assert not storage.exists(WORK, key)


def test_a_segment_finishing_behind_the_next_one_leaves_the_worker_busy_with_the_next() -> None:
    # GIVEN a worker whose engine began segment 5 while segment 4 was still being uploaded
    storage = FakeStorage()
    presence = Presence(storage, WORK, "worker-3", "render", engine="copy", every_s=60)
    presence.begin(f"{JOB}:4", "copy")
    presence.begin(f"{JOB}:5", "copy")
    # WHEN segment 4 ends, then segment 5
    presence.end(True, f"{JOB}:4")
    during = WorkerBeat.model_validate(storage.json(WORK, layout.worker_key("worker-3")))
    presence.end(True, f"{JOB}:5")
    after = WorkerBeat.model_validate(storage.json(WORK, layout.worker_key("worker-3")))
    # THEN the record shows segment 5 in hand until it ends (an autoscaler never sees it idle), and counts both
    assert (during.current, during.segments_done) == (f"{JOB}:5", 1)
    assert (after.current, after.segments_done) == (None, 2)


def test_the_preview_is_one_small_jpeg_of_the_latest_frame() -> None:
    storage = FakeStorage()
    frame = np.zeros((720, 1280, 3), dtype=np.uint8)
    frame[:, :, 2] = 255  # red in BGR
    write_preview(storage, WORK, JOB, frame)
    data = storage.get_bytes(WORK, layout.frame_preview_key(JOB))
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None
    assert data[:2] == b"\xff\xd8" and image.shape == (180, 320, 3) and image[90, 160, 2] > 200
    assert len(preview_jpeg(frame)) < 20_000


def test_a_failing_cancel_check_never_costs_the_message_its_heartbeat() -> None:
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE)
    queue.send(QUEUE, task().model_dump_json())
    (message,) = queue.receive(QUEUE, wait_s=0, visibility_s=1)

    def broken() -> Standing:
        raise OSError("S3 is down")

    with Keeper(queue, orchestrator, message, "t", KeepPolicy(visibility_s=1, cancel_check_s=0.2), broken) as kept:
        time.sleep(1.5)
    assert not kept.lost.is_set() and ("heartbeat", "t", None) in orchestrator.calls
    assert queue.visibility_changes
