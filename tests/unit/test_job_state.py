"""The job-state read model: one derivation, read alike by the CLI's `status` and by `Operations`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetctl.client import Client
from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Progress, execution_arn
from fusionfleet.errors import JobNotFound
from fusionfleet.jobs.runs import execution_name
from fusionfleet.jobs.state import CANCEL_REASON, JobStates, job_state
from tests.support.farm import MACHINE, RESOURCES, Farm
from tests.support.jobs import WORK


def states(farm: Farm) -> JobStates:
    return JobStates(farm.storage, farm.orchestrator, WORK, MACHINE)


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
    summary = farm.ops.summary("job-a")
    # THEN they agree
    assert (seen.state, seen.reason) == (summary.state, summary.reason)
    assert seen.state == status


def test_a_cancelled_and_a_rejected_job_read_alike_everywhere() -> None:
    farm = Farm()
    farm.job("job-c", "ABORTED")
    farm.storage.put_json(WORK, layout.cancel_key("job-c"), {"run": 0})
    farm.storage.put_json(WORK, layout.rejection_key("job-r"), {"reason": "no target"})
    client = Client(farm.storage, farm.orchestrator, RESOURCES)
    assert client.status("job-c").state == farm.ops.summary("job-c").state == "CANCELLED"
    assert client.status("job-c").reason == farm.ops.summary("job-c").reason == CANCEL_REASON
    assert client.status("job-r").state == farm.ops.summary("job-r").state == "REJECTED"
    assert client.status("job-r").reason == farm.ops.summary("job-r").reason == "no target"


def test_a_job_not_yet_sliced_is_pending_for_the_client_and_unknown_to_operations() -> None:
    # GIVEN a manifest just uploaded: no job record, no rejection, no execution yet
    farm = Farm()
    assert states(farm).facts("fresh", known=False).state == "PENDING"
    assert Client(farm.storage, farm.orchestrator, RESOURCES).status("fresh").state == "PENDING"
    with pytest.raises(JobNotFound):
        states(farm).facts("fresh")


def test_a_retrys_map_run_progress_counts_the_segments_done_before_it() -> None:
    # GIVEN a job of 4 segments retried as run 1 for its 2 failed segments, one of which is done
    farm = Farm()
    farm.job("job-r", "FAILED", error="JobFailed")
    first = farm.orchestrator.states[execution_arn(MACHINE, "job-r")]
    retry_arn = execution_arn(MACHINE, execution_name("job-r", 1))
    farm.orchestrator.states[retry_arn] = replace(first, arn=retry_arn, status="RUNNING", stopped=None, error=None)
    farm.storage.put_json(WORK, layout.run_key("job-r"), {"run": 1, "segments": [1, 3]})
    farm.orchestrator.map_progress[retry_arn] = Progress(total=2, succeeded=1, running=1)
    # WHEN its progress is read
    model = states(farm)
    facts = model.facts("job-r")
    # THEN the whole job's counts, while the run's own counts stay the run's
    assert facts.state == "RUNNING" and facts.execution is not None and facts.execution.arn == retry_arn
    assert model.progress(facts) == Progress(total=4, succeeded=3, running=1)
    assert model.run_progress(retry_arn) == Progress(total=2, succeeded=1, running=1)
    assert Client(farm.storage, farm.orchestrator, RESOURCES).status("job-r").progress == model.progress(facts)


def test_an_execution_of_a_retried_long_job_id_is_traced_to_its_job() -> None:
    farm = Farm()
    long_id = "clip-" + "x" * 90
    farm.job(long_id, "FAILED", error="JobFailed")
    first = farm.orchestrator.states[execution_arn(MACHINE, long_id)]
    retry_arn = execution_arn(MACHINE, execution_name(long_id, 1))
    farm.orchestrator.states[retry_arn] = replace(first, arn=retry_arn, status="RUNNING")
    assert states(farm).job_of(farm.orchestrator.states[retry_arn]) == (long_id, 1)
    assert states(farm).job_of(first) == (long_id, 0)
