"""The job-state read model: one derivation, read alike by the CLI's `status` and by `Operations`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetctl.client import Client
from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Progress, execution_arn
from fusionfleet.errors import JobNotFound
from fusionfleet.jobs.acceptance import accept
from fusionfleet.jobs.facts import JobRecords
from fusionfleet.jobs.final_notice import WATCHDOG, FinalNotices
from fusionfleet.jobs.loss import JobFailedMarker, mark_job_failed
from fusionfleet.jobs.runs import execution_name
from fusionfleet.jobs.states import CANCEL_REASON, Action, JobState, allowed, could_be, job_state
from fusionfleet.messages import ObjectRef
from tests.support.farm import MACHINE, NOW, RESOURCES, Farm
from tests.support.jobs import WORK


def states(farm: Farm) -> JobRecords:
    return JobRecords(farm.storage, farm.orchestrator, WORK, MACHINE)


@pytest.mark.parametrize(
    ("execution", "rejected", "cancelled", "expected"),
    [
        (None, False, False, "PENDING"),
        (None, True, False, "REJECTED"),
        ("RUNNING", False, False, "RUNNING"),
        ("RUNNING", False, True, "CANCELLED"),  # the stop is on its way
        ("ABORTED", False, True, "CANCELLED"),
        ("ABORTED", False, False, "ABORTED"),
        ("SUCCEEDED", False, True, "SUCCEEDED"),  # it ended before the cancel
        ("FAILED", False, False, "FAILED"),
        ("TIMED_OUT", False, False, "TIMED_OUT"),
        ("PENDING_REDRIVE", False, False, "RUNNING"),
    ],
)
def test_a_jobs_state_follows_its_execution_rejection_and_cancel(
    execution: str | None, rejected: bool, cancelled: bool, expected: str
) -> None:
    assert job_state(execution, rejected, cancelled) == expected


@pytest.mark.parametrize("status", ["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"])
def test_the_clis_status_and_operations_read_the_same_state_and_reason(status: str) -> None:
    # GIVEN a job whose execution is in `status`
    farm = Farm()
    farm.job("job-a", status, error=None if status in ("RUNNING", "SUCCEEDED") else "States.Boom")
    # WHEN the CLI's status and the operations' summary read it
    seen = Client(farm.storage, farm.orchestrator, RESOURCES).status("job-a")
    summary = farm.reader.view("job-a")
    # THEN they agree
    assert (seen.state, seen.reason) == (summary.state, summary.reason)
    assert seen.state == status


def test_a_cancelled_and_a_rejected_job_read_alike_everywhere() -> None:
    farm = Farm()
    farm.job("job-c", "ABORTED")
    farm.storage.put_json(WORK, layout.cancel_key("job-c"), {"run": 0})
    farm.storage.put_json(WORK, layout.rejection_key("job-r"), {"reason": "no target"})
    client = Client(farm.storage, farm.orchestrator, RESOURCES)
    assert client.status("job-c").state == farm.reader.view("job-c").state == "CANCELLED"
    assert client.status("job-c").reason == farm.reader.view("job-c").reason == CANCEL_REASON
    assert client.status("job-r").state == farm.reader.view("job-r").state == "REJECTED"
    assert client.status("job-r").reason == farm.reader.view("job-r").reason == "no target"


def test_a_job_not_yet_sliced_is_pending_once_its_manifest_is_accepted_and_unknown_before() -> None:
    # GIVEN an id no manifest was accepted for: no job record, no rejection, no execution
    farm = Farm()
    assert states(farm).facts("fresh", known=False).state == "PENDING"  # as a batch's claimed item reads
    with pytest.raises(JobNotFound):
        Client(farm.storage, farm.orchestrator, RESOURCES).status("fresh")  # issue 43: unknown, not PENDING
    with pytest.raises(JobNotFound):
        states(farm).facts("fresh")
    # WHEN its manifest is uploaded and accepted (what `submit` does before it shows the id)
    etag = farm.storage.put_bytes("media", "jobs/fresh.json", b'{"version": 1, "target": "inputs/a.mp4"}')
    accept(farm.storage, WORK, "fresh", ObjectRef(bucket="media", key="jobs/fresh.json", etag=etag),
           {"target": "inputs/a.mp4"})  # fmt: skip
    # THEN the client and operations both read it PENDING, before the slicer wrote anything
    assert Client(farm.storage, farm.orchestrator, RESOURCES).status("fresh").state == "PENDING"
    assert states(farm).facts("fresh").state == "PENDING"


def test_a_retrys_segment_counts_include_the_segments_done_before_it() -> None:
    # GIVEN a job of 4 segments retried as run 1 for its 2 failed segments: 0 and 2 were done by run 0,
    # 1 is done by the retry and 3 is in flight
    farm = Farm()
    farm.job("job-r", "FAILED", done=(0, 2), error="JobFailed")
    first = farm.orchestrator.states[execution_arn(MACHINE, "job-r")]
    retry_arn = execution_arn(MACHINE, execution_name("job-r", 1))
    farm.orchestrator.states[retry_arn] = replace(first, arn=retry_arn, status="RUNNING", stopped=None, error=None)
    farm.storage.put_json(WORK, layout.run_key("job-r"), {"run": 1, "segments": [1, 3]})
    farm.segment_done("job-r", 1)
    farm.orchestrator.map_progress[retry_arn] = Progress(total=2, succeeded=1, running=1)
    # WHEN its view is read with the segments in flight
    view = farm.reader.view("job-r", in_flight=True)
    facts = states(farm).facts("job-r")
    # THEN the whole job's counts: done from the segment records of every run, in flight from the run's
    assert view.state == "RUNNING" and facts.execution is not None and facts.execution.arn == retry_arn
    counts = view.segments
    assert (counts.total, counts.done, counts.failed, counts.running, counts.pending) == (4, 3, 0, 1, 0)
    assert states(farm).run_progress(retry_arn) == Progress(total=2, succeeded=1, running=1)
    assert Client(farm.storage, farm.orchestrator, RESOURCES).status("job-r").segments == counts
    # AND a listing, which asks the orchestrator nothing, counts the same done segments
    (listed,) = farm.reader.list_jobs()
    assert (listed.segments.done, listed.segments.total) == (3, 4)


def test_an_execution_of_a_retried_long_job_id_is_traced_to_its_job() -> None:
    farm = Farm()
    long_id = "clip-" + "x" * 90
    farm.job(long_id, "FAILED", error="JobFailed")
    first = farm.orchestrator.states[execution_arn(MACHINE, long_id)]
    retry_arn = execution_arn(MACHINE, execution_name(long_id, 1))
    farm.orchestrator.states[retry_arn] = replace(first, arn=retry_arn, status="RUNNING")
    assert states(farm).job_of(farm.orchestrator.states[retry_arn]) == (long_id, 1)
    assert states(farm).job_of(first) == (long_id, 0)


CAUSE = "segment 2 (frames 200-299) of job-d failed after 3 attempts: EngineCrashed: exit code 70"


def doom(farm: Farm, run: int = 0) -> None:
    marker = JobFailedMarker(job_id="job-d", run=run, segment=2, attempts=3, error="EngineCrashed", cause=CAUSE,
                             by="worker w1", at=0.0)  # fmt: skip
    mark_job_failed(farm.storage, WORK, marker)


def test_a_doomed_jobs_reason_is_its_notices_not_the_orchestrations() -> None:
    # GIVEN a doomed job whose execution ended in an orchestration artefact after the watchdog told it
    farm = Farm()
    farm.job("job-d", "FAILED", error="States.Timeout")
    doom(farm)
    told = "segment 2 (frames 200-299) failed after 3 attempts: EngineCrashed (as the notice said)"
    notices = FinalNotices(farm.storage, WORK, ())
    notices.claim("job-d", WATCHDOG, NOW, error="EngineCrashed", reason=told)
    # THEN every reader gives the notice's reason
    client = Client(farm.storage, farm.orchestrator, RESOURCES)
    assert client.status("job-d").reason == farm.reader.view("job-d").reason == told
    # AND without a notice record, the job-failed marker's cause, never `States.Timeout`
    farm.storage.delete_prefix(WORK, layout.notice_key("job-d"))
    assert farm.reader.view("job-d").reason == CAUSE


def test_a_job_whose_state_machine_told_it_reads_its_notices_reason_and_a_running_doomed_job_its_cause() -> None:
    farm = Farm()
    arn = farm.job("job-d", "FAILED", error="JobFailed")
    farm.orchestrator.states[arn] = replace(farm.orchestrator.states[arn], cause="merge of job-d: 1 of 4 …")
    assert farm.reader.view("job-d").reason == "merge of job-d: 1 of 4 …"
    # a running job has no reason until it is doomed; a marker of an earlier run dooms no retry
    farm.job("job-d", "RUNNING")
    assert farm.reader.view("job-d").reason == ""
    doom(farm, run=1)
    assert farm.reader.view("job-d").reason == ""
    farm.storage.delete_prefix(WORK, layout.job_failed_key("job-d"))
    doom(farm)
    assert farm.reader.view("job-d").reason == CAUSE and farm.reader.view("job-d").state == "RUNNING"
    # a job nobody explained still says what its execution said
    farm.job("job-x", "TIMED_OUT", error="States.Timeout")
    assert farm.reader.view("job-x").reason == "why"


def test_a_job_queued_or_held_by_its_tenant_is_waiting_until_it_runs_or_is_cancelled() -> None:
    # queued for its tenant's turn (no execution yet), or held by its budget (its execution stopped)
    assert job_state(None, False, False, waiting=True) is JobState.WAITING
    assert job_state("ABORTED", False, False, waiting=True) is JobState.WAITING
    assert job_state("RUNNING", False, False, waiting=True) is JobState.WAITING  # the hold's stop under way
    # cancelled while it waited: never ran, or was held
    assert job_state(None, False, True) is JobState.CANCELLED
    assert job_state("ABORTED", False, True, waiting=True) is JobState.CANCELLED
    # resumed: its next run's execution is what counts
    assert job_state("SUCCEEDED", False, False, waiting=True) is JobState.SUCCEEDED
    assert not JobState.WAITING.ended and JobState.WAITING.public is JobState.WAITING
    assert allowed(JobState.WAITING, Action.CANCEL) and not allowed(JobState.WAITING, Action.RETRY)
    assert could_be("ABORTED", JobState.WAITING) and could_be("WAITING", JobState.WAITING)
