"""The worker loop, in rq's shape: check for stop → take → execute (kept alive) → report → delete.

A message is deleted only after Step Functions took the result (or the token is gone for good), so
a worker that dies at any point loses nothing: the message reappears and another worker takes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic

from pydantic import ValidationError

from fusionfleet.adapters.orchestrator import TaskCallbacks
from fusionfleet.adapters.queues import QueueMessage, WorkQueue
from fusionfleet.errors import TokenGone
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.keeper import Keeper, KeepPolicy, Loss, LossKind
from gpu_worker.delivery.lookahead import Lookahead, LookaheadPolicy, TakenEarly
from gpu_worker.delivery.queue_actions import QueueActions, safely
from gpu_worker.delivery.retry import ProgressPolicy, RetryPolicy, describe, retryable
from gpu_worker.delivery.tasks import Output, TaskHandler, TaskT
from gpu_worker.delivery.token_actions import TokenActions
from gpu_worker.errors import Blocked, Cancelled, GivenBack
from gpu_worker.lifecycle.presence import Presence
from gpu_worker.lifecycle.protection import NoProtection, TaskProtection
from gpu_worker.lifecycle.retirement import NeverRetire, Retirement
from gpu_worker.lifecycle.stopping import ColdStop, StopSignal

logger = logging.getLogger(__name__)


class Worker(Generic[TaskT]):
    def __init__(
        self,
        name: str,
        queue_urls: Sequence[str],
        handler: TaskHandler[TaskT],
        queue: WorkQueue,
        orchestrator: TaskCallbacks,
        retry: RetryPolicy,
        keep: KeepPolicy,
        stop: StopSignal,
        idle_wait_s: int = 2,
        presence: Presence | None = None,
        take_recheck_s: float = 1.0,
        token_grace_s: float = 30.0,
        protection: TaskProtection | None = None,
        capacity: Callable[[], str | None] | None = None,
        lookahead: LookaheadPolicy | None = None,
        progress: ProgressPolicy | None = None,
        retirement: Retirement | None = None,
    ) -> None:
        if not queue_urls:
            raise ValueError("a worker needs at least one queue")
        self.name = name
        self._queue_urls = tuple(queue_urls)
        self._handler = handler
        self._queue = queue
        self._orchestrator = orchestrator
        self._retry = retry
        self._keep = keep
        self._stop = stop
        self._idle_wait_s = idle_wait_s
        self._presence = presence
        # Why this worker cannot take a segment now (no free GPU memory), or None.
        self._capacity = capacity
        self._short_of: str | None = None
        # Protected from taking a task until the queues are found empty (or the worker stops), so a
        # scale-in picks idle tasks; renewed with each heartbeat.
        self._protection = protection or NoProtection()
        # Asked between segments: ECS stops no protected task in a deployment or a delete, it waits, so a
        # worker that kept taking work held a stack update for the whole backlog (lifecycle/retirement.py).
        self._retirement = retirement or NeverRetire()
        # The next task, taken while this one renders when the backlog is deep (delivery.lookahead).
        self.lookahead = Lookahead(lookahead or LookaheadPolicy(), queue, self._queue_urls, self)
        self._queue_actions = QueueActions(
            queue, self._queue_urls, handler, progress or ProgressPolicy(), stop, idle_wait_s
        )
        self._tokens = TokenActions(orchestrator, handler, take_recheck_s, token_grace_s)
        self._finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="finish")
        self._finishing: Future[None] | None = None
        self._counts = threading.Lock()
        self._may_look_ahead = False
        self.completed = 0
        self.failed = 0
        self.cold_stopped = False

    def run(self, max_tasks: int | None = None) -> int:
        """Work until stopped (or `max_tasks` done); returns the number of tasks handled."""
        logger.info("worker %s (%s) started on %s", self.name, self._handler.role, ", ".join(self._queue_urls))
        handled = 0
        why = "stop requested"
        taken: TakenEarly | None = None
        idle_from: float | None = None
        if self._presence is not None:
            self._presence.start()
        try:
            while not self._stop.requested.is_set():
                if max_tasks is not None and handled >= max_tasks:
                    why = f"{max_tasks} tasks done"
                    break
                retiring = self._retirement.due()
                if retiring is not None:
                    # As on SIGTERM: take no more; a task taken early goes back, protection is cleared.
                    why = f"retiring: {retiring}"
                    self._stop.request()
                    break
                if taken is not None and self._outranked(taken.message):
                    # Priorities overtake: a higher queue filled while this one waited its turn.
                    self._queue_actions.give_back_taken_early(taken)
                    taken = None
                if taken is None:
                    if self._lacks_capacity():
                        continue
                    polled = time.time()
                    message = self.take()
                    if message is None:
                        if not self._finishing_now():
                            self._protection.unprotect()
                        idle_from = idle_from or self._idle(polled)
                        continue
                    if idle_from is not None:
                        self._busy(idle_from)
                        idle_from = None
                else:
                    # Its queue time runs until its turn: the attempt records say how long it waited.
                    message = dataclasses.replace(taken.message, received_at=time.time())
                self._may_look_ahead = max_tasks is None or handled + 1 < max_tasks
                self.execute(message, waited=taken)
                handled += 1
                taken = self.lookahead.collect()
        except ColdStop:
            why = "cold stop"
            self.cold_stopped = True
        finally:
            # A task taken early and not started goes back to the queue at once, not at its timeout.
            self._queue_actions.give_back_taken_early(taken or self.lookahead.collect())
            self._finisher.shutdown(wait=True)
            self._protection.unprotect()
            self._handler.close()
            if self._presence is not None:
                self._presence.close()
            logger.info(
                "worker %s stopped (%s) after %s tasks: %s completed, %s failed",
                self.name,
                why,
                handled,
                self.completed,
                self.failed,
            )
        return handled

    def _idle(self, since: float) -> float:
        """Its queues were found empty since `since` (the empty poll's start): logged with the time, so the
        fleet's idle time is measured (benchmarks/fleet_overhead.py), not inferred."""
        logger.info("worker %s idle from %.3f", self.name, since)
        return since

    def _busy(self, idle_from: float) -> None:
        logger.info("worker %s took work at %.3f, idle from %.3f", self.name, time.time(), idle_from)

    def _outranked(self, message: QueueMessage) -> bool:
        """A queue of higher priority than `message`'s holds visible work."""
        higher = self._queue_urls[: self._queue_urls.index(message.queue_url)]
        try:
            return any(self._queue.depth(url).visible > 0 for url in higher)
        except Exception:
            logger.warning("could not read the higher queues' depth", exc_info=True)
            return False

    def _lacks_capacity(self) -> bool:
        """True (after waiting a poll's time) when the worker may not take work now; logged on change."""
        why = self._capacity() if self._capacity is not None else None
        if why != self._short_of:
            if why:
                logger.warning("worker %s takes no work: %s", self.name, why)
            elif self._short_of:
                logger.info("worker %s takes work again", self.name)
            self._short_of = why
        if why:
            self._stop.requested.wait(self._idle_wait_s)
        return why is not None

    def take(self) -> QueueMessage | None:
        """Highest priority first; only the last queue is long-polled, so a busy high queue is never waited past."""
        for position, url in enumerate(self._queue_urls):
            last = position == len(self._queue_urls) - 1
            messages = self._queue.receive(
                url, wait_s=self._idle_wait_s if last else 0, visibility_s=self._keep.visibility_s
            )
            if messages:
                return messages[0]
        return None

    def execute(self, message: QueueMessage, waited: TakenEarly | None = None) -> None:
        if waited is not None:
            waited.stop_keeping()
        try:
            task = self._handler.parse(message.body)
        except ValidationError as error:
            self._drop_malformed(message, error)
            return
        what = self._handler.describe(task)
        attempt = Attempt.of(message, prior=task.prior_attempts)
        if waited is not None and waited.keeper is not None and waited.keeper.lost.is_set():
            # Cancelled, superseded, held or gone while it waited for its turn.
            self._after_loss(message, task, what, waited.keeper.loss, attempt)
            return
        if waited is None and self._dropped_at_take(message, task, what, attempt):
            return  # (a task taken early was looked at when taken, and kept an eye on since)
        if self._queue_actions.resent_for_progress(message, task, what, attempt):
            return
        logger.info("%s: attempt %s", what, attempt.number)
        self._protection.protect()
        self._begin(task)
        keeper = self._keeper(message, task, on_keep=self._protection.protect)
        keeper.start()
        try:
            if self._may_look_ahead:
                self.lookahead.begin()
            finish = self._handler.start(task, keeper.lost, attempt)
        except BaseException as error:
            keeper.stop()
            self._after_error(message, task, what, attempt, keeper, error)
            return
        if self.lookahead.enabled:
            # The engine is free: the segment's join, check, upload, callback and delete go on in the
            # background while the next one renders. One at a time, so finishing never falls behind.
            self._await_finishing()
            self._finishing = self._finisher.submit(self._complete, message, task, what, attempt, keeper, finish)
        else:
            self._complete(message, task, what, attempt, keeper, finish)

    def _complete(
        self,
        message: QueueMessage,
        task: TaskT,
        what: str,
        attempt: Attempt,
        keeper: Keeper,
        finish: Callable[[], Output],
    ) -> None:
        """Finish a task whose engine part is done, still holding its message; then report it."""
        try:
            output = finish()
        except BaseException as error:
            keeper.stop()
            self._after_error(message, task, what, attempt, keeper, error)
            return
        keeper.stop()
        self._succeed(message, task.task_token, what, output)
        self._end(task, True)

    def _await_finishing(self) -> None:
        if self._finishing is not None:
            with contextlib.suppress(Exception):  # its own errors are handled where it ran
                self._finishing.result()
            self._finishing = None

    def _finishing_now(self) -> bool:
        return self._finishing is not None and not self._finishing.done()

    def _after_error(
        self, message: QueueMessage, task: TaskT, what: str, attempt: Attempt, keeper: Keeper, error: BaseException
    ) -> None:
        """A task that raised instead of producing its result: given back, resent, retried or failed."""
        if isinstance(error, ColdStop | GivenBack):
            # A warm stop (SIGTERM: the engine checkpoints and gives it back; a second one: a cold stop).
            # On its last delivery a give-back would dead-letter a segment that just checkpointed: it goes
            # back as a new message instead when it saved chunks since it was sent.
            self._end(task, None)
            if isinstance(error, GivenBack):
                logger.info("%s", error)
            if not self._queue_actions.resent_for_progress(message, task, what, attempt, ending=True):
                self._queue_actions.give_back(message, what)
            if isinstance(error, ColdStop):
                raise error
            return
        if isinstance(error, Cancelled):
            self._end(task, None)
            self._after_loss(message, task, what, keeper.loss, attempt)
        elif isinstance(error, Blocked):
            self._end(task, None)
            logger.warning("%s", error)
            self._queue_actions.resend(message, task, attempt, what)
        elif isinstance(error, Exception):
            if keeper.lost.is_set():
                self._end(task, None)
                self._after_loss(message, task, what, keeper.loss, attempt)
                return
            self._end(task, False)
            self._fail(message, task, what, error, attempt.number)
        else:
            raise error

    def still_wanted(self, message: QueueMessage) -> bool:
        """The checks of a task just taken, made for one taken early as it is taken: False when dropped."""
        try:
            task = self._handler.parse(message.body)
        except ValidationError:
            return True  # discarded, with its token failed, when its turn comes
        attempt = Attempt.of(message, prior=task.prior_attempts)
        return not self._dropped_at_take(message, task, self._handler.describe(task), attempt)

    def taken_early(self, message: QueueMessage) -> None:
        """A task taken early starts next: its handler prepares for it (a render starts its decoder)."""
        try:
            self._handler.expect(self._handler.parse(message.body))
        except ValidationError:
            return  # discarded when its turn comes
        except Exception:
            logger.warning("could not prepare for the task taken early", exc_info=True)

    def keeper_until_turn(self, message: QueueMessage) -> Keeper | None:
        """What holds a task taken early until its turn: its visibility, its token, its cancel marker."""
        try:
            task = self._handler.parse(message.body)
        except ValidationError:
            return None  # malformed: discarded when its turn comes
        return self._keeper(message, task)

    def _keeper(self, message: QueueMessage, task: TaskT, on_keep: Callable[[], None] | None = None) -> Keeper:
        """A keeper (not started) of the message, its token and its job's cancel marker and winner."""
        return Keeper(
            self._queue, self._orchestrator, message, task.task_token, self._keep,
            cancelled=lambda: self._handler.cancelled(task), on_keep=on_keep, held=lambda: self._handler.held(task),
            superseded=lambda: self._handler.superseded(task), alive=lambda: self._handler.alive(task),
        )  # fmt: skip

    def _dropped_at_take(self, message: QueueMessage, task: TaskT, what: str, attempt: Attempt) -> bool:
        """A task of a cancelled job, or whose token is gone (its execution stopped), is dropped unrendered.

        Checked when the message is taken, before any work: a cancelled job's queued segments then
        leave the queues as fast as workers can receive them. The heartbeat comes first: on AWS a
        stopped execution's token answers it with TaskTimedOut/InvalidToken; LocalStack keeps a stopped
        execution RUNNING until each of its waiting tasks is woken, and a heartbeat is what wakes one.
        """
        try:
            self._tokens.first_beat(task, attempt)
        except TokenGone as error:
            logger.warning("%s: its token is gone (%s); dropping the message unrendered", what, error.reason)
            self._queue_actions.delete(message)
            return True
        except Exception:
            # A transient API error: the keeper beats again soon, and a gone token is found then.
            logger.warning("%s: the first heartbeat failed", what, exc_info=True)
        try:
            cancelled = self._handler.cancelled(task)
        except Exception:
            logger.warning("%s: the cancel marker could not be read", what, exc_info=True)
            cancelled = False
        if cancelled:
            logger.warning("%s: its job was cancelled or has failed; dropping the message unrendered", what)
            self._drop(message, task, what)
            return True
        try:
            held = self._handler.held(task)
        except Exception:
            logger.warning("%s: its tenant's budget could not be read", what, exc_info=True)
            held = None
        if held:
            self._queue_actions.resend_held(message, task, attempt, what, held)
            return True
        return False

    def _begin(self, task: TaskT) -> None:
        if self._presence is not None:
            self._presence.begin(task.in_hand, task.engine)

    def _end(self, task: TaskT, succeeded: bool | None) -> None:
        """The presence record says this task is over (unless the next one already took its place)."""
        if self._presence is None:
            return
        if succeeded is None:
            self._presence.idle(task.in_hand)
        else:
            self._presence.end(succeeded, task.in_hand)

    def _succeed(self, message: QueueMessage, token: str, what: str, output: Output) -> None:
        try:
            self._orchestrator.task_success(token, output.model_dump(mode="json"))
            with self._counts:
                self.completed += 1
            logger.info("%s: done", what)
        except TokenGone as error:
            # Final: the job already moved on (or timed out); the result is not wanted any more.
            logger.warning("%s: finished but its token is gone (%s); dropping the message", what, error.reason)
        self._queue_actions.delete(message)

    def _fail(self, message: QueueMessage, task: TaskT, what: str, error: Exception, attempt: int) -> None:
        name, reason = describe(error)
        # Deliveries forgiven for their progress (see _resent_for_progress) do not count towards the retry limit.
        last = not retryable(error) or self._retry.is_last(attempt - task.forgiven_attempts)
        logger.error("%s: attempt %s failed (%s: %s)%s", what, attempt, name, reason, "; giving up" if last else "")
        if not isinstance(error, ValidationError | TokenGone):
            safely(lambda: self._handler.record_failure(task, name, reason, attempt), what)
        if not last:
            safely(lambda: self._queue.change_visibility(message, self._retry.delay_s(attempt)), what)
            return
        with self._counts:
            self.failed += 1
        if task.copy_number:
            # A straggler's backup copy never fails the segment: the original still holds the token.
            logger.warning("%s: backup copy %s gave up; the original carries on", what, task.copy_number)
            self._queue_actions.delete(message)
            return
        cause = self._handler.failure_cause(task, name, reason, attempt)
        # First, so the job's other segments stop now rather than after its notice (fusionfleet.jobs.loss).
        safely(lambda: self._handler.job_lost(task, name, cause, attempt), what)
        try:
            self._orchestrator.task_failure(task.task_token, name, cause)
        except TokenGone as gone:
            logger.warning("%s: token already gone (%s)", what, gone.reason)
        # Attempts that reached this message itself; a blocklisted worker's resend made a new message
        # carrying the earlier ones, and SQS counts only its own receives towards the redrive.
        received = attempt - task.prior_attempts
        if retryable(error) and self._retry.is_last(received):
            # Exhausted: make it visible so SQS moves it to the DLQ, where it can be inspected.
            safely(lambda: self._queue.change_visibility(message, 0), what)
        else:
            # Given back it would be delivered again, rendered again and fail again, over the
            # recorded reason of the job's failure: nobody wants it now that its token has failed.
            self._queue_actions.delete(message)

    def _after_loss(self, message: QueueMessage, task: TaskT, what: str, loss: Loss | None, attempt: Attempt) -> None:
        detail = loss.detail if loss is not None else "no reason recorded"
        if loss is not None and loss.kind is LossKind.HELD:
            self._queue_actions.resend_held(message, task, attempt, what, f"stopped: {detail}")
            return
        if loss is not None and loss.kind is LossKind.TOKEN_GONE:
            logger.warning("%s: abandoned, its token is gone (%s)", what, detail)
            self._queue_actions.delete(message)
        elif loss is not None and loss.kind is LossKind.SUPERSEDED:
            logger.warning("%s: stopped, %s", what, detail)
            self._queue_actions.delete(message)
        elif loss is not None and loss.kind is LossKind.JOB_CANCELLED:
            logger.warning("%s: stopped, its job was cancelled or has failed (%s)", what, detail)
            self._drop(message, task, what)
        else:
            logger.warning("%s: abandoned, the message was redelivered elsewhere (%s)", what, detail)

    def _drop(self, message: QueueMessage, task: TaskT, what: str) -> None:
        """Drop a task of a cancelled or lost job unrendered: its token answered, its message deleted."""
        self._tokens.answer_stopped_job(task, what)
        self._queue_actions.delete(message)

    def _drop_malformed(self, message: QueueMessage, error: ValidationError) -> None:
        self._tokens.fail_malformed(message, error)
        self._queue_actions.delete(message)
