"""Straggler backup copies end to end in memory: the watchdog's sender reads the segment files and sends
one copy with the same token; a worker answers a copy of a committed segment without rendering, and the
original's worker releases a copy meant for another."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from fusionfleet import layout
from fusionfleet.fleet.stragglers import BackupPolicy
from fusionfleet.jobs.runs import RunRecord
from fusionfleet.messages import RenderTask, SegmentHold, SegmentRecord, SegmentResult
from fusionfleet.services.backups import BackupSender
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.tasks import RenderHandler
from gpu_worker.errors import GivenBack
from tests.support.fakes import FakeQueue, FakeStorage
from tests.support.jobs import WORK, halves, job_context

JOB = job_context()
QUEUES = {"high": "q-high", "normal": "q-normal", "low": "q-low"}
POLICY = BackupPolicy(factor=2.0, min_age_s=5.0)
NOW = 10_000.0


def segment_done(storage: FakeStorage, index: int, total_s: float) -> None:
    record = SegmentRecord(job_id=JOB.job_id, index=index, status="succeeded", frames=50, total_s=total_s)
    storage.create(WORK, layout.segment_winner_key(JOB.job_id, index, 0), record.model_dump_json().encode())


def segment_running(storage: FakeStorage, index: int, since: float, worker: str = "w1") -> None:
    hold = SegmentHold(task_token=f"token-{index}", worker=worker, attempt=1, started_at=since)
    storage.put_bytes(WORK, layout.segment_task_key(JOB.job_id, index, 0), hold.model_dump_json().encode())


@pytest.fixture
def setup() -> tuple[FakeStorage, FakeQueue, BackupSender]:
    storage, queue = FakeStorage(), FakeQueue()
    for url in QUEUES.values():
        queue.create(url)
    storage.put_json(WORK, layout.job_key(JOB.job_id), JOB.model_dump(mode="json"))
    storage.put_json(WORK, layout.plan_key(JOB.job_id), [segment.to_dict() for segment in halves()])
    return storage, queue, BackupSender(storage, queue, WORK, QUEUES, POLICY)


def test_a_straggler_gets_one_backup_copy_with_its_token_avoiding_its_worker(
    setup: tuple[FakeStorage, FakeQueue, BackupSender],
) -> None:
    storage, queue, sender = setup
    # GIVEN segment 0 done in 4 s and segment 1 running on w1 for 9 s (threshold: max(5, 2 × 4) = 8 s)
    segment_done(storage, 0, 4.0)
    segment_running(storage, 1, NOW - 9.0)
    # WHEN the watchdog sweeps
    sent = sender.sweep(JOB, RunRecord(0), NOW)
    # THEN one copy of segment 1 went to the job's priority queue, same token, naming the worker to avoid
    assert [(item.index, item.avoid_worker, item.threshold_s) for item in sent] == [(1, "w1", 8.0)]
    (message,) = queue.receive("q-normal", wait_s=0, visibility_s=30)
    task = RenderTask.model_validate_json(message.body)
    assert "prior_attempts" not in message.body  # (a field it does not need is left out for older workers)
    assert (task.task_token, task.copy_number, task.avoid_worker, task.segment) == ("token-1", 1, "w1", halves()[1])
    assert task.job == JOB
    # AND a later sweep sends no second one
    assert sender.sweep(JOB, RunRecord(0), NOW + 60) == []
    assert queue.depth("q-normal").total == 1


def test_no_copy_while_the_segment_is_young_or_the_job_far_from_done(
    setup: tuple[FakeStorage, FakeQueue, BackupSender],
) -> None:
    storage, queue, sender = setup
    segment_running(storage, 0, NOW - 100.0)
    segment_running(storage, 1, NOW - 7.0)
    # GIVEN nothing done yet: no median, not near the end
    assert sender.sweep(JOB, RunRecord(0), NOW) == []
    # GIVEN segment 0 done in 4 s: segment 1 at 7 s is under its 8 s threshold
    segment_done(storage, 0, 4.0)
    assert sender.sweep(JOB, RunRecord(0), NOW) == []
    assert queue.depth("q-normal").total == 0


class NeverRenders:
    def render(
        self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> Callable[[], SegmentResult]:
        raise AssertionError("nothing should be rendered")

    def close(self) -> None:
        return None


def backup_task(avoid: str = "w1") -> RenderTask:
    return RenderTask(task_token="token-1", job=JOB, segment=halves()[1], copy_number=1, avoid_worker=avoid)


def test_the_original_worker_releases_a_backup_copy_meant_for_another_once() -> None:
    handler = RenderHandler(NeverRenders(), FakeStorage(), "w1", threading.Event())
    with pytest.raises(GivenBack, match="backup copy 1 is for another worker"):
        handler.execute(backup_task(), threading.Event(), Attempt(number=1))


def test_a_copy_of_a_committed_segment_is_answered_with_the_winner_unrendered() -> None:
    # GIVEN segment 1 already committed by copy 0 on w1
    storage = FakeStorage()
    won = SegmentRecord(
        job_id=JOB.job_id, index=1, status="succeeded", frames=50, key=layout.segment_key(JOB.job_id, 1), worker="w1"
    )
    storage.create(WORK, layout.segment_winner_key(JOB.job_id, 1, 0), won.model_dump_json().encode())
    handler = RenderHandler(NeverRenders(), storage, "w2", threading.Event())
    # WHEN the backup copy arrives at w2
    result = handler.execute(backup_task(), threading.Event(), Attempt(number=1))
    # THEN it answers with the winner's output, and its attempt record says it was superseded by copy 0
    assert (result.key, result.copy_number) == (won.key, 0)
    attempt = storage.json(WORK, layout.attempt_record_key(JOB.job_id, 1, 0, 1, copy=1))
    assert attempt["status"] == "superseded" and "copy 0 on w1" in attempt["reason"]
    assert handler.standing(backup_task()).superseded is not None
    assert handler.standing(RenderTask(task_token="t", job=JOB, segment=halves()[1])).superseded is None
