"""Slicer.handle on in-memory storage, orchestrator and notifier: the ways a job does not start."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.services.slicing import Slicer
from tests.support.fakes import FakeCapacity, FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import MEDIA, WORK, job_context, slicer_config

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:render"
TOPIC = "arn:aws:sns:us-east-1:123456789012:notifications"
MANIFEST = {"version": 1, "source": ["inputs/face.jpg"], "target": "inputs/clip.mp4"}


def slicer() -> tuple[Slicer, FakeStorage, FakeOrchestrator, FakeNotifier]:
    storage, orchestrator, notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
    config = slicer_config(WORK, MACHINE, TOPIC)
    return Slicer(storage, orchestrator, notifier, config), storage, orchestrator, notifier


def put_manifest(storage: FakeStorage, key: str = "jobs/clip.json") -> str:
    """Upload a manifest; returns the job id the slicer derives for it."""
    etag = storage.put_bytes(MEDIA, key, json.dumps(MANIFEST).encode(), "application/json")
    return derive_job_id(MEDIA, key, etag)


def test_a_key_outside_jobs_is_ignored_without_reading_it() -> None:
    # GIVEN a slicer and an event for a media upload
    handler, storage, orchestrator, notifier = slicer()
    storage.put_bytes(MEDIA, "inputs/clip.mp4", b"video")
    # WHEN it handles the event
    outcome = handler.handle(MEDIA, "inputs/clip.mp4")
    # THEN nothing was read, started or told
    assert outcome.status == "ignored" and "is not a manifest" in outcome.reason
    assert storage.reads == {} and orchestrator.starts == [] and notifier.published == []


def test_a_manifest_deleted_before_the_event_is_ignored_quietly() -> None:
    # GIVEN an event for a manifest that no longer exists
    handler, storage, orchestrator, notifier = slicer()
    # WHEN it is handled
    outcome = handler.handle(MEDIA, "jobs/gone.json")
    # THEN it is ignored, nobody is notified and nothing is recorded
    assert outcome.status == "ignored" and outcome.reason == "s3://media/jobs/gone.json no longer exists"
    assert orchestrator.starts == [] and notifier.published == []
    assert storage.list_keys(WORK, "") == []


def test_a_started_job_is_a_duplicate_and_is_not_validated_again() -> None:
    # GIVEN a manifest whose job was started already (its context is in the work bucket)
    handler, storage, orchestrator, notifier = slicer()
    job_id = put_manifest(storage)
    context = job_context(job_id)
    storage.put_json(WORK, layout.job_key(job_id), context.model_dump(mode="json"))
    # WHEN the same event arrives again
    outcome = handler.handle(MEDIA, "jobs/clip.json")
    # THEN the existing execution is started by name with the same input, and the manifest is not re-read
    assert outcome.status == "duplicate" and outcome.job_id == job_id
    assert orchestrator.starts == [outcome.execution_arn] and outcome.execution_arn.endswith(f":render:{job_id}")
    assert orchestrator.executions[outcome.execution_arn]["job"] == context.model_dump(mode="json")
    assert "jobs/clip.json" not in storage.reads and notifier.published == []


def test_a_rejection_is_recorded_once_and_notified_once() -> None:
    # GIVEN a manifest naming media that was never uploaded
    handler, storage, orchestrator, notifier = slicer()
    job_id = put_manifest(storage)
    # WHEN its event is handled twice (S3 delivers events at least once)
    first = handler.handle(MEDIA, "jobs/clip.json")
    second = handler.handle(MEDIA, "jobs/clip.json")
    # THEN both are rejections naming every missing object, and nothing started
    assert first.status == second.status == "rejected"
    assert "source: s3://media/inputs/face.jpg does not exist" in first.reason
    assert "target: s3://media/inputs/clip.mp4 does not exist" in first.reason
    assert orchestrator.starts == []
    # AND the rejection is recorded in the work bucket, with no job context beside it
    record = storage.json(WORK, layout.rejection_key(job_id))
    assert record["status"] == "failed" and record["error"] == "JobRejected" and len(record["problems"]) == 2
    assert not storage.exists(WORK, layout.job_key(job_id))
    # AND the user was told exactly once
    assert len(notifier.published) == 1
    topic, subject, message = notifier.published[0]
    assert topic == TOPIC and job_id in subject and message == {k: v for k, v in record.items() if k != "notified"}
    assert record["notified"] is True


def test_a_rejection_whose_notice_failed_to_publish_is_notified_when_the_event_comes_again() -> None:
    # GIVEN a manifest naming missing media, and a notifier that fails the first time
    storage, orchestrator = FakeStorage(), FakeOrchestrator()

    class FlakyNotifier(FakeNotifier):
        failed_once = False

        def publish(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None:
            if not self.failed_once:
                self.failed_once = True
                raise ConnectionError("SNS unreachable")
            super().publish(topic_arn, subject, message)

    notifier = FlakyNotifier()
    handler = Slicer(storage, orchestrator, notifier, slicer_config(WORK, MACHINE, TOPIC))
    put_manifest(storage)
    # WHEN the first handling fails to publish (the ingest message is retried) and the retry comes
    with pytest.raises(ConnectionError):
        handler.handle(MEDIA, "jobs/clip.json")
    handler.handle(MEDIA, "jobs/clip.json")
    handler.handle(MEDIA, "jobs/clip.json")
    # THEN the user is told, once
    assert len(notifier.published) == 1


def test_a_full_stack_refuses_a_new_job_with_a_notice_before_reading_its_media() -> None:
    # GIVEN a stack that accepts two running jobs and runs two
    storage, orchestrator, notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
    for name in ("a", "b"):
        arn = f"{MACHINE.replace(':stateMachine:', ':execution:')}:{name}"
        orchestrator.states[arn] = Execution(arn, "RUNNING")
    config = slicer_config(WORK, MACHINE, TOPIC, max_running_jobs=2)
    handler = Slicer(storage, orchestrator, notifier, config)
    job_id = put_manifest(storage)
    # WHEN a third job arrives
    outcome = handler.handle(MEDIA, "jobs/clip.json")
    # THEN it is refused, saying why and what to do, nothing started and no media was read (only the
    # manifest, which says whether it is a job or a batch: a batch's items wait for room instead)
    assert outcome.status == "rejected" and "running 2 jobs, as many as it accepts at once (2)" in outcome.reason
    assert orchestrator.starts == [] and set(storage.reads) == {"jobs/clip.json"}
    ((_topic, _subject, notice),) = notifier.published
    assert notice["job_id"] == job_id and "upload the manifest again" in notice["reason"]


def test_an_option_the_default_engine_would_ignore_is_refused_before_any_media_is_read() -> None:
    # GIVEN a manifest with FaceFusion's face enhancer, on a stack whose default engine is the built-in one
    handler, storage, orchestrator, notifier = slicer()
    manifest = {**MANIFEST, "options": {"face_enhancer_model": "gfpgan_1.4"}}
    etag = storage.put_bytes(MEDIA, "jobs/clip.json", json.dumps(manifest).encode(), "application/json")
    # WHEN it is handled
    outcome = handler.handle(MEDIA, "jobs/clip.json")
    # THEN it is rejected naming the option and the engine; no media was read and nothing started
    assert outcome.status == "rejected" and outcome.job_id == derive_job_id(MEDIA, "jobs/clip.json", etag)
    assert "options.face_enhancer_model: the classic engine does not apply it" in outcome.reason
    assert set(storage.reads) == {"jobs/clip.json"} and orchestrator.starts == []
    assert len(notifier.published) == 1


def test_a_fleet_that_cannot_start_a_gpu_host_refuses_the_job_with_a_notice_before_reading_its_media() -> None:
    # GIVEN an account whose GPU quota cannot start one host
    storage, orchestrator, notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
    config = slicer_config(WORK, MACHINE, TOPIC)
    capacity = FakeCapacity("the GPU fleet cannot start a single instance: g5.xlarge needs 4 vCPUs …")
    handler = Slicer(storage, orchestrator, notifier, config, capacity)
    job_id = put_manifest(storage)
    # WHEN a job arrives
    outcome = handler.handle(MEDIA, "jobs/clip.json")
    # THEN it is refused at once with the quota's reason, nothing started, no media read
    assert outcome.status == "rejected" and outcome.reason.startswith("the GPU fleet cannot start a single instance")
    assert orchestrator.starts == [] and set(storage.reads) == {"jobs/clip.json"}  # the manifest alone
    ((_topic, _subject, notice),) = notifier.published
    assert notice["job_id"] == job_id and "g5.xlarge needs 4 vCPUs" in notice["reason"]
    assert capacity.asked == 1


def test_a_fleet_with_room_lets_the_job_through_to_validation() -> None:
    storage, orchestrator, notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
    config = slicer_config(WORK, MACHINE, TOPIC)
    capacity = FakeCapacity(None)
    put_manifest(storage)
    outcome = Slicer(storage, orchestrator, notifier, config, capacity).handle(MEDIA, "jobs/clip.json")
    # The media does not exist here: the job got past the capacity check to validation.
    assert capacity.asked == 1 and outcome.status == "rejected" and "do not exist" in outcome.reason
