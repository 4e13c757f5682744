"""Carrying out how a message ends (gpu_worker.delivery.outcomes): its queue actions and its token actions, one
function for every ending, so a reader finds what each outcome does to the message and its token in one place."""

from __future__ import annotations

import logging
import threading
from typing import Generic

from fusionfleet.adapters.orchestrator import TaskCallbacks
from fusionfleet.adapters.queues import QueueMessage
from fusionfleet.errors import TokenGone
from gpu_worker.delivery.facts import Failure, JobLost, Names
from gpu_worker.delivery.outcomes import (
    Abandon,
    DeadLetter,
    Drop,
    DropWhy,
    Fail,
    GiveBack,
    Outcome,
    Resend,
    ResendWhy,
    RetryLater,
    Succeeded,
)
from gpu_worker.delivery.queue_actions import QueueActions, safely
from gpu_worker.delivery.tasks import TaskHandler, TaskT
from gpu_worker.delivery.token_actions import TokenActions

logger = logging.getLogger(__name__)


class Settler(Generic[TaskT]):
    """Settles one worker's messages; counts the tasks it completed and those it gave up on."""

    def __init__(
        self,
        queue_actions: QueueActions,
        tokens: TokenActions[TaskT],
        orchestrator: TaskCallbacks,
        handler: TaskHandler[TaskT],
        pause: threading.Event,
        idle_wait_s: int,
    ) -> None:
        self._queue = queue_actions
        self._tokens = tokens
        self._orchestrator = orchestrator
        self._handler = handler
        # Set when the worker stops: a resend's pause ends at once then.
        self._pause = pause
        self._idle_wait_s = idle_wait_s
        self._counts = threading.Lock()
        self.completed = 0
        self.failed = 0

    def settle(self, message: QueueMessage, task: TaskT | None, names: Names, outcome: Outcome) -> bool:
        """Carry `outcome` out on `message` and its task's token. False only for a renewal that could not be
        sent and has no fallback (Resend.or_give_back False): the task then renders under this delivery."""
        what = names.what
        match outcome:
            case Succeeded():
                assert task is not None
                self._succeed(message, task, what, outcome)
            case RetryLater() | DeadLetter() | Fail():
                assert task is not None
                self._fail(message, task, names, outcome)
            case GiveBack(detail):
                if detail:
                    logger.info("%s", detail)
                self._queue.give_back(message, what)
            case Resend():
                assert task is not None
                return self._resend(message, task, what, outcome)
            case Drop():
                self._drop(message, task, what, outcome)
            case Abandon(detail):
                logger.warning("%s: abandoned, the message was redelivered elsewhere (%s)", what, detail)
        return True

    def _succeed(self, message: QueueMessage, task: TaskT, what: str, outcome: Succeeded) -> None:
        try:
            self._orchestrator.task_success(task.task_token, outcome.output.model_dump(mode="json"))
            with self._counts:
                self.completed += 1
            logger.info("%s: done", what)
        except TokenGone as error:
            # Final: the job already moved on (or timed out); the result is not wanted any more.
            logger.warning("%s: finished but its token is gone (%s); dropping the message", what, error.reason)
        self._queue.delete(message)

    def _attempt_failed(self, task: TaskT, what: str, failure: Failure, giving_up: bool) -> None:
        logger.error(
            "%s: attempt %s failed (%s: %s)%s",
            what, failure.attempt, failure.error, failure.reason, "; giving up" if giving_up else "",
        )  # fmt: skip
        if failure.recorded:
            safely(lambda: self._handler.note(task, failure), what)
        if giving_up:
            with self._counts:
                self.failed += 1

    def _fail(self, message: QueueMessage, task: TaskT, names: Names, outcome: RetryLater | DeadLetter | Fail) -> None:
        failure, what = outcome.failure, names.what
        self._attempt_failed(task, what, failure, giving_up=not isinstance(outcome, RetryLater))
        if isinstance(outcome, RetryLater):
            safely(lambda: self._queue.change_visibility(message, outcome.delay_s), what)
            return
        name, attempt = failure.error, failure.attempt
        cause = names.cause(name, failure.reason, attempt)
        # First, so the job's other segments stop now rather than after its notice (fusionfleet.jobs.loss).
        safely(lambda: self._handler.note(task, JobLost(name, cause, attempt)), what)
        try:
            self._orchestrator.task_failure(task.task_token, name, cause)
        except TokenGone as gone:
            logger.warning("%s: token already gone (%s)", what, gone.reason)
        if isinstance(outcome, DeadLetter):
            # Visible at once, so SQS moves it to the DLQ on its next receive, where it can be inspected.
            safely(lambda: self._queue.change_visibility(message, 0), what)
        else:
            self._queue.delete(message)

    def _resend(self, message: QueueMessage, task: TaskT, what: str, outcome: Resend) -> bool:
        again = task.resent(outcome.prior_attempts, outcome.forgiven_attempts, outcome.progress_frames)
        if outcome.why is ResendWhy.PROGRESS:
            try:
                self._queue.send(message.queue_url, again.wire_json())
            except Exception:
                logger.warning("%s: could not renew its delivery; rendering it under this one", what, exc_info=True)
                if outcome.or_give_back:
                    self._queue.give_back(message, what)
                return outcome.or_give_back
            logger.info("%s: %s", what, outcome.detail)
            self._queue.delete(message)
            return True
        if outcome.why is ResendWhy.BLOCKED:
            logger.warning("%s", outcome.detail)
        elif outcome.why is ResendWhy.HELD:
            # Its tenant's budget is spent: not rendered now, and not dropped either. The watchdog holds or
            # cancels the job within a sweep; until then the task goes round as a new message (no attempt
            # spent), and the first worker to take it after the stop finds its token gone. Dropped now, its
            # token would never be heard of again (LocalStack keeps a stopped execution running until each
            # of its waiting tasks is woken).
            logger.warning("%s: %s; handed back unrendered", what, outcome.detail)
        resent = self._queue.resend(message, again.wire_json(), outcome.prior_attempts, what, outcome.to_top)
        if outcome.why is ResendWhy.HELD or (resent and outcome.why is ResendWhy.BLOCKED):
            # Not at once: an idle fleet of blocked workers would otherwise pass it round without pause.
            self._pause.wait(self._idle_wait_s)
        return True

    def _drop(self, message: QueueMessage, task: TaskT | None, what: str, outcome: Drop) -> None:
        if outcome.why is DropWhy.MALFORMED:
            self._tokens.fail_malformed(message, outcome.detail, outcome.cause or "")
        elif outcome.why is DropWhy.BACKUP_GAVE_UP:
            assert task is not None and outcome.failure is not None
            self._attempt_failed(task, what, outcome.failure, giving_up=True)
            logger.warning("%s: %s", what, outcome.detail)
        else:
            logger.warning("%s: %s", what, outcome.detail)
            if outcome.why is DropWhy.JOB_STOPPED:
                assert task is not None
                self._tokens.answer_stopped_job(task, what, outcome.cause)
        self._queue.delete(message)
