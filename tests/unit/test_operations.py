"""Operations against the in-memory fakes: list, job detail, logs, workers, cancel and retry."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fleetctl.tables import duration, table
from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.errors import DeleteFailed, JobNotFound, OperationRefused
from fusionfleet.fleet.workers import worker_views
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE
from fusionfleet.jobs.loss import JobFailedMarker
from fusionfleet.messages import SegmentRecord, WorkerBeat
from fusionfleet.services.watchdog import Watchdog
from tests.support.farm import MACHINE, NOW, Farm
from tests.support.jobs import WORK, watchdog_config


def test_list_shows_jobs_newest_first_filters_by_state_and_keeps_to_the_limit() -> None:
    # GIVEN jobs in several states, submitted at different times, and a rejected one
    farm = Farm()
    farm.job("old-ok", "SUCCEEDED", minutes_ago=60, done=(0, 1, 2, 3))
    farm.job("mid-failed", "FAILED", minutes_ago=30, done=(0,), failed=(1,), error="JobFailed")
    farm.job("new-running", "RUNNING", minutes_ago=1, done=(0, 1))
    farm.storage.put_json(
        WORK, layout.rejection_key("bad-one"), {"reason": "no target", "manifest": {"key": "jobs/bad.json"}}
    )
    farm.storage.put_json(
        WORK, layout.rejected_index_key("bad-one"), {"rejected_at": (NOW - timedelta(minutes=5)).isoformat()}
    )
    # WHEN listing
    jobs = farm.reader.list_jobs()
    # THEN newest first, with each job's state and progress
    assert [job.job_id for job in jobs] == ["new-running", "bad-one", "mid-failed", "old-ok"]
    running, rejected, failed, succeeded = jobs
    assert (running.state, running.segments.done, running.segments.total, running.output) == ("RUNNING", 2, 4, None)
    assert rejected.state == "REJECTED" and rejected.reason == "no target" and rejected.name == "bad"
    assert (failed.state, failed.segments.done, failed.segments.failed, failed.reason) == ("FAILED", 1, 1, "why")
    assert succeeded.output == "s3://media/outputs/clip.mp4" and succeeded.priority == "normal"
    assert succeeded.submitted_at == NOW - timedelta(minutes=60)
    # AND a state filter and a limit keep to what was asked
    assert [job.job_id for job in farm.reader.list_jobs(state="FAILED")] == ["mid-failed"]
    assert [job.job_id for job in farm.reader.list_jobs(limit=2)] == ["new-running", "bad-one"]
    with pytest.raises(OperationRefused):
        farm.reader.list_jobs(state="DONE")


def test_a_job_shows_its_segment_grid_attempts_timings_and_preview() -> None:
    # GIVEN a running job: segment 0 done, 1 failed once and running again, 2 never started, 3 failed for good
    farm = Farm()
    farm.job("grid", "RUNNING", done=(0,), failed=(3,))
    farm.attempt("grid", 0, 1, "succeeded")
    farm.attempt("grid", 1, 1, "failed")
    farm.attempt("grid", 1, 2, "running", worker="w2")
    farm.attempt("grid", 3, 1, "failed")
    farm.storage.put_bytes(WORK, layout.frame_preview_key("grid"), b"\xff\xd8jpeg")
    # WHEN its detail is asked for
    detail = farm.reader.detail("grid")
    # THEN each segment has its state, worker and attempt
    assert [(s.index, s.state, s.worker, s.attempt) for s in detail.segments] == [
        (0, "done", "w1", 1), (1, "running", "w2", 2), (2, "pending", "", 0), (3, "failed", "w1", 1),
    ]  # fmt: skip
    assert (detail.segments[1].start_frame, detail.segments[1].end_frame) == (25, 50)
    assert [(a.segment, a.attempt, a.status) for a in detail.attempts] == [
        (0, 1, "succeeded"), (1, 1, "failed"), (1, 2, "running"), (3, 1, "failed"),
    ]  # fmt: skip
    assert detail.timings["engine_s"] == 1.5 and detail.timings["attempts"] == 4
    assert detail.preview_key == layout.frame_preview_key("grid") and farm.reader.preview("grid") == b"\xff\xd8jpeg"
    assert detail.job.state == "RUNNING" and detail.job.segments.done == 1
    # AND its cost so far: engine time of the attempt that succeeded, billed time of every ended attempt
    # (8 s each, three of them: a failed attempt is billed too), at the default price, not final
    assert detail.cost == {
        "engine_gpu_s": 1.5, "billed_gpu_s": 24.0, "gpu_hourly_price": DEFAULT_GPU_HOURLY_PRICE,
        "estimated_usd": round(24.0 / 3600 * DEFAULT_GPU_HOURLY_PRICE, 6), "final": False,
    }  # fmt: skip


def test_a_succeeded_jobs_cost_is_the_merges_figure() -> None:
    farm = Farm()
    arn = farm.job("paid", "SUCCEEDED", done=(0, 1, 2, 3))
    cost = {"engine_gpu_s": 4.0, "billed_gpu_s": 9.0, "gpu_hourly_price": 2.0, "estimated_usd": 0.005}
    farm.orchestrator.states[arn] = replace(farm.orchestrator.states[arn], output={"cost": cost})
    assert farm.reader.detail("paid").cost == {**cost, "final": True}
    # and a job no attempt of which has ended has no cost yet
    farm.job("fresh", "RUNNING")
    assert farm.reader.detail("fresh").cost is None


def test_unknown_jobs_are_job_not_found_everywhere() -> None:
    farm = Farm()
    for action in (farm.reader.detail, farm.reader.logs, farm.ops.cancel, farm.ops.retry, farm.reader.preview):
        with pytest.raises(JobNotFound):
            action("nope-0123456789abcdef")


def test_logs_list_every_attempt_across_runs_and_one_segment_on_request() -> None:
    # GIVEN a segment that failed three times, then succeeded in the job's retry
    farm = Farm()
    farm.job("logged", "FAILED", done=(0,), error="JobFailed")
    farm.attempt("logged", 0, 1, "succeeded")
    for number in (1, 2, 3):
        farm.attempt("logged", 1, number, "failed")
    farm.attempt("logged", 1, 1, "succeeded", run=1, worker="w9")
    # WHEN the logs are read
    every = farm.reader.logs("logged")
    one = farm.reader.logs("logged", segment=1)
    # THEN the retry's attempt follows the first run's three, numbered on
    assert [(a.segment, a.attempt, a.status, a.worker) for a in one] == [
        (1, 1, "failed", "w1"), (1, 2, "failed", "w1"), (1, 3, "failed", "w1"), (1, 4, "succeeded", "w9"),
    ]  # fmt: skip
    assert len(every) == 5 and every[0].segment == 0 and every[1].error == "EngineCrashed"


def test_logs_fall_back_to_the_segment_record_when_no_attempt_was_recorded() -> None:
    farm = Farm()
    farm.job("older", "SUCCEEDED", done=(0, 1, 2, 3))
    (only,) = farm.reader.logs("older", segment=2)
    assert (only.segment, only.attempt, only.status, only.worker) == (2, 1, "succeeded", "w1")


def test_cancel_stops_a_running_job_with_one_cancelled_notice_that_the_watchdog_does_not_repeat() -> None:
    # GIVEN a running job
    farm = Farm()
    arn = farm.job("busy", "RUNNING", done=(0,))
    # WHEN an operator cancels it
    message = farm.ops.cancel("busy")
    # THEN the execution was stopped, the marker written, one notice published saying cancelled
    assert farm.orchestrator.stopped == [(arn, "JobCancelled")]
    assert farm.storage.exists(WORK, layout.cancel_key("busy"))
    ((topic, subject, notice),) = farm.notifier.published
    assert topic == "topic" and subject == "FusionFleet busy cancelled"
    assert notice["status"] == "cancelled" and notice["job_id"] == "busy" and notice["segments_done"] == 1
    assert farm.storage.json(WORK, layout.notice_key("busy"))["published"] is True
    assert "cancelled" in message and "1 of 4" in message
    # AND the job reads CANCELLED
    assert farm.reader.detail("busy").job.state == "CANCELLED"
    assert [job.job_id for job in farm.reader.list_jobs(state="CANCELLED")] == ["busy"]
    # AND the watchdog, seeing an ABORTED execution, publishes nothing more
    config = watchdog_config(WORK, MACHINE, "topic")
    assert Watchdog(farm.storage, farm.orchestrator, farm.notifier, config).sweep() == []
    assert len(farm.notifier.published) == 1


def test_a_cancel_that_lands_as_the_job_notifies_sends_one_notice_the_jobs_own() -> None:
    # GIVEN a running job that had merged and built its success notice when the cancel claimed the
    # notice record: its own claim failed and it ended in NoticeNotClaimed, publishing nothing
    farm = Farm()
    arn = farm.job("photo-finish", "RUNNING", done=(0, 1, 2, 3))
    farm.orchestrator.ends_on_stop[arn] = ("FAILED", "NoticeNotClaimed")
    built = {"status": "succeeded", "job_id": "photo-finish", "output": "outputs/p.mp4"}
    farm.orchestrator.state_outputs[arn] = {"notice": built}
    # WHEN an operator cancels it, THEN the cancel is refused: the job ended by itself
    with pytest.raises(OperationRefused, match="ended \\(succeeded\\) as it was cancelled"):
        farm.ops.cancel("photo-finish")
    # AND exactly one notice went out, the success, and no cancel marker is left to drop segments
    ((_topic, subject, notice),) = farm.notifier.published
    assert notice["status"] == "succeeded" and notice["output"] == "outputs/p.mp4" and "done" in subject
    assert not farm.storage.exists(WORK, layout.cancel_key("photo-finish"))
    assert farm.storage.json(WORK, layout.notice_key("photo-finish"))["published"] is True
    # AND the watchdog adds nothing
    config = watchdog_config(WORK, MACHINE, "topic")
    Watchdog(farm.storage, farm.orchestrator, farm.notifier, config).sweep()
    assert len(farm.notifier.published) == 1


@pytest.mark.parametrize("status", ["SUCCEEDED", "FAILED", "ABORTED"])
def test_cancelling_an_ended_job_says_so_and_changes_nothing(status: str) -> None:
    farm = Farm()
    farm.job("ended", status, done=(0, 1, 2, 3), error="JobFailed" if status == "FAILED" else None)
    before = dict(farm.storage._objects)
    with pytest.raises(OperationRefused, match="has ended, nothing to cancel"):
        farm.ops.cancel("ended")
    assert farm.orchestrator.stopped == [] and farm.notifier.published == []
    assert farm.storage._objects == before


def test_retry_renders_only_the_segments_without_valid_output() -> None:
    # GIVEN a failed job: 0 and 1 valid, 2 failed, 3 recorded as succeeded but its object gone
    farm = Farm()
    farm.job("broken", "FAILED", done=(0, 1, 3), failed=(2,), error="JobFailed")
    farm.storage.delete_prefix(WORK, layout.segment_key("broken", 3))
    # WHEN it is retried
    message = farm.ops.retry("broken")
    # THEN a second run starts, named after the job, with a plan of only the missing segments
    arn = execution_arn(MACHINE, "broken--r1")
    payload = farm.orchestrator.executions[arn]
    assert payload["job"]["run"] == 1 and payload["job"]["job_id"] == "broken"
    assert payload["plan"] == {"bucket": WORK, "key": layout.run_plan_key("broken", 1)}
    assert payload["limits"] == {"render_heartbeat_s": 100}
    assert [item["index"] for item in farm.storage.json(WORK, layout.run_plan_key("broken", 1))] == [2, 3]
    # AND the job's own plan (the merge gate's) is untouched, and the job is running again
    assert len(farm.storage.json(WORK, layout.plan_key("broken"))) == 4
    assert farm.storage.json(WORK, layout.run_key("broken"))["segments"] == [2, 3]
    assert farm.reader.detail("broken").job.state == "RUNNING"
    assert "run 1" in message and "2 of 4" in message


def test_a_retry_whose_marker_cannot_be_cleared_writes_nothing_of_the_new_run() -> None:
    # GIVEN a doomed job (its job-failed marker written) and storage that refuses to delete that marker,
    # as S3 does inside a 200 when the role may not delete the key
    farm = Farm()
    farm.job("doomed", "FAILED", done=(0,), failed=(1,), error="JobFailed")
    marker = JobFailedMarker(job_id="doomed", error="JobFailed", cause="segment 1 failed", by="worker w", at=0.0)
    farm.storage.put_json(WORK, layout.job_failed_key("doomed"), marker.model_dump())

    def refuse(bucket: str, prefix: str) -> int:
        raise DeleteFailed(bucket, [(prefix, "AccessDenied", "Access Denied")])

    farm.storage.delete_prefix = refuse  # type: ignore[method-assign]
    # WHEN it is retried
    with pytest.raises(DeleteFailed):
        farm.ops.retry("doomed")
    # THEN no plan, run record or execution of a new run exists: the job is as it was
    assert not farm.storage.exists(WORK, layout.run_plan_key("doomed", 1))
    assert not farm.storage.exists(WORK, layout.run_key("doomed"))
    assert execution_arn(MACHINE, "doomed--r1") not in farm.orchestrator.executions
    assert farm.reader.detail("doomed").job.state == "FAILED"


def test_a_cancelled_job_retried_starts_clean_and_the_watchdog_leaves_its_old_run_alone() -> None:
    # GIVEN a cancelled job
    farm = Farm()
    old = farm.job("again", "RUNNING", done=(0,))
    farm.ops.cancel("again")
    # WHEN it is retried
    farm.ops.retry("again")
    # THEN the cancel marker and the old notice record are gone
    assert not farm.storage.exists(WORK, layout.cancel_key("again"))
    assert not farm.storage.exists(WORK, layout.notice_key("again"))
    # AND the watchdog does not notify the old run's ABORTED execution a second time
    config = watchdog_config(WORK, MACHINE, "topic")
    assert Watchdog(farm.storage, farm.orchestrator, farm.notifier, config).sweep() == []
    assert len(farm.notifier.published) == 1 and farm.orchestrator.describe(old).status == "ABORTED"
    # AND a second retry while the first runs is refused
    with pytest.raises(OperationRefused, match="still running"):
        farm.ops.retry("again")


def test_the_watchdog_notifies_a_retry_run_that_ended_without_a_notice() -> None:
    farm = Farm()
    farm.job("rerun", "FAILED", done=(0,), error="JobFailed")
    farm.ops.retry("rerun")
    arn = execution_arn(MACHINE, "rerun--r1")
    farm.orchestrator.states[arn] = Execution(arn, "TIMED_OUT", NOW, NOW + timedelta(seconds=5))
    config = watchdog_config(WORK, MACHINE, "topic")
    (closed,) = Watchdog(farm.storage, farm.orchestrator, farm.notifier, config).sweep(NOW + timedelta(seconds=10))
    assert closed.job_id == "rerun" and farm.notifier.published[0][2]["job_id"] == "rerun"


@pytest.mark.parametrize(("status", "why"), [("RUNNING", "still running"), ("SUCCEEDED", "nothing to retry")])
def test_retry_of_a_running_or_succeeded_job_is_refused(status: str, why: str) -> None:
    farm = Farm()
    farm.job("fine", status, done=(0, 1, 2, 3))
    with pytest.raises(OperationRefused, match=why):
        farm.ops.retry("fine")
    assert farm.orchestrator.starts == []


def test_a_worker_that_stopped_beating_is_lost_after_the_lapse() -> None:
    # GIVEN two workers' presence records, one beating now, one silent for a minute
    farm = Farm()
    for name, ago, current in (("worker-1", 2, "job-a:3"), ("worker-2", 60, None), ("gone-long-ago", 90000, None)):
        beat = WorkerBeat(name=name, role="render", engine="copy", current=current, segments_done=7,
                          last_beat=farm.clock() - ago)  # fmt: skip
        farm.storage.put_bytes(WORK, layout.worker_key(name), beat.model_dump_json().encode())
    # WHEN the workers are listed with a 30 s lapse
    views = worker_views(farm.storage, WORK, farm.clock())
    # THEN the silent one is lost, the other alive with its current segment
    assert [(v.name, v.lost, v.current, v.segments_done) for v in views] == [
        ("worker-1", False, "job-a:3", 7), ("worker-2", True, None, 7),
    ]  # fmt: skip
    assert views[0].last_heartbeat == datetime.fromtimestamp(farm.clock() - 2, UTC)
    # AND a longer lapse counts it alive again
    assert not any(view.lost for view in worker_views(farm.storage, WORK, farm.clock(), lost_after_s=120))


def test_tables_align_columns_and_durations_read_at_a_glance() -> None:
    lines = table(("JOB", "N", "WHY"), [("a", 1, "x"), ("long-name", 12, "a long reason")], right=(1,))
    assert lines == ["JOB         N  WHY", "a           1  x", "long-name  12  a long reason"]
    assert [duration(s) for s in (5, 65, 3700, 90000)] == ["5s", "1m05s", "1h01m", "1d01h"]


def test_a_cancelled_job_whose_execution_is_still_stopping_reads_cancelled_and_is_not_retried_yet() -> None:
    # GIVEN an orchestrator that reports a stopped execution RUNNING until its waiting tasks notice (LocalStack)
    farm = Farm()
    arn = farm.job("slow-stop", "RUNNING", done=(0,))
    running = farm.orchestrator.states[arn]
    farm.ops.cancel("slow-stop")
    farm.orchestrator.states[arn] = running
    # THEN the job already reads CANCELLED, a second cancel is refused, and a retry waits for the stop
    assert farm.reader.detail("slow-stop").job.state == "CANCELLED"
    assert [job.job_id for job in farm.reader.list_jobs(state="CANCELLED")] == ["slow-stop"]
    with pytest.raises(OperationRefused, match="nothing to cancel"):
        farm.ops.cancel("slow-stop")
    with pytest.raises(OperationRefused, match="still stopping"):
        farm.ops.retry("slow-stop")
    assert len(farm.notifier.published) == 1


def test_a_segment_won_by_a_backup_copy_counts_as_done_and_is_not_rendered_again_by_a_retry() -> None:
    # GIVEN a failed job whose segment 1 was committed by its backup copy (output beside the segment's key)
    farm = Farm()
    farm.job("copied", "FAILED", done=(0,), failed=(2, 3), error="JobFailed")
    key = layout.copy_segment_key("copied", 1, 1)
    farm.storage.put_bytes(WORK, key, b"mp4")
    won = SegmentRecord(job_id="copied", index=1, status="succeeded", frames=25, worker="w2", key=key, copy_number=1)
    farm.storage.put_json(WORK, layout.segment_record_key("copied", 1), won.model_dump())
    farm.attempt("copied", 1, 1, "succeeded", worker="w2")
    # WHEN it is retried
    farm.ops.retry("copied")
    # THEN only the failed segments are planned again
    assert [item["index"] for item in farm.storage.json(WORK, layout.run_plan_key("copied", 1))] == [2, 3]
