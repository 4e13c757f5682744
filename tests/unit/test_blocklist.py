"""The per-job worker blocklist: when a worker leaves a job, how it hands the job's segments back without
spending their attempts, and how a job whose every live worker left it fails instead of waiting forever."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from fusionfleet import layout
from fusionfleet.fleet.blocklist import BlockPolicy, nobody_left
from fusionfleet.messages import RenderTask, SegmentResult, WorkerBeat
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.blocklist import Blocklist
from gpu_worker.delivery.tasks import RenderHandler
from gpu_worker.errors import Blocked, WorkersBlocklisted
from tests.support.fakes import Clock, FakeStorage
from tests.support.jobs import WORK, halves, job_context

JOB = job_context()


def test_a_worker_leaves_a_job_after_n_failures_and_never_with_zero() -> None:
    assert not BlockPolicy(2).blocks(1) and BlockPolicy(2).blocks(2) and BlockPolicy(2).blocks(3)
    assert not BlockPolicy(0).blocks(100)


def test_nobody_is_left_only_when_every_live_worker_is_listed() -> None:
    assert nobody_left(["w1"], ["w1"])
    assert nobody_left(["w1", "w2"], ["w1", "w2", "gone"])
    assert not nobody_left(["w1", "w2"], ["w1"])
    assert not nobody_left([], ["w1"])  # no presence records: nothing to judge by


def alive(storage: FakeStorage, *names: str) -> None:
    for name in names:
        beat = WorkerBeat(name=name, role="render", last_beat=time.time())
        storage.put_bytes(WORK, layout.worker_key(name), beat.model_dump_json().encode())


def test_the_second_failed_segment_puts_the_worker_on_the_jobs_list() -> None:
    storage = FakeStorage()
    mine = Blocklist(storage, "w1", BlockPolicy(2))
    # WHEN w1 fails one segment of the job, then another
    assert not mine.note_failure(JOB, 0, "EngineCrashed", "boom") and not mine.blocked(JOB)
    assert mine.note_failure(JOB, 1, "EngineCrashed", "boom again")
    # THEN it is listed in the job's blocklist record, and a restarted w1 reads that
    record = storage.json(WORK, layout.blocked_worker_key(JOB.job_id, "w1"))
    assert record["failures"] == 2 and record["last_error"] == "EngineCrashed"
    assert Blocklist(storage, "w1", BlockPolicy(2)).blocked(JOB)
    assert not Blocklist(storage, "w2", BlockPolicy(2)).blocked(JOB)
    assert not mine.blocked(job_context("another-job"))


def test_one_segment_failing_again_and_again_on_a_worker_does_not_list_it() -> None:
    # GIVEN w1 failed a poison segment, which fails wherever it goes
    storage = FakeStorage()
    mine = Blocklist(storage, "w1", BlockPolicy(2))
    # WHEN it fails that segment again, attempt after attempt
    for _ in range(3):
        assert not mine.note_failure(JOB, 4, "EngineCrashed", "the engine process died")
    # THEN it is not listed: the segment, not the host, is the likely fault, and its last attempt need
    # not wait at the back of a queue for another worker (the soak at c228519: 222 s)
    assert not mine.blocked(JOB)


def test_failures_of_the_network_or_aws_do_not_count_against_the_worker() -> None:
    # GIVEN w1 failed a poison segment once
    storage = FakeStorage()
    mine = Blocklist(storage, "w1", BlockPolicy(2))
    assert not mine.note_failure(JOB, 0, "EngineCrashed", "the engine process died")
    # WHEN its failures at other segments were the network's or AWS's (or the list's own verdict)
    for index, error in enumerate(
        ("ConnectionResetError", "EndpointConnectionError", "ClientError", "WorkersBlocklisted")
    ):
        assert not mine.note_failure(JOB, index + 1, error, "not this host's doing")
    # THEN it is not listed (the soak's: a poison crash plus a LocalStack reset listed a healthy worker)
    assert not mine.blocked(JOB)
    # AND a failure of its own rendering at a second segment lists it, whatever the engine's error is called
    assert mine.note_failure(JOB, 1, "EngineHung", "no progress for 60 s")


class Renders:
    def render(
        self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> Callable[[], SegmentResult]:
        return lambda: SegmentResult(index=task.segment.index, key="k", frames=50, engine_s=0.1)

    def close(self) -> None:
        return None


def listed_worker(storage: FakeStorage, clock: Clock | None = None) -> RenderHandler:
    blocklist = Blocklist(storage, "w1", BlockPolicy(2, stranded_grace_s=60), clock=clock or Clock())
    for index in range(2):
        blocklist.note_failure(JOB, index, "EngineCrashed", "boom")
    return RenderHandler(Renders(), storage, "w1", threading.Event(), blocklist)


def test_a_listed_worker_hands_the_jobs_segment_back_while_another_worker_is_alive() -> None:
    storage = FakeStorage()
    alive(storage, "w1", "w2")
    task = RenderTask(task_token="t", job=JOB, segment=halves()[0])
    with pytest.raises(Blocked, match="w1 is blocklisted"):
        listed_worker(storage).execute(task, threading.Event(), Attempt(number=3))
    # (no attempt was recorded: the hand-back is not an attempt)
    assert storage.list_keys(WORK, layout.attempts_prefix(JOB.job_id, 0)) == []


def test_a_job_whose_every_live_worker_stays_listed_for_the_grace_fails_its_segment_naming_them() -> None:
    # GIVEN w1, listed for the job, is the only live render worker
    storage, clock = FakeStorage(), Clock()
    alive(storage, "w1")
    worker = listed_worker(storage, clock)
    task = RenderTask(task_token="t", job=JOB, segment=halves()[0])
    # WHEN it meets the job's segment, and again until just short of the grace (60 s)
    for step in (0, 30, 29):
        clock.advance(step)
        # THEN it hands the segment back: another worker may be only restarting
        with pytest.raises(Blocked, match="w1 is blocklisted"):
            worker.execute(task, threading.Event(), Attempt(number=1))
    # AND once every live worker has been listed for the whole grace, the segment fails, naming them
    clock.advance(1)
    with pytest.raises(WorkersBlocklisted, match=r"every live render worker \(w1\).*all of them for 60 s") as failed:
        worker.execute(task, threading.Event(), Attempt(number=1))
    # AND the failure names what put the worker on the list, the cause a user needs (the soak's
    # poison job was otherwise told only that an innocent segment found no worker)
    assert "w1's last failure: EngineCrashed: boom" in str(failed.value)


def test_a_worker_seen_alive_and_unlisted_within_the_grace_starts_it_again() -> None:
    # GIVEN w1 is listed for the job and alone for 50 s (w2 was restarting: a clean stop deletes its presence)
    storage, clock = FakeStorage(), Clock()
    alive(storage, "w1")
    worker = listed_worker(storage, clock)
    task = RenderTask(task_token="t", job=JOB, segment=halves()[0])
    with pytest.raises(Blocked):
        worker.execute(task, threading.Event(), Attempt(number=1))
    clock.advance(50)
    # WHEN w2 is back, unlisted, the segment goes on being handed back
    alive(storage, "w2")
    with pytest.raises(Blocked):
        worker.execute(task, threading.Event(), Attempt(number=1))
    # AND when w2 is gone again, the grace starts over: 50 s later the job is still not failed
    storage.delete_prefix(WORK, layout.worker_key("w2"))
    for step in (10, 50):
        clock.advance(step)
        with pytest.raises(Blocked):
            worker.execute(task, threading.Event(), Attempt(number=1))
    # THEN only a whole grace alone fails it
    clock.advance(10)
    with pytest.raises(WorkersBlocklisted):
        worker.execute(task, threading.Event(), Attempt(number=1))
