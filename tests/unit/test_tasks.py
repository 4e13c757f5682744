"""What the worker loop reads of a task (fusionfleet.messages.Task) and the defaults of a role's handler."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from fusionfleet import layout
from fusionfleet.jobs.plan import Segment
from fusionfleet.messages import MergeTask, RenderTask, SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.facts import Names, Progress, Standing
from gpu_worker.delivery.tasks import MergeHandler, RenderHandler, TaskHandler
from gpu_worker.merging.merge import MergeDeps
from tests.support.fakes import FakeStorage
from tests.support.jobs import job_context
from tests.support.scripted import ScriptedRenderer as NeverRenders


def render_task(copy_number: int = 0) -> RenderTask:
    segment = Segment(3, 75, 100, 3_000_000, 4_000_000)
    job = job_context("clip-1", engine="classic")
    return RenderTask(task_token="t", job=job, segment=segment, copy_number=copy_number)


def test_a_render_task_sent_again_carries_its_counts_and_stays_readable_by_older_workers() -> None:
    # GIVEN a segment's task as the state machine sent it
    task = render_task()
    # THEN its body holds none of the fields added for backups and hand-backs
    assert not {"prior_attempts", "forgiven_attempts", "progress_frames"} & set(json.loads(task.wire_json()))
    # WHEN it is sent again with counts THEN the new message carries them, and the rest unchanged
    again = task.resent(prior_attempts=2, forgiven_attempts=2, progress_frames=40)
    body = json.loads(again.wire_json())
    assert (body["prior_attempts"], body["forgiven_attempts"], body["progress_frames"]) == (2, 2, 40)
    assert again.model_copy(update={"prior_attempts": 0, "forgiven_attempts": 0, "progress_frames": 0}) == task


def test_the_loop_names_a_render_task_by_its_segment_and_engine_and_a_merge_by_its_job() -> None:
    render = render_task(copy_number=1)
    assert (render.in_hand, render.engine, render.saves_progress, render.copy_number) == (
        "clip-1:3",
        "classic",
        True,
        1,
    )
    merge = MergeTask(task_token="m", job=job_context("clip-1"))
    assert (merge.in_hand, merge.engine, merge.saves_progress) == ("clip-1:merge", None, False)
    # A merge is never copied, handed back or renewed: no counts, and sending it again changes nothing.
    assert (merge.copy_number, merge.prior_attempts, merge.forgiven_attempts, merge.progress_frames) == (0, 0, 0, 0)
    assert merge.resent(2, 2, 40) == merge and json.loads(merge.wire_json())["task_token"] == "m"


class OnlyRequired(TaskHandler[RenderTask]):
    role = "render"

    def parse(self, body: str) -> RenderTask:
        return RenderTask.model_validate_json(body)

    def describe(self, task: RenderTask) -> Names:
        return Names(f"segment {task.segment.index}")

    def start(self, task: RenderTask, cancel: threading.Event, attempt: Attempt) -> Callable[[], SegmentResult]:
        return lambda: SegmentResult(index=task.segment.index, key="k", frames=25, engine_s=1.0)


def test_a_handler_that_writes_only_parse_describe_and_start_gets_the_quiet_defaults() -> None:
    handler, task = OnlyRequired(), render_task()
    assert handler.parse(task.wire_json()) == task
    # Never stopped, superseded or held; nothing saved, and every attempt counted as failed (none forgiven).
    assert handler.standing(task) == Standing()
    assert handler.standing(task, range(1, 3)) == Standing(progress=Progress(saved_frames=0, failed_attempts=2))
    assert handler.describe(task).cause("SegmentFailed", "the encoder fell over", 3) == (
        "segment 3: the encoder fell over"
    )


def test_a_render_task_fails_naming_its_frames_and_attempts(tmp_path: Path) -> None:
    handler = RenderHandler(NeverRenders(), FakeStorage(), "w", threading.Event())
    names = handler.describe(render_task())
    assert names.what == "segment 3 of clip-1"
    assert names.cause("SegmentFailed", "the encoder fell over", 3) == (
        "segment 3 (frames 75-99) of clip-1 failed after 3 attempts: SegmentFailed: the encoder fell over"
    )


def test_a_merge_fails_with_the_gates_reason_and_reads_the_cancel_marker(tmp_path: Path) -> None:
    storage = FakeStorage()
    handler, task = MergeHandler(MergeDeps(storage, tmp_path)), MergeTask(task_token="m", job=job_context("clip-1"))
    cause = handler.describe(task).cause("SegmentsMissing", "segment 2 failed", 3)
    assert cause == "merge of clip-1: segment 2 failed"
    assert not handler.standing(task).stopped
    # WHEN an operator cancels the job THEN the merge sees it
    storage.put_bytes(task.job.work_bucket, layout.cancel_key("clip-1"), b"{}", "application/json")
    assert handler.standing(task).stopped
