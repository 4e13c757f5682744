"""A manifest uploaded again after its job's record expired runs again, as the job's next run.

Step Functions keeps an ended execution's name for 90 days and the job's record lives
WorkRetentionDays (14): the same upload again must neither find the old name taken and start
nothing, nor restart anything for a duplicate event of one upload.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.adapters.storage import get_json
from fusionfleet.jobs.facts import JobRecords
from fusionfleet.jobs.runs import current_run, execution_name
from fusionfleet.messages import JobContext
from fusionfleet.services import slicing
from fusionfleet.services.operations import Operations
from fusionfleet.services.slicing import Slicer
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.farm import RESOURCES
from tests.support.jobs import slicer_config
from tests.support.media import write_video
from tests.support.tenants import MACHINE, MEDIA, TOPIC, WORK, drop


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video(tmp_path_factory.mktemp("again") / "clip.mp4", seconds=6, fps=25, width=160, height=120)


def farm() -> tuple[Slicer, FakeStorage, FakeOrchestrator, FakeNotifier]:
    storage, orchestrator, notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
    return Slicer(storage, orchestrator, notifier, slicer_config(WORK, MACHINE, TOPIC)), storage, orchestrator, notifier


def ended(orchestrator: FakeOrchestrator, arn: str, status: str = "SUCCEEDED") -> None:
    orchestrator.states[arn] = Execution(arn=arn, status=status, input=orchestrator.executions[arn])


def expire_work(storage: FakeStorage, job_id: str) -> None:
    """What the work bucket's lifecycle rule does WorkRetentionDays after the job ran."""
    storage.delete_prefix(WORK, layout.work_prefix(job_id))


def test_a_duplicate_event_of_one_upload_starts_one_execution(clip: Path) -> None:
    # GIVEN a dropped job that started
    slicer, storage, orchestrator, _ = farm()
    key = drop(storage, clip, None)
    first = slicer.handle(MEDIA, key)
    # WHEN S3 delivers its event again, while it runs and after it ended
    again = slicer.handle(MEDIA, key)
    ended(orchestrator, first.execution_arn)
    late = slicer.handle(MEDIA, key)
    # THEN both are duplicates of the one execution, and no other run was made
    assert first.status == "started" and again.status == late.status == "duplicate"
    assert again.execution_arn == late.execution_arn == first.execution_arn
    assert set(orchestrator.executions) == {first.execution_arn}
    assert current_run(storage, WORK, first.job_id).run == 0


def test_an_upload_after_the_jobs_record_expired_runs_as_its_next_run(clip: Path) -> None:
    # GIVEN a job that ran, ended, and whose work files (record, plan, notice) expired, though its
    # execution's name is still taken
    slicer, storage, orchestrator, _ = farm()
    key = drop(storage, clip, None)
    first = slicer.handle(MEDIA, key)
    ended(orchestrator, first.execution_arn, "FAILED")
    storage.put_bytes(WORK, layout.notice_key(first.job_id), b'{"published": true}')
    expire_work(storage, first.job_id)
    storage.put_bytes(WORK, layout.notice_key(first.job_id), b'{"published": true}')  # written last, not yet expired
    # WHEN the same manifest is uploaded again (the same job id: the same bytes)
    again = slicer.handle(MEDIA, key)
    # THEN it starts as run 1 under the next free name, with every segment in its plan
    name = execution_name(first.job_id, 1)
    assert again.status == "started" and again.job_id == first.job_id
    assert again.execution_arn == execution_arn(MACHINE, name) != first.execution_arn
    payload = orchestrator.executions[again.execution_arn]
    assert payload["job"]["run"] == 1
    assert payload["plan"]["key"] == layout.run_plan_key(first.job_id, 1)
    plan = get_json(storage, WORK, layout.plan_key(first.job_id))
    assert get_json(storage, WORK, layout.run_plan_key(first.job_id, 1)) == plan
    run = current_run(storage, WORK, first.job_id)
    assert run.run == 1 and run.segments == tuple(range(len(plan)))
    assert JobContext.model_validate(get_json(storage, WORK, layout.job_key(first.job_id))).run == 1
    # AND nothing the earlier job left behind is read by this run (its notice record would block this one's)
    assert not storage.list_keys(WORK, layout.notice_key(first.job_id))
    # AND the job reads as running on its new run
    states = JobRecords(storage, orchestrator, WORK, MACHINE)
    assert states.facts(first.job_id).state == "RUNNING"
    # AND a duplicate event of this upload finds run 1, starting nothing else
    duplicate = slicer.handle(MEDIA, key)
    assert duplicate.status == "duplicate" and duplicate.execution_arn == again.execution_arn
    assert len(orchestrator.executions) == 2


def test_an_upload_whose_job_id_ran_too_often_is_refused_with_a_notice(
    clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a job id whose every allowed run name is taken
    monkeypatch.setattr(slicing, "MAX_RUNS", 2)
    slicer, storage, orchestrator, notifier = farm()
    key = drop(storage, clip, None)
    first = slicer.handle(MEDIA, key)
    for run in range(2):
        arn = execution_arn(MACHINE, execution_name(first.job_id, run))
        orchestrator.executions.setdefault(arn, orchestrator.executions[first.execution_arn])
        ended(orchestrator, arn)
    expire_work(storage, first.job_id)
    # WHEN the manifest is uploaded again
    refused = slicer.handle(MEDIA, key)
    # THEN it is refused, saying why and what to do, the user is told, and the upload is left in place
    assert refused.status == "rejected" and "upload the manifest under another name" in refused.reason
    assert any(first.job_id in str(notice) for notice in notifier.published)
    assert storage.list_keys(MEDIA, key) == [key]


def test_a_retry_of_the_new_run_copies_the_new_runs_input_not_the_earlier_jobs(clip: Path) -> None:
    # GIVEN a job uploaded again after its record expired (run 1), whose run then failed
    slicer, storage, orchestrator, notifier = farm()
    key = drop(storage, clip, None)
    first = slicer.handle(MEDIA, key)
    ended(orchestrator, first.execution_arn)
    expire_work(storage, first.job_id)
    # (the same bytes again: the same job id, a later LastModified)
    storage.put_bytes(MEDIA, key, storage.get_bytes(MEDIA, key), "application/json")
    again = slicer.handle(MEDIA, key)
    ended(orchestrator, again.execution_arn, "FAILED")
    # WHEN it is retried
    Operations(storage, orchestrator, notifier, RESOURCES).retry(first.job_id)
    # THEN run 2 carries run 1's job (its own upload), not the expired job's first input
    retried = orchestrator.executions[execution_arn(MACHINE, execution_name(first.job_id, 2))]
    run0 = orchestrator.executions[first.execution_arn]["job"]
    run1 = orchestrator.executions[again.execution_arn]["job"]
    assert run1["submitted_at"] != run0["submitted_at"]
    assert retried["job"] == {**run1, "run": 2}
