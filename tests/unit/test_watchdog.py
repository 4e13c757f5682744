"""The watchdog against in-memory fakes: each job that needs it gets exactly one notice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution, Progress, execution_arn
from fusionfleet.fleet.stragglers import BackupPolicy
from fusionfleet.jobs.loss import JobFailedMarker, is_job_failed, job_failed, mark_job_failed
from fusionfleet.jobs.runs import execution_name
from fusionfleet.messages import SegmentHold, SegmentRecord
from fusionfleet.services.backups import BackupSender
from fusionfleet.services.watchdog import Watchdog
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeQueue, FakeStorage
from tests.support.jobs import WORK, halves, job_context, watchdog_config

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:render"
NOW = datetime.now(UTC)


def setup(*jobs: tuple[str, Execution]) -> tuple[Watchdog, FakeStorage, FakeOrchestrator, FakeNotifier]:
    storage, orchestrator, notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
    for job_id, execution in jobs:
        storage.put_json(WORK, layout.job_key(job_id), job_context(job_id).model_dump(mode="json"))
        orchestrator.states[execution.arn] = execution
    config = watchdog_config(WORK, MACHINE, "topic", stall_s=600, dispatch_grace_s=120)
    return Watchdog(storage, orchestrator, notifier, config), storage, orchestrator, notifier


def execution(job_id: str, status: str, error: str | None = None, started_s_ago: float = 300) -> Execution:
    started = NOW - timedelta(seconds=started_s_ago)
    stopped = None if status == "RUNNING" else NOW - timedelta(seconds=5)
    return Execution(execution_arn(MACHINE, job_id), status, started, stopped, error=error, cause="why")


def test_a_notice_that_failed_to_publish_is_published_once_as_the_state_machine_built_it() -> None:
    # GIVEN a job whose execution failed in its success notice's publish
    failed = execution("job-a", "FAILED", error="SNS.NotFoundException")
    watchdog, storage, orchestrator, notifier = setup(("job-a", failed))
    orchestrator.state_outputs[failed.arn] = {"notice": {"status": "succeeded", "job_id": "job-a", "output": "o"}}
    # WHEN the watchdog sweeps, twice, and a second watchdog sweeps too
    watchdog.sweep(NOW)
    watchdog.sweep(NOW)
    Watchdog(storage, orchestrator, notifier, watchdog._config).sweep(NOW)
    # THEN exactly one notice went out: the success, saying the watchdog sent it and why
    (published,) = notifier.published
    notice = published[2]
    assert notice["status"] == "succeeded" and notice["output"] == "o" and notice["notified_by"] == "watchdog"
    assert "ended FAILED (SNS.NotFoundException: why)" in notice["watchdog_reason"]
    assert storage.json(WORK, layout.notice_key("job-a"))["published"] is True


def test_jobs_that_ended_with_their_own_notice_or_are_not_jobs_are_left_alone() -> None:
    watchdog, _storage, orchestrator, notifier = setup(
        ("job-ok", execution("job-ok", "SUCCEEDED")), ("job-failed", execution("job-failed", "FAILED", "JobFailed"))
    )
    stranger = execution("not-a-job", "ABORTED")
    orchestrator.states[stranger.arn] = stranger
    assert watchdog.sweep(NOW) == []
    assert notifier.published == [] and orchestrator.stopped == []


def test_a_job_whose_segments_were_never_dispatched_is_stopped_and_told_why() -> None:
    # GIVEN a running job whose Map Run dispatched nothing for longer than the grace
    stuck = execution("job-stuck", "RUNNING", started_s_ago=200)
    watchdog, _storage, orchestrator, notifier = setup(("job-stuck", stuck))
    orchestrator.map_progress[stuck.arn] = Progress(total=4, pending=4)
    # WHEN the watchdog sweeps
    (closed,) = watchdog.sweep(NOW)
    # THEN the execution was stopped and the user got a failure notice naming the cause
    assert orchestrator.stopped == [(stuck.arn, "JobNeverDispatched")]
    (published,) = notifier.published
    assert published[2]["status"] == "failed" and published[2]["error"] == "JobNeverDispatched"
    assert published[2]["manifest"]["key"] and closed.job_id == "job-stuck"
    # AND the aborted execution that follows gets no second notice
    assert watchdog.sweep(NOW + timedelta(minutes=5)) == [] and len(notifier.published) == 1


def test_a_rendering_job_is_not_touched() -> None:
    busy = execution("job-busy", "RUNNING", started_s_ago=5000)
    watchdog, storage, orchestrator, notifier = setup(("job-busy", busy))
    orchestrator.map_progress[busy.arn] = Progress(total=4, running=2, succeeded=2)
    storage.put_bytes(WORK, layout.segment_record_key("job-busy", 1), b"{}")
    assert watchdog.sweep(NOW) == [] and notifier.published == []


def test_a_claim_left_by_a_sweep_that_died_is_finished_later() -> None:
    # GIVEN a claim written by a sweep that died before publishing
    timed_out = execution("job-t", "TIMED_OUT")
    watchdog, storage, _orchestrator, notifier = setup(("job-t", timed_out))
    storage.put_json(WORK, layout.notice_key("job-t"), {"claimed_at": NOW.isoformat(), "published": False})
    # WHEN a sweep comes soon after, and another after the reclaim time
    watchdog.sweep(NOW + timedelta(seconds=10))
    assert notifier.published == []
    watchdog.sweep(NOW + timedelta(seconds=200))
    # THEN the notice goes out once
    (published,) = notifier.published
    assert published[2]["status"] == "failed" and "ended TIMED_OUT" in published[2]["reason"]


def test_a_running_job_nearly_done_gets_its_straggler_copied_by_the_sweep() -> None:
    # GIVEN a running two-segment job: segment 0 done in 3 s, segment 1 on w1 for 100 s
    running = execution("job-slow", "RUNNING", started_s_ago=200)
    watchdog, storage, orchestrator, notifier = setup(("job-slow", running))
    orchestrator.map_progress[running.arn] = Progress(total=2, running=1, succeeded=1)
    storage.put_json(WORK, layout.plan_key("job-slow"), [segment.to_dict() for segment in halves()])
    done = SegmentRecord(job_id="job-slow", index=0, status="succeeded", frames=50, total_s=3.0)
    storage.create(WORK, layout.segment_winner_key("job-slow", 0, 0), done.model_dump_json().encode())
    hold = SegmentHold(task_token="tok", worker="w1", attempt=1, started_at=NOW.timestamp() - 100)
    storage.put_json(WORK, layout.segment_task_key("job-slow", 1, 0), hold.model_dump())
    queue = FakeQueue()
    queue.create("q-normal")
    sender = BackupSender(storage, queue, WORK, {"normal": "q-normal"}, BackupPolicy(min_age_s=30))
    watchdog = Watchdog(storage, orchestrator, notifier, watchdog._config, sender)
    # WHEN the watchdog sweeps twice
    assert watchdog.sweep(NOW) == []
    assert [(item.job_id, item.index) for item in watchdog.backups_sent] == [("job-slow", 1)]
    watchdog.sweep(NOW)
    # THEN the job is not closed, and exactly one backup copy is queued
    assert watchdog.backups_sent == [] and queue.depth("q-normal").total == 1
    assert notifier.published == [] and orchestrator.stopped == []


def test_a_job_marked_failed_is_stopped_at_once_with_one_notice_naming_segment_attempts_and_cause() -> None:
    # GIVEN a young running job (no stall, no dispatch problem) whose segment 3 failed for good
    doomed = execution("job-doomed", "RUNNING", started_s_ago=30)
    watchdog, storage, orchestrator, notifier = setup(("job-doomed", doomed))
    cause = "segment 3 (frames 150-200) of job-doomed failed after 3 attempts: SegmentFailed: the encoder fell over"
    marker = JobFailedMarker(
        job_id="job-doomed", segment=3, attempts=3, error="SegmentFailed", cause=cause, by="worker w1", at=0.0
    )
    assert mark_job_failed(storage, WORK, marker)
    # WHEN the watchdog sweeps, twice
    (closed,) = watchdog.sweep(NOW)
    watchdog.sweep(NOW + timedelta(seconds=10))
    # THEN its execution was stopped and exactly one failure notice says which segment, how often and why
    assert orchestrator.stopped == [(doomed.arn, "SegmentFailed")]
    (published,) = notifier.published
    assert published[2]["status"] == "failed" and published[2]["error"] == "SegmentFailed"
    assert published[2]["reason"] == cause and closed.status == "failed"


def test_a_failed_marker_of_an_earlier_run_does_not_stop_a_retry() -> None:
    # GIVEN a retry (run 1) of a job whose run 0 left its failed marker behind
    retry = Execution(execution_arn(MACHINE, execution_name("job-r", 1)), "RUNNING", NOW - timedelta(seconds=30), None)
    watchdog, storage, orchestrator, notifier = setup(("job-r", retry))
    marker = JobFailedMarker(
        job_id="job-r", run=0, segment=0, attempts=3, error="SegmentFailed", cause="c", by="w", at=0
    )
    mark_job_failed(storage, WORK, marker)
    storage.put_json(WORK, layout.run_key("job-r"), {"run": 1})
    # WHEN the watchdog sweeps, THEN the retry runs on
    assert watchdog.sweep(NOW) == [] and orchestrator.stopped == [] and notifier.published == []


def test_the_failed_marker_is_written_once_the_first_knower_wins() -> None:
    storage = FakeStorage()
    first = JobFailedMarker(job_id="j", segment=1, attempts=3, error="SegmentFailed", cause="first", by="w1", at=1)
    later = first.model_copy(update={"segment": 2, "cause": "later", "by": "dead-letter handler"})
    assert not is_job_failed(storage, WORK, "j") and job_failed(storage, WORK, "j") is None
    assert mark_job_failed(storage, WORK, first) and not mark_job_failed(storage, WORK, later)
    assert is_job_failed(storage, WORK, "j") and job_failed(storage, WORK, "j") == first


def test_a_doomed_job_that_reaches_its_own_notice_as_it_is_stopped_gets_one_notice_the_one_it_built() -> None:
    # GIVEN a job marked failed whose merge gate failed too: the state machine built its failure notice
    # and reached its claim of the notice record just as the watchdog stopped it (the record was taken)
    doomed = execution("job-race", "RUNNING", started_s_ago=30)
    watchdog, storage, orchestrator, notifier = setup(("job-race", doomed))
    marker = JobFailedMarker(job_id="job-race", segment=1, attempts=3, error="SegmentFailed", cause="c", by="w", at=0)
    mark_job_failed(storage, WORK, marker)
    built = {"status": "failed", "stage": "merge", "job_id": "job-race", "error": "SegmentFailed", "reason": "gate"}
    orchestrator.state_outputs[doomed.arn] = {"notice": built}
    orchestrator.ends_on_stop[doomed.arn] = ("FAILED", "NoticeNotClaimed")
    # WHEN the watchdog sweeps, and again later
    watchdog.sweep(NOW)
    watchdog.sweep(NOW + timedelta(seconds=600))
    # THEN one notice went out, the one the state machine built, sent by the watchdog
    (published,) = notifier.published
    assert published[2]["reason"] == "gate" and published[2]["notified_by"] == "watchdog"
    assert storage.json(WORK, layout.notice_key("job-race"))["published"] is True


def test_a_notice_the_state_machine_claimed_is_not_sent_again_when_its_execution_was_stopped() -> None:
    # GIVEN a job whose state machine claimed its notice record (and published), then was stopped from
    # outside before it could end: ABORTED, a record not marked published, its claim long past
    stopped = execution("job-sm", "ABORTED")
    watchdog, storage, orchestrator, notifier = setup(("job-sm", stopped))
    claimed = (NOW - timedelta(seconds=900)).isoformat()
    storage.put_json(
        WORK, layout.notice_key("job-sm"), {"claimed_at": claimed, "published": False, "by": "state machine"}
    )
    orchestrator.state_outputs[stopped.arn] = {"notice": {"status": "succeeded", "job_id": "job-sm"}}
    # WHEN the watchdog sweeps, THEN it sends no second notice
    assert watchdog.sweep(NOW) == [] and notifier.published == []


def test_a_state_machine_claim_whose_publish_failed_is_finished_at_once_when_its_execution_ended() -> None:
    # GIVEN a job whose state machine claimed its notice a moment ago and then failed to publish it
    failed = execution("job-pub", "FAILED", error="SNS.InternalErrorException")
    watchdog, storage, orchestrator, notifier = setup(("job-pub", failed))
    claim = {"claimed_at": NOW.isoformat(), "published": False, "by": "state machine"}
    storage.put_json(WORK, layout.notice_key("job-pub"), claim)
    orchestrator.state_outputs[failed.arn] = {"notice": {"status": "succeeded", "job_id": "job-pub", "output": "o"}}
    # WHEN the watchdog sweeps, at once and later
    watchdog.sweep(NOW)
    watchdog.sweep(NOW + timedelta(seconds=600))
    # THEN the success it built went out once, without waiting out the claim (an ended execution
    # publishes nothing more)
    (published,) = notifier.published
    assert published[2]["status"] == "succeeded" and published[2]["output"] == "o"


def test_a_running_state_machine_that_claimed_its_notice_is_left_to_publish_it() -> None:
    # GIVEN a job whose state machine claimed its notice long ago and still runs (publishing, retrying)
    running = execution("job-slow", "RUNNING", started_s_ago=30)
    watchdog, storage, orchestrator, notifier = setup(("job-slow", running))
    marker = JobFailedMarker(job_id="job-slow", segment=1, attempts=3, error="SegmentFailed", cause="c", by="w", at=0)
    mark_job_failed(storage, WORK, marker)
    claimed = (NOW - timedelta(seconds=900)).isoformat()
    storage.put_json(
        WORK, layout.notice_key("job-slow"), {"claimed_at": claimed, "published": False, "by": "state machine"}
    )
    # WHEN the watchdog sweeps, THEN it neither stops it nor publishes
    assert watchdog.sweep(NOW) == [] and orchestrator.stopped == [] and notifier.published == []
