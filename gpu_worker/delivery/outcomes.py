"""How a message ends: every way, named once, and decided by one pure function.

The loop takes a message, runs its task, and asks `decide` what the message's end is, from what
happened (the task finished, raised or lost its hold; or, at take, what the checks found) and the
facts read for it; `settle` (gpu_worker.delivery.settle) carries the outcome out. Nothing here reads
a queue, a token or a bucket: the facts come in as data, so every ending is tested as a table.

The endings (`Ending`; docs/layout.md lists them, and a test holds the two equal):

- succeeded: the token succeeded with the result, the message deleted;
- retry later: the attempt failed and may be tried again: the message invisible for the backoff;
- dead letter: failed for good on its last receive: the token failed, the message left for SQS's redrive;
- fail: failed for good otherwise (nothing gained by another try): the token failed, the message deleted;
- give back: visible again at once, one receive spent (a warm stop, or a task taken early not started);
- resend, with why (`ResendWhy`): a new message carrying its attempts so far, this delivery not counted;
- drop, with why (`DropWhy`): ended unrendered: the message deleted, its token answered as the why says;
- abandon: the message was redelivered elsewhere: left to its new holder, nothing done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import ClassVar, overload

from pydantic import ValidationError

from fusionfleet.errors import TokenGone
from fusionfleet.messages import Task
from gpu_worker.delivery.facts import Failure, Progress, Standing
from gpu_worker.delivery.keeper import Loss, LossKind
from gpu_worker.delivery.retry import ProgressPolicy, RetryPolicy, describe, retryable, worth_resending
from gpu_worker.delivery.tasks import Output
from gpu_worker.errors import Blocked, Cancelled, GivenBack
from gpu_worker.lifecycle.stopping import ColdStop


class _Named(Enum):
    """Each value is its member's name in words (`DEAD_LETTER`: "dead letter"), as docs/layout.md lists it."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list[str]) -> str:
        return name.lower().replace("_", " ")


class Ending(_Named):
    SUCCEEDED = auto()
    RETRY_LATER = auto()
    DEAD_LETTER = auto()
    FAIL = auto()
    GIVE_BACK = auto()
    RESEND = auto()
    DROP = auto()
    ABANDON = auto()


class ResendWhy(_Named):
    """Why a task goes back as a new message instead of being rendered or failed here."""

    BLOCKED = auto()  # this worker is blocklisted for the task's job
    HELD = auto()  # its tenant's budget is spent: the watchdog holds the job within a sweep
    PROGRESS = auto()  # its last delivery, after deliveries that saved chunks or were killed
    LAST_RECEIVE = auto()  # taken early on its last receive and never started


class DropWhy(_Named):
    """Why a task ends unrendered; the why says what its token is told."""

    MALFORMED = auto()  # not a task: the token it names, if any, failed
    TOKEN_GONE = auto()  # its execution moved on: nothing to tell
    JOB_STOPPED = auto()  # cancelled or failed: its token failed with the job's loss, or woken
    SUPERSEDED = auto()  # the segment's other copy committed first: nothing to tell
    BACKUP_GAVE_UP = auto()  # a backup copy's failure never fails the segment: the original has the token


@dataclass(frozen=True)
class Succeeded:
    ending: ClassVar[Ending] = Ending.SUCCEEDED
    output: Output


@dataclass(frozen=True)
class RetryLater:
    ending: ClassVar[Ending] = Ending.RETRY_LATER
    failure: Failure
    delay_s: int


@dataclass(frozen=True)
class DeadLetter:
    ending: ClassVar[Ending] = Ending.DEAD_LETTER
    failure: Failure


@dataclass(frozen=True)
class Fail:
    ending: ClassVar[Ending] = Ending.FAIL
    failure: Failure


@dataclass(frozen=True)
class GiveBack:
    ending: ClassVar[Ending] = Ending.GIVE_BACK
    detail: str = ""  # what gave it back, for the log ("" when nothing needs saying)


@dataclass(frozen=True)
class Resend:
    """The new message's counts; `to_top`: to the highest queue rather than its own; `or_give_back`: given
    back when the send fails (else the outcome is not settled and the task renders under this delivery)."""

    ending: ClassVar[Ending] = Ending.RESEND
    why: ResendWhy
    detail: str
    prior_attempts: int
    forgiven_attempts: int
    progress_frames: int
    to_top: bool = False
    or_give_back: bool = True


@dataclass(frozen=True)
class Drop:
    """`detail`: the log line's tail; `cause`: what its token is failed with (MALFORMED, JOB_STOPPED; None: a
    stopped job's token is only woken)."""

    ending: ClassVar[Ending] = Ending.DROP
    why: DropWhy
    detail: str
    failure: Failure | None = None
    cause: str | None = None


@dataclass(frozen=True)
class Abandon:
    ending: ClassVar[Ending] = Ending.ABANDON
    detail: str


Outcome = Succeeded | RetryLater | DeadLetter | Fail | GiveBack | Resend | Drop | Abandon
OUTCOMES: tuple[type[Outcome], ...] = (Succeeded, RetryLater, DeadLetter, Fail, GiveBack, Resend, Drop, Abandon)


@dataclass(frozen=True)
class Rules:
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    progress: ProgressPolicy = field(default_factory=ProgressPolicy)


@dataclass(frozen=True)
class Delivery:
    """What decide reads of the message: the task's attempt over all its messages, this message's receives,
    and its queue's redrive limit (None: it has none)."""

    attempt: int
    receive_count: int
    receive_limit: int | None

    @property
    def last(self) -> bool:
        return self.receive_limit is not None and self.receive_count >= self.receive_limit

    @property
    def earlier(self) -> range:
        """The attempt numbers of this message's earlier receives."""
        return range(self.attempt - self.receive_count + 1, self.attempt)


# What happened, as decide is told it.


@dataclass(frozen=True)
class Malformed:
    """The message is not a task."""

    error: ValidationError


@dataclass(frozen=True)
class Taken:
    """The checks of a task just taken, before any work; a check not made (or that failed) is left at its default."""

    token_gone: str | None = None  # the first beat found the token gone for good: why
    # Its progress read only when it matters (progress_matters); superseded is not looked at: a copy that lost
    # starts, and answers with the winner's result.
    standing: Standing = field(default_factory=Standing)


@dataclass(frozen=True)
class Finished:
    output: Output


@dataclass(frozen=True)
class Raised:
    """The task raised; `lost`: its keeper had lost the hold by then (`loss` says why, when known)."""

    error: BaseException
    lost: bool = False
    loss: Loss | None = None
    progress: Progress | None = None  # for a warm stop, read only when it matters


@dataclass(frozen=True)
class Lost:
    """A task taken early lost its hold while it waited for its turn."""

    loss: Loss | None


@dataclass(frozen=True)
class Unstarted:
    """A task taken early goes back unstarted (the worker stops, or higher-priority work came)."""


Happened = Malformed | Taken | Finished | Raised | Lost | Unstarted


def progress_matters(task: Task, delivery: Delivery) -> bool:
    """Whether decide would read Progress: a segment's last delivery (a merge saves nothing; a backup copy
    never holds the token's last word). Pure."""
    return task.saves_progress and not task.copy_number and delivery.last


@overload
def decide(task: Task, delivery: Delivery, happened: Taken, rules: Rules | None = None) -> Outcome | None: ...


@overload
def decide(
    task: Task | None,
    delivery: Delivery | None,
    happened: Malformed | Finished | Raised | Lost | Unstarted,
    rules: Rules | None = None,
) -> Outcome: ...


def decide(
    task: Task | None, delivery: Delivery | None, happened: Happened, rules: Rules | None = None
) -> Outcome | None:
    """How the message ends, from what happened. Pure. None: nothing ends it yet (a task just taken: render it).

    `task` and `delivery` are None only for a Malformed message.
    """
    if isinstance(happened, Malformed):
        error = happened.error
        return Drop(DropWhy.MALFORMED, f"{error.error_count()} errors", cause=f"the task message is invalid: {error}")
    assert task is not None and delivery is not None
    rules = rules or Rules()
    match happened:
        case Taken():
            return _at_take(task, delivery, happened, rules)
        case Finished(output):
            return Succeeded(output)
        case Lost(loss):
            return _after_loss(task, delivery, loss)
        case Unstarted():
            if not delivery.last:
                return GiveBack()
            # Taking it spent a receive: on its last one a give-back would dead-letter a task nobody tried.
            return _resend(task, delivery, ResendWhy.LAST_RECEIVE, "")
        case Raised():
            return _after_error(task, delivery, happened, rules)
    raise TypeError(f"not something that happens to a message: {happened!r}")


def _at_take(task: Task, delivery: Delivery, taken: Taken, rules: Rules) -> Outcome | None:
    """A task of a stopped job, or whose token is gone, is dropped unrendered; a held one goes round; one on
    its last delivery that saved progress (or was killed) is renewed; the rest render."""
    if taken.token_gone is not None:
        detail = f"its token is gone ({taken.token_gone}); dropping the message unrendered"
        return Drop(DropWhy.TOKEN_GONE, detail)
    standing = taken.standing
    if standing.stopped:
        detail = "its job was cancelled or has failed; dropping the message unrendered"
        return Drop(DropWhy.JOB_STOPPED, detail, cause=standing.token_cause)
    if standing.held:
        return _resend(task, delivery, ResendWhy.HELD, standing.held)
    return _renewed(task, delivery, standing.progress, rules.progress, ending=False)


def _after_error(task: Task, delivery: Delivery, raised: Raised, rules: Rules) -> Outcome:
    error = raised.error
    if isinstance(error, ColdStop | GivenBack):
        # A warm stop (SIGTERM: the engine checkpoints and gives it back; a second one: a cold stop). On its
        # last delivery a give-back would dead-letter a segment that just checkpointed: it goes back as a new
        # message instead when it saved chunks since it was sent.
        renewed = _renewed(task, delivery, raised.progress, rules.progress, ending=True)
        return renewed or GiveBack(str(error) if isinstance(error, GivenBack) else "")
    if isinstance(error, Cancelled) or (isinstance(error, Exception) and raised.lost):
        return _after_loss(task, delivery, raised.loss)
    if isinstance(error, Blocked):
        return _resend(task, delivery, ResendWhy.BLOCKED, str(error))
    name, reason = describe(error)
    attempt = delivery.attempt
    # Deliveries forgiven for their progress do not count towards the retry limit.
    last = not retryable(error) or rules.retry.is_last(attempt - task.forgiven_attempts)
    failure = Failure(name, reason, attempt, recorded=not isinstance(error, ValidationError | TokenGone))
    if not last:
        return RetryLater(failure, rules.retry.delay_s(attempt))
    if task.copy_number:
        # A straggler's backup copy never fails the segment: the original still holds the token.
        detail = f"backup copy {task.copy_number} gave up; the original carries on"
        return Drop(DropWhy.BACKUP_GAVE_UP, detail, failure=failure)
    # Attempts that reached this message itself: a resent task is a new message carrying the earlier ones,
    # and SQS counts only its own receives towards the redrive.
    if retryable(error) and rules.retry.is_last(attempt - task.prior_attempts):
        return DeadLetter(failure)  # exhausted: SQS moves it to the DLQ, where it can be inspected
    # Given back it would be rendered again and fail again, over the job's recorded reason: nobody wants it.
    return Fail(failure)


def _after_loss(task: Task, delivery: Delivery, loss: Loss | None) -> Outcome:
    if loss is None:
        return Abandon("no reason recorded")
    detail = loss.detail
    match loss.kind:
        case LossKind.HELD:
            return _resend(task, delivery, ResendWhy.HELD, f"stopped: {detail}")
        case LossKind.TOKEN_GONE:
            return Drop(DropWhy.TOKEN_GONE, f"abandoned, its token is gone ({detail})")
        case LossKind.SUPERSEDED:
            return Drop(DropWhy.SUPERSEDED, f"stopped, {detail}")
        case LossKind.JOB_CANCELLED:
            detail = f"stopped, its job was cancelled or has failed ({detail})"
            return Drop(DropWhy.JOB_STOPPED, detail, cause=loss.token_cause)
    return Abandon(detail)  # LossKind.REDELIVERED: another worker holds it now


def _resend(task: Task, delivery: Delivery, why: ResendWhy, detail: str) -> Resend:
    """Back as a new message with this delivery not counted. A blocked worker's retry goes to the top queue:
    a task tried before decides its job's fate, and behind a deep backlog the tail of its own queue cost a
    doomed job's notice a whole backlog's wait (soak: 97 s of 121 s)."""
    to_top = why is ResendWhy.BLOCKED and delivery.attempt > 1
    return Resend(why, detail, delivery.attempt - 1, task.forgiven_attempts, task.progress_frames, to_top=to_top)


def _renewed(
    task: Task, delivery: Delivery, progress: Progress | None, policy: ProgressPolicy, ending: bool
) -> Resend | None:
    """A segment on its last SQS delivery goes back as a new message when its attempts saved chunks, or when
    one of them ended with its worker killed or stopped rather than a failure (the host's fault, not the
    segment's). The new message carries the progress it was sent with, so only further progress forgives
    its failures; ProgressPolicy.max_deliveries caps the total. `ending`: this delivery ends in a warm stop
    (it counts as stopped)."""
    if progress is None or not progress_matters(task, delivery):
        return None
    saved, sent_with = progress.saved_frames, task.progress_frames
    died = len(delivery.earlier) - progress.failed_attempts + (1 if ending else 0)
    if not worth_resending(
        policy, delivery.receive_count, delivery.receive_limit, delivery.attempt, saved, sent_with, died
    ):
        return None
    prior = delivery.attempt - 1
    # Progress forgives every attempt so far; without it only those that died are forgiven, so a segment
    # that fails on its own still meets its retry limit.
    forgiven = prior if saved > sent_with else task.forgiven_attempts + died - (1 if ending else 0)
    detail = (
        f"delivery {delivery.receive_count} of {delivery.receive_limit}, {saved} frames saved ({sent_with} when "
        f"sent), {died} of its deliveries killed or stopped: sent again with a fresh receive count"
    )
    return Resend(ResendWhy.PROGRESS, detail, prior, forgiven, saved, or_give_back=ending)


def ended_well(outcome: Outcome) -> bool | None:
    """What a started task's presence record says of it: True done, False failed, None neither. Pure."""
    if isinstance(outcome, Succeeded):
        return True
    if isinstance(outcome, RetryLater | DeadLetter | Fail):
        return False
    if isinstance(outcome, Drop) and outcome.why is DropWhy.BACKUP_GAVE_UP:
        return False
    return None
