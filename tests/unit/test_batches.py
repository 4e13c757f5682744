"""A batch on in-memory storage and orchestrator: opened, its items started a window at a time, one summary.

The item starter here records each item as a job and marks its execution RUNNING (the media path is the
slicer's, tested on moto and LocalStack); the tests end items by setting their executions' status.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest

from fusionfleet import batch_layout, layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.errors import JobRejected, OperationRefused
from fusionfleet.fleet.fairness import batch_window
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.batch_views import batch_state, item_json, item_page
from fusionfleet.jobs.batches import BatchRecord, BatchTarget, expand_targets, output_stems, room
from fusionfleet.jobs.final_notice import TopicChannel
from fusionfleet.jobs.ids import item_id
from fusionfleet.jobs.manifest import parse_manifest
from fusionfleet.jobs.runs import execution_name
from fusionfleet.jobs.states import JobState
from fusionfleet.messages import BatchItem, ObjectRef
from fusionfleet.services.batch_operations import BatchOperations
from fusionfleet.services.batching import Batches, Limits
from fusionfleet.services.operations import Operations
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import MEDIA, WORK, job_context

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:render"
TOPIC = "arn:aws:sns:us-east-1:123456789012:notifications"


class Resources:
    work_bucket = WORK
    state_machine_arn = MACHINE
    topic_arn = TOPIC


class Farm:
    def __init__(self, rejects: frozenset[str] = frozenset()) -> None:
        self.storage, self.orchestrator, self.notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
        self.rejects = rejects
        self.started: list[str] = []
        self.retried: list[str] = []
        channels = (TopicChannel(self.notifier, TOPIC),)
        self.resumed: list[str] = []
        self.batches = Batches(
            self.storage, self.orchestrator, WORK, MACHINE, channels, self.start, self.retry, self.resume
        )
        self.ops = Operations(self.storage, self.orchestrator, self.notifier, Resources())

    def start(self, record: BatchRecord, target: BatchTarget) -> Literal["started", "rejected"]:
        job_id = record.item_id(target.index)
        if target.key in self.rejects:
            self.storage.put_json(WORK, layout.rejection_key(job_id), {"reason": f"{target.key} is not media"})
            return "rejected"
        batch = BatchItem(batch_id=record.batch_id, index=target.index)
        context = job_context(job_id, target=ObjectRef(bucket=MEDIA, key=target.key), batch=batch,
                              output=ObjectRef(bucket=MEDIA, key=f"{target.output_stem}.mp4"))  # fmt: skip
        self.storage.put_json(WORK, layout.job_key(job_id), context.model_dump(mode="json"))
        arn = self.orchestrator.start(MACHINE, job_id, {"job": context.model_dump(mode="json")})
        self.orchestrator.states[arn] = Execution(arn, "RUNNING", datetime.now(UTC), input={"job": {}})
        self.started.append(job_id)
        return "started"

    def resume(self, record: BatchRecord, job_id: str) -> bool:
        self.resumed.append(job_id)
        arn = self.orchestrator.start(MACHINE, execution_name(job_id, 0), {"job": {}})
        self.orchestrator.states[arn] = Execution(arn, "RUNNING", datetime.now(UTC), input={"job": {}})
        return True

    def retry(self, job_id: str) -> None:
        self.retried.append(job_id)
        self.ops.retry(job_id)
        arn = execution_arn(MACHINE, execution_name(job_id, 1))
        self.orchestrator.states[arn] = Execution(arn, "RUNNING", datetime.now(UTC))

    def end(self, job_id: str, status: str = "SUCCEEDED", run: int = 0) -> None:
        arn = execution_arn(MACHINE, execution_name(job_id, run))
        output = {"output": {"bucket": MEDIA, "key": f"outputs/{job_id}.mp4", "uri": f"s3://{MEDIA}/outputs/x"}}
        error = "JobFailed" if status == "FAILED" else None
        self.orchestrator.states[arn] = Execution(arn, status, datetime.now(UTC), datetime.now(UTC),
                                                  output=output if status == "SUCCEEDED" else None, error=error,
                                                  cause="segment 0 failed" if error else None)  # fmt: skip

    def running(self) -> list[str]:
        return [e.name for e in self.orchestrator.list_executions(MACHINE, "RUNNING")]

    def advance(self, batch_id: str, window: int = 2, ended: str = "", **limits: int) -> Any:
        return self.batches.advance(batch_id, Limits(window, **limits), self.running, ended)

    def open(self, targets: list[str], **fields: object) -> str:
        for key in targets:
            if not key.endswith("/"):
                self.storage.put_bytes(MEDIA, key, b"x")
        raw = json.dumps({"source": "inputs/face.jpg", "targets": targets, **fields}).encode()
        manifest = parse_manifest(raw, "jobs/summer.json")
        ref = ObjectRef(bucket=MEDIA, key="jobs/summer.json", etag="e")
        self.batches.open("summer-0123456789abcdef", manifest, ref, "2026-01-01T00:00:00+00:00")
        return "summer-0123456789abcdef"

    def summaries(self) -> list[dict[str, Any]]:
        return [message for _topic, _subject, message in self.notifier.published if message.get("stage") == "batch"]


def test_targets_expand_in_order_and_outputs_stay_apart() -> None:
    listed = {"inputs/clips/": ["inputs/clips/b.mp4", "inputs/clips/a.mp4", "inputs/clips/notes.txt"]}
    keys = expand_targets(["inputs/x/a.jpg", "inputs/clips/", "inputs/clips/a.mp4"], listed)
    assert keys == ["inputs/x/a.jpg", "inputs/clips/a.mp4", "inputs/clips/b.mp4"]
    assert output_stems(keys, "outputs/b/") == ["outputs/b/a", "outputs/b/a-0001", "outputs/b/b"]


def test_room_keeps_a_place_free_for_others_in_every_limit() -> None:
    assert room(12, 3, []).items == 9
    # A tenant limit of 8 with 5 of its jobs running (3 of them this batch's): 2 more, one place kept free.
    assert room(12, 3, [(8, 5, "tenant acme")]).items == 2 and "tenant acme" in room(12, 3, [(8, 5, "tenant acme")]).why
    assert room(12, 3, [(0, 100, "stack")]).items == 9
    assert room(4, 0, [(1, 0, "tenant solo")]).items == 1  # a limit of one: no place to keep


def test_a_batch_is_opened_once_with_every_target_and_its_prefixs_media() -> None:
    farm = Farm()
    farm.storage.put_bytes(MEDIA, "inputs/clips/b.mp4", b"x")
    farm.storage.put_bytes(MEDIA, "inputs/clips/readme.txt", b"x")
    batch = farm.open(["inputs/a.jpg", "inputs/clips/"])
    record = BatchRecord.model_validate(farm.storage.json(WORK, batch_layout.batch_key(batch)))
    assert [(t.key, t.output_stem) for t in record.targets] == [
        ("inputs/a.jpg", "outputs/summer/a"), ("inputs/clips/b.mp4", "outputs/summer/b")
    ]  # fmt: skip
    assert record.item_manifest(record.targets[1]).target == "inputs/clips/b.mp4"
    assert farm.storage.exists(WORK, batch_layout.open_batch_key(batch))


def test_missing_targets_and_empty_prefixes_are_named_together() -> None:
    farm = Farm()
    raw = json.dumps({"source": "inputs/face.jpg", "targets": ["inputs/gone.jpg", "inputs/empty/"]}).encode()
    with pytest.raises(JobRejected) as refused:
        farm.batches.open("b-1", parse_manifest(raw, "jobs/b.json"), ObjectRef(bucket=MEDIA, key="jobs/b.json"), "")
    assert refused.value.problems == (
        "targets[0]: s3://media/inputs/gone.jpg does not exist",
        "targets[1]: no images or videos under s3://media/inputs/empty/",
    )


def test_items_start_a_window_at_a_time_and_one_summary_ends_the_batch() -> None:
    # GIVEN a batch of five targets and a window of two
    farm = Farm()
    batch = farm.open([f"inputs/{i}.jpg" for i in range(5)])
    # WHEN it is advanced
    first = farm.advance(batch)
    # THEN two items started, three wait for room
    assert first.started == (0, 1) and first.waiting == 3 and "window of 2 items" in first.why_waiting
    assert farm.advance(batch).started == ()  # a duplicate event starts nothing more
    # WHEN each item ends, its tell advances the batch: the next one starts
    for index in range(5):
        farm.end(f"{batch}.{index:04d}")
        farm.advance(batch, ended=f"{batch}.{index:04d}")
    assert farm.started == [f"{batch}.{i:04d}" for i in range(5)]
    # THEN exactly one summary went out, listing every item's result, and the batch is closed
    (summary,) = farm.summaries()
    assert summary["status"] == "succeeded" and summary["job_id"] == batch and summary["items"]["succeeded"] == 5
    assert [r["state"] for r in summary["results"]] == ["SUCCEEDED"] * 5 and summary["tenant"] == "-"
    assert not farm.storage.exists(WORK, batch_layout.open_batch_key(batch))
    farm.advance(batch)  # a late tick
    assert len(farm.summaries()) == 1
    # AND the items published nothing of their own
    assert all(message.get("stage") == "batch" for _t, _s, message in farm.notifier.published)


def test_a_rejected_item_takes_no_room_and_the_summary_names_it() -> None:
    farm = Farm(rejects=frozenset({"inputs/1.jpg"}))
    batch = farm.open([f"inputs/{i}.jpg" for i in range(3)])
    advanced = farm.advance(batch)
    assert advanced.started == (0, 2) and advanced.rejected == (1,)
    for index in (0, 2):
        farm.end(f"{batch}.{index:04d}", "FAILED" if index == 2 else "SUCCEEDED")
        farm.advance(batch, ended=f"{batch}.{index:04d}")
    (summary,) = farm.summaries()
    assert summary["status"] == "failed" and summary["items"] == {"total": 3, "succeeded": 1, "unsuccessful": 2}
    assert "2 of 3 items did not succeed" in summary["reason"] and "inputs/1.jpg is not media" in summary["reason"]


def test_a_stack_and_a_tenants_limits_hold_items_back_without_refusing_them() -> None:
    farm = Farm()
    batch = farm.open([f"inputs/{i}.jpg" for i in range(4)])
    for name in ("other-a", "other-b"):
        arn = execution_arn(MACHINE, name)
        farm.orchestrator.states[arn] = Execution(arn, "RUNNING")
    advanced = farm.advance(batch, window=4, stack_jobs=4)
    # 4 jobs at once, 2 running: one more, one place kept free for a job of its own
    assert advanced.started == (0,) and "the stack runs 2 of its 4 jobs" in advanced.why_waiting
    assert not farm.summaries()


def test_a_claim_left_by_a_slicer_that_died_is_taken_over() -> None:
    farm = Farm()
    batch = farm.open(["inputs/0.jpg"])
    old = (datetime.now(UTC) - timedelta(minutes=10)).isoformat()
    farm.storage.put_json(WORK, batch_layout.batch_item_claim_key(batch, 0), {"claimed_at": old})
    assert farm.advance(batch).started == (0,)


def test_a_batch_whose_slicer_died_before_listing_it_is_listed_by_its_redelivered_event() -> None:
    # GIVEN a batch whose record was written by a slicer that died before the open-batch index (found by the
    # simulation's liveness check: no tick ever moved such a batch on, and an item waited for ever)
    farm = Farm()
    batch = farm.open(["inputs/0.jpg", "inputs/1.jpg"])
    farm.storage.delete_prefix(WORK, batch_layout.open_batch_key(batch))
    # WHEN its event is redelivered, THEN it is listed for the ticks again
    farm.open(["inputs/0.jpg", "inputs/1.jpg"])
    assert farm.storage.exists(WORK, batch_layout.open_batch_key(batch))
    # AND once its summary is sent, a late duplicate event lists it no more, and a stray tick unlists it
    farm.advance(batch)
    for job_id in list(farm.started):
        farm.end(job_id)
    farm.advance(batch)
    assert len(farm.summaries()) == 1 and not farm.storage.exists(WORK, batch_layout.open_batch_key(batch))
    farm.open(["inputs/0.jpg", "inputs/1.jpg"])
    assert not farm.storage.exists(WORK, batch_layout.open_batch_key(batch))
    farm.batches.reopen(batch)
    farm.advance(batch)
    assert len(farm.summaries()) == 1 and not farm.storage.exists(WORK, batch_layout.open_batch_key(batch))


def test_an_item_recorded_by_a_slicer_that_died_before_starting_it_is_resumed() -> None:
    # GIVEN an item whose job record was written by a slicer that died before it queued or started it
    farm = Farm()
    batch = farm.open(["inputs/0.jpg"])
    job_id = item_id(batch, 0)
    context = job_context(job_id, target=ObjectRef(bucket=MEDIA, key="inputs/0.jpg"),
                          batch=BatchItem(batch_id=batch, index=0))  # fmt: skip
    farm.storage.put_json(WORK, layout.job_key(job_id), context.model_dump(mode="json"))
    fresh = datetime.now(UTC).isoformat()
    farm.storage.put_json(WORK, batch_layout.batch_item_claim_key(batch, 0), {"claimed_at": fresh})
    # WHEN the watchdog's tick finds it while its claim is fresh (its slicer may still be at work)
    farm.advance(batch)
    # THEN it is left alone; once the claim is stale, the next tick resumes it (before: PENDING for ever)
    assert farm.resumed == []
    old = (datetime.now(UTC) - timedelta(minutes=10)).isoformat()
    farm.storage.put_json(WORK, batch_layout.batch_item_claim_key(batch, 0), {"claimed_at": old})
    farm.advance(batch)
    assert farm.resumed == [job_id] and farm.started == []
    # AND once its execution runs, a later tick leaves it be
    farm.advance(batch)
    assert farm.resumed == [job_id]


def test_a_batch_cancel_stops_its_items_quietly_and_sends_one_cancelled_summary() -> None:
    farm = Farm()
    batch = farm.open([f"inputs/{i}.jpg" for i in range(4)])
    farm.advance(batch)
    farm.end(f"{batch}.0000")
    farm.advance(batch, ended=f"{batch}.0000")  # item 2 starts
    # WHEN the batch is cancelled
    message = BatchOperations(farm.ops).cancel(batch)
    # THEN its running items were stopped, the rest never start, and one summary says so
    assert "2 running items cancelled, 1 not started" in message
    (summary,) = farm.summaries()
    assert summary["status"] == "cancelled" and summary["items"]["succeeded"] == 1
    assert [r["state"] for r in summary["results"]] == ["SUCCEEDED", "CANCELLED", "CANCELLED", "NOT_STARTED"]
    assert [m for _t, _s, m in farm.notifier.published if m.get("stage") != "batch"] == []
    farm.advance(batch)
    assert len(farm.started) == 3 and len(farm.summaries()) == 1
    with pytest.raises(OperationRefused, match="is CANCELLED"):
        BatchOperations(farm.ops).cancel(batch)


def test_a_batch_retry_runs_its_unsuccessful_items_again_and_sends_a_new_summary() -> None:
    farm = Farm()
    batch = farm.open([f"inputs/{i}.jpg" for i in range(3)])
    farm.advance(batch, window=3)
    for index, status in enumerate(("SUCCEEDED", "FAILED", "SUCCEEDED")):
        farm.end(f"{batch}.{index:04d}", status)
        farm.advance(batch, window=3, ended=f"{batch}.{index:04d}")
    assert [s["status"] for s in farm.summaries()] == ["failed"]
    # WHEN the batch is retried and the watchdog's tick advances it
    BatchOperations(farm.ops).retry(batch)
    assert farm.storage.exists(WORK, batch_layout.open_batch_key(batch))
    advanced = farm.advance(batch, window=3)
    # THEN only the failed item ran again, as its job's next run
    assert advanced.retried == (1,) and farm.retried == [f"{batch}.0001"]
    farm.end(f"{batch}.0001", "SUCCEEDED", run=1)
    farm.advance(batch, window=3, ended=f"{batch}.0001")
    assert [s["status"] for s in farm.summaries()] == ["failed", "succeeded"]


def test_a_batchs_state_follows_its_items() -> None:
    ok, bad = JobState.SUCCEEDED, JobState.REJECTED
    assert batch_state([None, None], cancelled=False) is JobState.PENDING
    assert batch_state([ok, None], cancelled=False) is JobState.RUNNING
    assert batch_state([ok, JobState.RUNNING], cancelled=True) is JobState.RUNNING
    assert batch_state([ok, None], cancelled=True) is JobState.CANCELLED
    assert batch_state([ok, ok], cancelled=False) is JobState.SUCCEEDED
    assert batch_state([ok, bad], cancelled=False) is JobState.FAILED


def test_a_500_item_batch_runs_a_window_at_a_time_at_its_own_priority_and_leaves_room_for_another_job() -> None:
    # GIVEN a 500-item batch at normal priority, on a fleet of 6 workers and a stack of at most 150 jobs
    farm = Farm()
    batch = farm.open([f"inputs/{i:03d}.jpg" for i in range(500)], priority="normal")
    window = batch_window(6)
    # WHEN it is advanced, and the watchdog ticks it again and again
    first = farm.advance(batch, window=window, stack_jobs=150)
    for _tick in range(3):
        assert farm.advance(batch, window=window, stack_jobs=150).started == ()
    # THEN only its window runs (two rounds of the fleet: 12 items), never the 500
    assert window == 12 and first.started == tuple(range(12)) and first.waiting == 488
    assert len(farm.running()) == 12
    # AND each item is a job at the batch's priority: its segments go to the normal render queue, which a
    # worker reads only when the high queue is empty (tests/integration/test_worker_loop.py)
    record = BatchRecord.model_validate(farm.storage.json(WORK, batch_layout.batch_key(batch)))
    assert {record.item_manifest(target).priority for target in record.targets} == {"normal"}
    # AND an item's end starts one more: the batch's share of the fleet stays its window
    farm.end(f"{batch}.0000")
    assert farm.advance(batch, window=window, stack_jobs=150, ended=f"{batch}.0000").started == (12,)
    # AND on a stack that is nearly full the batch leaves one job's place free for somebody else's job
    for name in (f"other-{n}" for n in range(138)):
        arn = execution_arn(MACHINE, name)
        farm.orchestrator.states[arn] = Execution(arn, "RUNNING")
    farm.end(f"{batch}.0001")
    held = farm.advance(batch, window=window, stack_jobs=150, ended=f"{batch}.0001")
    assert held.started == () and "the stack runs 149 of its 150 jobs" in held.why_waiting
    assert len(farm.running()) == 149  # 138 others and 11 items: the 150th place is left for a new job


def test_a_batchs_items_are_shown_a_page_at_a_time_each_with_its_state_progress_and_output() -> None:
    # GIVEN a batch of five whose first item succeeded and second failed
    farm = Farm()
    batch = farm.open([f"inputs/{i}.jpg" for i in range(5)])
    farm.advance(batch, window=2)
    farm.end(f"{batch}.0000")
    farm.end(f"{batch}.0001", "FAILED")
    # WHEN its detail is read for the page of items 0 and 1
    detail = BatchReader(farm.batches.reader.reader).detail(batch, page=range(0, 2))
    page, more = item_page(detail.items, 0, 2)
    # THEN the page has those two, each with its target, state and output or reason, and the next page's start
    assert more == 2 and item_page(detail.items, 4, 2) == (detail.items[4:], None)
    shown = [item_json(item) for item in page]
    assert [(s["index"], s["target"], s["state"]) for s in shown] == [
        (0, "inputs/0.jpg", "SUCCEEDED"), (1, "inputs/1.jpg", "FAILED")
    ]  # fmt: skip
    assert shown[0]["output"] == f"s3://{MEDIA}/outputs/summer/0.mp4" and shown[0]["ended"] and "reason" not in shown[0]
    assert shown[1]["output"] is None and "segment 0 failed" in shown[1]["reason"]
    # AND an item not started yet is PENDING, with nothing made
    assert item_json(detail.items[3]) == {
        "index": 3, "job_id": f"{batch}.0003", "target": "inputs/3.jpg", "state": "PENDING",
        "segments": {"done": 0, "failed": 0, "total": 0}, "output": None, "ended": False,
    }  # fmt: skip
