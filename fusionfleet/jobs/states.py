"""A job's states and a segment's, what each allows, and how a tenant is told them: data, written once.

Every list of job states lives here (a static test holds the rest of the code to it): the CLI, the
dashboards, the tenant API and the watchdog name states through `JobState` and ask this module what
a state means (ended, unsuccessful, which actions it allows, what the API calls it) instead of
listing states themselves. Pure.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal


class JobState(StrEnum):
    PENDING = "PENDING"  # accepted, not yet running (its files awaited, or not yet sliced)
    WAITING = "WAITING"  # planned, waiting for its tenant's turn or budget (fusionfleet.jobs.waiting)
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"  # its manifest or media were refused: nothing ran
    CANCELLED = "CANCELLED"  # stopped by an operator or its tenant
    TIMED_OUT = "TIMED_OUT"  # its execution ran out of time
    ABORTED = "ABORTED"  # its execution was stopped from outside (the watchdog)

    @property
    def ended(self) -> bool:
        return self not in (JobState.PENDING, JobState.WAITING, JobState.RUNNING)

    @property
    def unsuccessful(self) -> bool:
        """It ended without its video (the CLI's exit status 1, or 3 when rejected: fleetctl.exits)."""
        return self.ended and self is not JobState.SUCCEEDED

    @property
    def public(self) -> JobState:
        """The state as the tenant API reports it: how a job failed is the operator's business."""
        return JobState.FAILED if self in (JobState.TIMED_OUT, JobState.ABORTED) else self


class SegmentState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


def segment_counts(done: int, failed: int, total: int) -> dict[str, int]:
    """A job's segments as its webhook events carry them: `{"done": …, "failed": …, "total": …}`."""
    return {SegmentState.DONE: done, SegmentState.FAILED: failed, "total": total}


class Recorded:
    """A segment's words as its records store them: the result beside its output (`RecordStatus`) and each
    attempt's record (`AttemptStatus`). On S3 since the first release and read back by every version, so
    kept as written (Literal types: the records' models, fusionfleet.messages, take them as written). What
    they mean as a segment's SegmentState is the read model's (fusionfleet.jobs.views.segment_view)."""

    RUNNING: Final = "running"
    SUCCEEDED: Final = "succeeded"
    FAILED: Final = "failed"
    RELEASED: Final = "released"  # given back on a warm stop
    CANCELLED: Final = "cancelled"  # its job was cancelled, or its hold lost
    SUPERSEDED: Final = "superseded"  # another copy of the segment committed its output first


RecordStatus = Literal["succeeded", "failed"]
AttemptStatus = Literal["running", "succeeded", "failed", "released", "cancelled", "superseded"]


class NoticeStatus(StrEnum):
    """How a final notice (a job's or a batch's) says its job ended, its `status`; a final webhook event's
    kind is the same word. Stored in notice records and sent to users as written: never renamed."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"  # every unsuccessful end but a cancel (timed out, aborted, rejected too)
    CANCELLED = "cancelled"

    @property
    def state(self) -> JobState:
        """The job state a notice so worded tells (a final webhook event's `state`)."""
        return JobState(self.value.upper())


def notice_status(state: JobState) -> NoticeStatus:
    """The word a final notice uses for an ended job in `state`."""
    if state is JobState.SUCCEEDED:
        return NoticeStatus.SUCCEEDED
    return NoticeStatus.CANCELLED if state is JobState.CANCELLED else NoticeStatus.FAILED


# One short word per notice status for the notice's subject, "FusionFleet <job id> <word>" (SNS caps
# subjects at 100 characters); the state machine's own subjects (render.asl.json) use the same words.
NOTICE_SUBJECT_WORDS: dict[NoticeStatus, str] = {
    NoticeStatus.SUCCEEDED: "done",
    NoticeStatus.FAILED: "failed",
    NoticeStatus.CANCELLED: "cancelled",
}


class Action(StrEnum):
    """What a client may ask of a job; each state says which it allows now (`ALLOWED`)."""

    CANCEL = "cancel"
    RETRY = "retry"


ALLOWED: dict[JobState, tuple[Action, ...]] = {
    JobState.PENDING: (),  # nothing runs yet: there is nothing to stop
    JobState.WAITING: (Action.CANCEL,),  # it leaves its tenant's queue
    JobState.RUNNING: (Action.CANCEL,),
    JobState.SUCCEEDED: (),
    JobState.FAILED: (Action.RETRY,),
    JobState.REJECTED: (),  # upload a fixed manifest instead
    JobState.CANCELLED: (Action.RETRY,),
    JobState.TIMED_OUT: (Action.RETRY,),
    JobState.ABORTED: (Action.RETRY,),
}

# Why an action a state does not allow is refused, in words a user can act on.
REFUSALS: dict[tuple[Action, JobState], str] = {
    (Action.CANCEL, JobState.PENDING): "it has not started yet, nothing to cancel",
    (Action.RETRY, JobState.RUNNING): "it is still running (cancel it first, or wait for it to end)",
    (Action.RETRY, JobState.SUCCEEDED): "it succeeded, there is nothing to retry",
    (Action.RETRY, JobState.PENDING): "it has not started yet",
    (Action.RETRY, JobState.WAITING): "it waits for its tenant's turn or budget and starts by itself",
    (Action.RETRY, JobState.REJECTED): "it was rejected: fix the manifest or media and upload the manifest again",
}
CANCEL_REASON = "cancelled by an operator"


def allowed(state: JobState, action: Action) -> bool:
    return action in ALLOWED[state]


def refusal(state: JobState, action: Action) -> str:
    """Why `action` does not apply to a job in `state`."""
    found = REFUSALS.get((action, state))
    if found is not None:
        return found
    if action is Action.CANCEL:
        return "it has ended, nothing to cancel"
    return "only a failed, cancelled, timed-out or aborted job can be retried"


def job_state(execution_status: str | None, rejected: bool, cancelled: bool, waiting: bool = False) -> JobState:
    """A job's state from its current run's execution (a Step Functions status), its rejection record,
    its cancel marker and its waiting record (queued for its tenant's turn, or held by its tenant's
    budget: its execution stopped, to resume as its next run)."""
    if waiting and not cancelled and execution_status in (None, JobState.ABORTED, JobState.RUNNING):
        return JobState.WAITING
    if execution_status is None:
        return JobState.CANCELLED if cancelled else JobState.REJECTED if rejected else JobState.PENDING
    # The marker is written once the execution was told to stop; some engines (LocalStack) report
    # it RUNNING until its waiting tasks have noticed.
    if execution_status in (JobState.ABORTED, JobState.RUNNING) and cancelled:
        return JobState.CANCELLED
    # The execution statuses that end a run are job states of the same name; anything not ended
    # (RUNNING, or a redriven execution's PENDING_REDRIVE) is still running.
    ended = (JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.ABORTED)
    return JobState(execution_status) if execution_status in ended else JobState.RUNNING


def could_be(execution_status: str, state: JobState) -> bool:
    """Whether a job whose newest run's execution is in `execution_status` can be in `state` (a cancelled
    job's execution is ABORTED, or still RUNNING while it stops): a listing's cheap filter."""
    if state is JobState.CANCELLED:
        return execution_status in (JobState.ABORTED, JobState.RUNNING, JobState.WAITING)
    if state is JobState.WAITING:  # queued (no execution), or held (its execution stopped, or stopping)
        return execution_status in (JobState.WAITING, JobState.ABORTED, JobState.RUNNING)
    if state is JobState.REJECTED:
        return execution_status == JobState.REJECTED  # rejected jobs are listed without an execution
    return execution_status == state


def parse_state(text: str) -> JobState | None:
    """A state a user typed (any case), or None."""
    try:
        return JobState(text.strip().upper())
    except ValueError:
        return None
