"""What a worker does with a message, by role: parse it, execute it, record a failed attempt."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.facefusion.content_analysis import ContentVerdict
from fusionfleet.jobs.failures import segment_label
from fusionfleet.jobs.loss import JobFailedMarker, is_job_failed, job_failed, mark_job_failed
from fusionfleet.jobs.runs import is_cancelled
from fusionfleet.jobs.states import Recorded
from fusionfleet.messages import (
    MergeResult,
    MergeTask,
    RenderTask,
    SegmentAttempt,
    SegmentHold,
    SegmentRecord,
    SegmentResult,
    Task,
)
from fusionfleet.webhooks.events import EventKind, WebhookEvent, event_id
from fusionfleet.webhooks.outbox import WebhookOutbox
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.accounting import Billing
from gpu_worker.delivery.blocklist import Blocklist
from gpu_worker.delivery.facts import Alive, Failure, JobLost, Names, Next, Note, Progress, Standing
from gpu_worker.delivery.retry import describe
from gpu_worker.errors import Blocked, Cancelled, GivenBack, WorkersBlocklisted
from gpu_worker.merging.merge import MergeDeps, merge_job
from gpu_worker.merging.merge_stills import merge_stills
from gpu_worker.rendering.checkpoints import Checkpoints
from gpu_worker.rendering.commit import commit, result_of, winner
from gpu_worker.rendering.render import record_failure

logger = logging.getLogger(__name__)


class Renderer(Protocol):
    """Renders one segment: in a supervised child process (EngineHost) or inline (InlineRenderer).

    `render` returns once the engine is done with the segment's frames; the step it returns joins,
    checks, uploads and commits them, and needs no engine.
    """

    def render(
        self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> Callable[[], SegmentResult]: ...

    def close(self) -> None: ...


@runtime_checkable
class PreparesNext(Protocol):
    """A renderer that can prepare the segment it renders next while it renders this one."""

    def expect(self, task: RenderTask) -> None:
        """`task` is this worker's next (taken early): prepare for it while the current one renders."""
        ...


Output = SegmentResult | MergeResult | ContentVerdict


TaskT = TypeVar("TaskT", bound=Task)  # the task type of one role (RenderTask, MergeTask)


class TaskHandler(ABC, Generic[TaskT]):
    """What a worker does with its role's tasks, in six hooks: parse, describe and start them (required); what
    their job and records say of them now (`standing`); what happened to them, for its records (`note`); and
    `close`. How a message ends is decided from these (gpu_worker.delivery.outcomes), never here.

    The defaults fit a task that keeps no checkpoints and no attempt records, is never cancelled or
    superseded, and whose failure needs no record beyond its token's.
    """

    role: str

    @abstractmethod
    def parse(self, body: str) -> TaskT: ...

    @abstractmethod
    def describe(self, task: TaskT) -> Names: ...

    @abstractmethod
    def start(self, task: TaskT, cancel: threading.Event, attempt: Attempt) -> Callable[[], Output]:
        """Do the part that needs the engine; the step returned does the rest (see Renderer)."""

    def standing(self, task: TaskT, progress_of: range | None = None) -> Standing:
        """What its job and records say of the task now; with `progress_of` (attempt numbers), its progress too."""
        return Standing(progress=no_progress(progress_of))

    def note(self, task: TaskT, event: Note) -> None:
        """Something happened to the task: keep it in the role's records, or prepare for it."""
        return None

    def close(self) -> None:
        return None


def no_progress(attempts: range | None) -> Progress | None:
    """A task that keeps no checkpoints and no attempt records: nothing saved, and every attempt counted as
    failed, so none is forgiven."""
    return None if attempts is None else Progress(0, len(attempts))


class RenderHandler(TaskHandler[RenderTask]):
    role = "render"

    def __init__(
        self,
        renderer: Renderer,
        storage: Storage,
        worker: str,
        stopping: threading.Event,
        blocklist: Blocklist | None = None,
        billing: Billing | None = None,
        events: WebhookOutbox | None = None,
    ) -> None:
        self._renderer = renderer
        self._storage = storage
        self._worker = worker
        self._stopping = stopping
        self._blocklist = blocklist  # None: this worker never leaves a job (no presence records to judge by)
        self._billing = billing  # None: attempts carry no price and bill nobody (tests, `fusionfleet swap`)
        self._events = events  # None: no webhook events from this worker
        # The attempt each task in hand is making (by `in_hand` and copy), refreshed while it runs.
        self._running: dict[tuple[str, int], tuple[str, SegmentAttempt]] = {}
        self._running_lock = threading.Lock()

    def parse(self, body: str) -> RenderTask:
        return RenderTask.model_validate_json(body)

    def describe(self, task: RenderTask) -> Names:
        job, segment = task.job, task.segment
        label = segment_label(segment.index, segment.start_frame, segment.end_frame)
        return Names(f"segment {segment.index} of {job.job_id}", failed_as=f"{label} of {job.job_id}")

    def standing(self, task: RenderTask, progress_of: range | None = None) -> Standing:
        """Its job stopped (and what its token is told then), or its other copy committed, or its tenant's budget
        holds it; its checkpoints and attempt records when asked for."""
        progress = None
        if progress_of is not None:
            progress = Progress(self._saved_frames(task), self._failed_attempts(task, progress_of))
        if self._stopped(task):
            return Standing(stopped=True, token_cause=self._token_cause(task), progress=progress)
        return Standing(superseded=self._superseded(task), held=self._held(task), progress=progress)

    def note(self, task: RenderTask, event: Note) -> None:
        match event:
            case Next():
                if isinstance(self._renderer, PreparesNext):
                    self._renderer.expect(task)
            case Alive():
                self._alive(task)
            case Failure(error, reason, attempt):
                record_failure(self._storage, task, error, reason, attempt, self._worker)
                if self._blocklist is not None:
                    self._blocklist.note_failure(task.job, task.segment.index, error, reason)
            case JobLost(error, cause, attempts):
                self._job_lost(task, error, cause, attempts)

    def execute(self, task: RenderTask, cancel: threading.Event, attempt: Attempt) -> SegmentResult:
        """Render and finish, with a record of the attempt at its start and at its end (`fusionfleet logs`)."""
        return self.start(task, cancel, attempt)()

    def start(self, task: RenderTask, cancel: threading.Event, attempt: Attempt) -> Callable[[], SegmentResult]:
        """Render the frames now; the step returned finishes the segment and records how the attempt ended."""
        job, index = task.job, task.segment.index
        if task.avoid_worker == self._worker and attempt.number < 2:
            # A backup copy of this worker's own straggler: another worker should render it. Only
            # once, so the release alone can never walk the message into the dead-letter queue.
            raise GivenBack(f"segment {index} of {job.job_id}: backup copy {task.copy_number} is for another worker")
        began = SegmentAttempt(
            job_id=job.job_id, index=index, run=job.run, attempt=attempt.number, worker=self._worker,
            status=Recorded.RUNNING, started_at=round(time.time(), 3), queued_s=attempt.queued_s,
            copy_number=task.copy_number,
        )  # fmt: skip
        if self._billing is not None:
            began = self._billing.stamp(began)
        earlier = winner(self._storage, job.work_bucket, job.job_id, index, job.run)
        if earlier is not None:
            # Committed already (by the other copy, or by this copy before a lost delete): answer with it.
            self._record_attempt(job.work_bucket, began, status=Recorded.SUPERSEDED, reason=_won_by(earlier))
            answer = result_of(commit(self._storage, job.work_bucket, job.run, earlier))
            return lambda: answer
        self._check_blocklist(task)
        self._record_attempt(job.work_bucket, began)
        with self._running_lock:
            self._running[(task.in_hand, task.copy_number)] = (job.work_bucket, began)
        if task.copy_number == 0:
            self._record_hold(task, began)
        with self._recording(task, began, cancel):
            finish = self._renderer.render(task, attempt, cancel, self._stopping)
        return lambda: self._finish(task, began, cancel, finish)

    def _finish(
        self, task: RenderTask, began: SegmentAttempt, cancel: threading.Event, finish: Callable[[], SegmentResult]
    ) -> SegmentResult:
        with self._recording(task, began, cancel):
            result = finish()
        if result.copy_number != task.copy_number:
            reason = f"copy {result.copy_number} committed first"
            self._record_attempt(task.job.work_bucket, began, status=Recorded.SUPERSEDED, reason=reason)
            return result
        self._record_attempt(
            task.job.work_bucket, began, status=Recorded.SUCCEEDED, engine_s=result.engine_s, frames=result.frames
        )
        self._segment_done(task)
        return result

    def _segment_done(self, task: RenderTask) -> None:
        """The job's progress and its latest frame, to its webhook (if it asked)."""
        if self._events is None:
            return
        job, index = task.job, task.segment.index
        now = time.time()
        happened: tuple[tuple[EventKind, dict[str, Any]], ...] = (
            ("progress", {"segments_total": job.segment_count, "segment": index}),
            ("preview", {"key": layout.frame_preview_key(job.job_id), "segment": index}),
        )
        for kind, data in happened:
            event = WebhookEvent(
                event_id=event_id(job.job_id, job.run, kind, f"{index:05d}"), job_id=job.job_id, run=job.run,
                kind=kind, occurred_at=now, data=data,
            )  # fmt: skip
            self._events.emit_quietly(event)

    @contextlib.contextmanager
    def _recording(self, task: RenderTask, began: SegmentAttempt, cancel: threading.Event) -> Iterator[None]:
        """An attempt that ends in an exception here is recorded with how it ended."""
        try:
            yield
        except GivenBack as given_back:
            self._record_attempt(task.job.work_bucket, began, status=Recorded.RELEASED, reason=str(given_back))
            raise
        except Cancelled as cancelled:
            lost_to = self._superseded(task)
            if lost_to:
                self._record_attempt(task.job.work_bucket, began, status=Recorded.SUPERSEDED, reason=lost_to)
            else:
                self._record_attempt(task.job.work_bucket, began, status=Recorded.CANCELLED, reason=str(cancelled))
            raise
        except Exception as error:
            name, reason = describe(error)
            if cancel.is_set():
                self._record_attempt(task.job.work_bucket, began, status=Recorded.CANCELLED, error=name, reason=reason)
            else:
                self._record_attempt(task.job.work_bucket, began, status=Recorded.FAILED, error=name, reason=reason)
            raise

    def _record_attempt(self, bucket: str, began: SegmentAttempt, **ended: Any) -> None:
        record = began.model_copy(update={**ended, "finished_at": round(time.time(), 3)} if ended else {})
        with self._running_lock:
            if ended:
                # No refresh of its `alive_at` may land after its end.
                self._running = {k: v for k, v in self._running.items() if v[1] is not began}
            self._write_attempt(bucket, record)
        if ended and self._billing is not None:
            self._billing.ended(bucket, record)

    def _write_attempt(self, bucket: str, record: SegmentAttempt) -> None:
        key = layout.attempt_record_key(record.job_id, record.index, record.run, record.attempt, record.copy_number)
        try:
            self._storage.put_bytes(bucket, key, record.model_dump_json().encode(), "application/json")
        except Exception:
            # The log of attempts is for people; it never fails a segment.
            logger.warning("attempt record %s not written", key, exc_info=True)

    def _alive(self, task: RenderTask) -> None:
        """Its running attempt was seen alive now: a killed worker's attempt is billed to here."""
        with self._running_lock:
            held = self._running.get((task.in_hand, task.copy_number))
            if held is not None:
                bucket, began = held
                self._write_attempt(bucket, began.model_copy(update={"alive_at": round(time.time(), 3)}))

    def _held(self, task: RenderTask) -> str | None:
        """Why this segment must not start now (its tenant's budget is spent), or None."""
        return self._billing.held(task.job) if self._billing is not None else None

    def _check_blocklist(self, task: RenderTask) -> None:
        """Blocked from the job: hand the task back, or fail it when no live worker has been allowed to
        render it for the blocklist's grace."""
        if self._blocklist is None or not self._blocklist.blocked(task.job):
            return
        everyone, listed_for_s = self._blocklist.stranded(task.job)
        if everyone:
            last = self._blocklist.last_failure(task.job)
            raise WorkersBlocklisted(
                f"every live render worker ({', '.join(everyone)}) failed too many segments of this job and is "
                f"blocklisted for it (all of them for {listed_for_s:.0f} s)"
                + (f"; {self._worker}'s last failure: {last}" if last else "")
            )
        waiting = f" (every live worker listed for {listed_for_s:.0f} s)" if listed_for_s else ""
        raise Blocked(
            f"segment {task.segment.index} of {task.job.job_id}: {self._worker} is blocklisted for the job{waiting}"
        )

    def _record_hold(self, task: RenderTask, began: SegmentAttempt) -> None:
        """The token and this attempt's start, where the watchdog looks for stragglers (best effort)."""
        hold = SegmentHold(
            task_token=task.task_token, worker=self._worker, attempt=began.attempt, started_at=began.started_at
        )
        key = layout.segment_task_key(task.job.job_id, task.segment.index, task.job.run)
        try:
            self._storage.put_bytes(task.job.work_bucket, key, hold.model_dump_json().encode(), "application/json")
        except Exception:
            # Without it the segment gets no backup copy; it still renders.
            logger.warning("task record %s not written", key, exc_info=True)

    def _stopped(self, task: RenderTask) -> bool:
        """Cancelled by an operator, or doomed by a segment that failed for good (fusionfleet.jobs.loss)."""
        job = task.job
        return is_cancelled(self._storage, job.work_bucket, job.job_id) or is_job_failed(
            self._storage, job.work_bucket, job.job_id
        )

    def _token_cause(self, task: RenderTask) -> str | None:
        """The cause to fail a stopped job's task's token with (TaskHandler.standing)."""
        job, segment = task.job, task.segment
        if task.copy_number or is_cancelled(self._storage, job.work_bucket, job.job_id):
            return None
        marker = job_failed(self._storage, job.work_bucket, job.job_id)
        if marker is None or marker.run != job.run:
            return None  # no marker of this run: a retry is not lost by an earlier run's failure
        if marker.segment == segment.index:
            # Its own failure: the marker is written before the token is failed (settle), so a worker that died
            # in between left the token waiting, and its redelivered message would be dropped with the token
            # only woken: the job waited for its heartbeat timeout (found by the simulation's workers). Failed
            # with the failure's own cause; TokenGone when that worker lived to fail it.
            return marker.cause
        label = segment_label(segment.index, segment.start_frame, segment.end_frame)
        return f"{label} of {job.job_id} dropped unrendered: the job is lost ({marker.by}): {marker.cause}"

    def _job_lost(self, task: RenderTask, error: str, cause: str, attempts: int) -> None:
        """This segment failed for good: mark its job failed, so its other segments are not rendered."""
        job = task.job
        marker = JobFailedMarker(
            job_id=job.job_id, run=job.run, segment=task.segment.index, attempts=attempts, error=error, cause=cause,
            by=f"worker {self._worker}", at=time.time(),
        )  # fmt: skip
        if mark_job_failed(self._storage, job.work_bucket, marker):
            logger.warning("job %s marked failed: %s", job.job_id, cause)

    def _saved_frames(self, task: RenderTask) -> int:
        job, segment = task.job, task.segment
        return Checkpoints(self._storage, job.work_bucket, job.job_id, segment.index).saved(segment.start_frame)

    def _failed_attempts(self, task: RenderTask, attempts: range) -> int:
        """Attempts whose record says `failed`; a missing record is a worker that died before writing it."""
        job, index = task.job, task.segment.index
        failed = 0
        for number in attempts:
            key = layout.attempt_record_key(job.job_id, index, job.run, number, task.copy_number)
            try:
                record = SegmentAttempt.model_validate(get_json(self._storage, job.work_bucket, key))
            except ObjectMissing:
                continue
            failed += record.status == Recorded.FAILED
        return failed

    def _superseded(self, task: RenderTask) -> str | None:
        """Why this copy's work is pointless (the other copy committed the segment), or None."""
        job = task.job
        committed = winner(self._storage, job.work_bucket, job.job_id, task.segment.index, job.run)
        return _won_by(committed) if committed is not None and committed.copy_number != task.copy_number else None

    def close(self) -> None:
        self._renderer.close()


class MergeHandler(TaskHandler[MergeTask]):
    """Merges a job's segments. Keeps no checkpoints, is never superseded; a failed merge fails its
    execution, which publishes the notice itself, and the gate's reason (the default failure cause)
    already names each segment, its frames, attempts and last error."""

    role = "merge"

    def __init__(self, deps: MergeDeps) -> None:
        self._deps = deps

    def parse(self, body: str) -> MergeTask:
        return MergeTask.model_validate_json(body)

    def describe(self, task: MergeTask) -> Names:
        return Names(f"merge of {task.job.job_id}")

    def start(self, task: MergeTask, cancel: threading.Event, attempt: Attempt) -> Callable[[], MergeResult]:
        result = self.execute(task, cancel, attempt)  # no engine: all of it now
        return lambda: result

    def execute(self, task: MergeTask, cancel: threading.Event, attempt: Attempt) -> MergeResult:
        if task.job.renders_stills:
            return merge_stills(task, self._deps)
        return merge_job(task, self._deps)

    def standing(self, task: MergeTask, progress_of: range | None = None) -> Standing:
        stopped = is_cancelled(self._deps.storage, task.job.work_bucket, task.job.job_id)
        return Standing(stopped=stopped, progress=no_progress(progress_of))


def _won_by(committed: SegmentRecord) -> str:
    return f"copy {committed.copy_number} on {committed.worker or 'another worker'} committed the segment first"
