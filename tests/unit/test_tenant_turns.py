"""A retried job and a batch's item take their tenant's turn as a new job does (issue 43: the simulation
found both starting outside admission): queued in the tenant's line, started by the admitter once it holds
a slot (a conditional write), WAITING until then.

The farm is the simulation's (tests/simulation/farm.py): the real slicer, admitter, retry and readers
on in-memory S3 and Step Functions, every party run to its end here.
"""

from __future__ import annotations

import time
from functools import partial

from fusionfleet import layout
from fusionfleet.jobs.runs import execution_name
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.waiting import read_waiting
from fusionfleet.services.batch_operations import BatchOperations
from fusionfleet.services.job_retry import JobRetry
from fusionfleet.services.operations import Operations
from tests.simulation.alone import end, run, submit
from tests.simulation.farm import TENANT, Farm
from tests.support.jobs import WORK


def admit(farm: Farm) -> list[str]:
    return [item.job_id for item in farm.admitter().admit(TENANT)]


def test_a_retried_job_waits_while_its_tenants_slot_is_taken_and_starts_when_it_frees() -> None:
    # GIVEN a tenant that may run one job: its first failed, and its second was admitted in its place
    farm = Farm(tenant_limit=1)
    first, second = submit(farm), submit(farm)
    end(farm, first.job_id, "FAILED")
    assert admit(farm) == [second.job_id]
    # WHEN the tenant retries the first (the API's and the CLI's retry: Operations.retry)
    operations = Operations(farm.storage, farm.orchestrator, farm.notifier, farm.resources, clock=farm.clock)
    told = run(farm, partial(operations.retry, first.job_id))
    # THEN its next run waits in the tenant's line, WAITING, and one job runs
    assert "waits for its tenant acme's turn" in str(told)
    assert farm.orchestrator.running(TENANT) == [second.job_id]
    assert farm.job_status(first.job_id).state is JobState.WAITING
    waiting = read_waiting(farm.storage, WORK, first.job_id)
    assert waiting is not None and waiting.run == 1 and waiting.execution_name == execution_name(first.job_id, 1)
    # WHEN the second ends and the tenant is admitted (the notice follower, the watchdog's sweep)
    end(farm, second.job_id)
    assert admit(farm) == [first.job_id]
    # THEN the retried run started, as its retry had prepared it
    assert farm.orchestrator.running(TENANT) == [execution_name(first.job_id, 1)]
    assert farm.job_status(first.job_id).state is JobState.RUNNING


def test_a_retry_that_admits_starts_at_once_when_a_slot_is_free_and_its_run_holds_the_slot() -> None:
    # GIVEN a tenant that may run one job, whose only job failed
    farm = Farm(tenant_limit=1)
    first = submit(farm)
    end(farm, first.job_id, "FAILED")
    # WHEN a party that admits with the stack's limits retries it (the slicer, for a batch's retry)
    retry = JobRetry(farm.storage, farm.orchestrator, farm.resources, farm.clock, admit=lambda tenant: admit(farm))
    told = run(farm, partial(retry.retry, first.job_id))
    # THEN it started at once, in the slot its failed run had held
    assert f"(execution {execution_name(first.job_id, 1)})" in str(told)
    assert farm.orchestrator.running(TENANT) == [execution_name(first.job_id, 1)]
    # AND the slot is its new run's: a job submitted now waits
    later = submit(farm)
    assert farm.job_status(later.job_id).state is JobState.WAITING
    assert len(farm.orchestrator.running(TENANT)) == 1


def test_a_batchs_item_waits_for_its_tenants_turn_even_when_the_running_jobs_are_not_yet_listed() -> None:
    # GIVEN a tenant that may run one job, running one that Step Functions does not list yet (its list lags)
    farm = Farm(tenant_limit=1)
    farm.orchestrator.list_lag_s = 30.0
    job = submit(farm)
    assert farm.orchestrator.running(TENANT) == [job.job_id]
    # WHEN the tenant's batch is sliced (its count of the tenant's running jobs finds none)
    batch = submit(farm, batch=True)
    # THEN its first item waits in the tenant's line instead of starting beside the job: one runs
    item = f"{batch.job_id}.0000"
    assert farm.orchestrator.running(TENANT) == [job.job_id]
    assert farm.job_status(item).state is JobState.WAITING
    detail = farm.batch_detail(batch.job_id)
    assert detail.batch.state is JobState.WAITING
    # AND the batch is not over: no summary while its item waits
    assert not [message for _t, _s, message in farm.notifier.published if message.get("stage") == "batch"]
    # WHEN the job ends and the tenant is admitted
    end(farm, job.job_id)
    assert admit(farm) == [item]
    # THEN the item runs, alone
    assert farm.orchestrator.running(TENANT) == [item]


def test_an_item_that_ends_admits_its_tenants_next_job() -> None:
    # GIVEN a tenant that may run one job: its batch's first item runs, a job of its own waits behind it
    farm = Farm(tenant_limit=1)
    batch = submit(farm, batch=True)
    item = f"{batch.job_id}.0000"
    assert farm.orchestrator.running(TENANT) == [item]
    job = submit(farm)
    assert farm.job_status(job.job_id).state is JobState.WAITING
    # WHEN the item ends and tells its batch (a quiet item: no notice for the notice follower to admit on)
    # (within one upload second the line's order is the slicer's queue time to the millisecond, the job id
    # breaking a tie: this in-memory run can queue the job and the next item in one millisecond, and then
    # `acme_clip1-….0001` sorts first; a fresh-clone run failed so. The item is queued a millisecond later,
    # as it is on any real stack.)
    time.sleep(0.005)
    end(farm, item)
    run(farm, partial(farm.slicer.advance, batch.job_id, item))
    # THEN the tenant's next in line started: the job, submitted before the batch's next item was queued
    assert farm.orchestrator.running(TENANT) == [job.job_id]
    assert farm.job_status(f"{batch.job_id}.0001").state is JobState.WAITING


def test_a_batch_cancelled_while_its_item_waits_takes_the_item_out_of_its_tenants_line() -> None:
    # GIVEN a tenant that may run one job, running one (not listed yet), and its batch whose first item waits
    farm = Farm(tenant_limit=1)
    farm.orchestrator.list_lag_s = 30.0
    job = submit(farm)
    batch = submit(farm, batch=True)
    item = f"{batch.job_id}.0000"
    assert farm.job_status(item).state is JobState.WAITING
    # WHEN the batch is cancelled
    operations = Operations(farm.storage, farm.orchestrator, farm.notifier, farm.resources, clock=farm.clock)
    told = run(farm, partial(BatchOperations(operations).cancel, batch.job_id))
    # THEN the waiting item was cancelled with it, and never starts when the slot frees
    assert "1 running items cancelled" in str(told)
    assert farm.job_status(item).state is JobState.CANCELLED
    assert farm.batch_detail(batch.job_id).batch.state is JobState.CANCELLED
    end(farm, job.job_id)
    assert admit(farm) == [] and farm.orchestrator.running(TENANT) == []


def test_a_tenants_job_recorded_but_never_queued_takes_its_turn_when_its_event_comes_again() -> None:
    # GIVEN a tenant that may run one job, running one; a second job's slicer died after its job record
    farm = Farm(tenant_limit=1)
    submit(farm)
    second = farm.put_manifest(False, TENANT)
    slicer = farm.scheduler.spawn("slicer", second.key, farm.clock(), partial(farm.slice, second.key))
    while not slicer.next_call.startswith(f"s3.put {WORK}/{layout.waiting_key(second.job_id)}"):
        farm.scheduler.step(slicer)
    farm.scheduler.kill(slicer)
    # WHEN its manifest's event comes again (SQS redelivers it)
    run(farm, partial(farm.slice, second.key))
    # THEN it waits its turn rather than starting beside the running job
    assert len(farm.orchestrator.running(TENANT)) == 1
    assert farm.job_status(second.job_id).state is JobState.WAITING
