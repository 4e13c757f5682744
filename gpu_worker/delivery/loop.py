"""The worker loop, in rq's shape: check for stop → dequeue → execute (kept alive) → report → delete.

A message is deleted only after Step Functions took the result (or the token is gone for good), so
a worker that dies at any point loses nothing: the message reappears and another worker takes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic

from pydantic import ValidationError

from fusionfleet.adapters.orchestrator import TaskCallbacks
from fusionfleet.adapters.queues import QueueMessage, ReceiptExpired, WorkQueue
from fusionfleet.errors import TokenGone
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.keeper import HeartbeatPolicy, HoldLoss, Keeper, LostHold
from gpu_worker.delivery.lookahead import Held, Lookahead, LookaheadPolicy, release
from gpu_worker.delivery.retry import ProgressPolicy, RetryPolicy, describe, renew_delivery, retryable
from gpu_worker.delivery.tasks import JOB_LOST_ERROR, Output, TaskHandler, TaskT
from gpu_worker.errors import Blocked, Cancelled, Released
from gpu_worker.lifecycle.presence import Presence
from gpu_worker.lifecycle.protection import NoProtection, TaskProtection
from gpu_worker.lifecycle.stopping import ColdStop, StopSignal

logger = logging.getLogger(__name__)


# LocalStack registers a task's token just after it sends the message, later still under load: a young
# message's gone token is asked again for this long there. On AWS a token is valid once its message is
# sent, so a gone token is gone at once (asked twice, a pause apart) and a stopped job's message is
# dropped without the wait.
LOCALSTACK_TOKEN_GRACE_S = 30.0


def token_grace_s(endpoint_url: str | None) -> float:
    """The grace for a gone token: LocalStack's (an endpoint is set) or none (AWS). Pure."""
    return LOCALSTACK_TOKEN_GRACE_S if endpoint_url else 0.0


class Worker(Generic[TaskT]):
    def __init__(
        self,
        name: str,
        queue_urls: Sequence[str],
        handler: TaskHandler[TaskT],
        queue: WorkQueue,
        orchestrator: TaskCallbacks,
        retry: RetryPolicy,
        heartbeat: HeartbeatPolicy,
        stop: StopSignal,
        idle_wait_s: int = 2,
        presence: Presence | None = None,
        take_recheck_s: float = 1.0,
        token_grace_s: float = 30.0,
        protection: TaskProtection | None = None,
        capacity: Callable[[], str | None] | None = None,
        lookahead: LookaheadPolicy | None = None,
        progress: ProgressPolicy | None = None,
    ) -> None:
        if not queue_urls:
            raise ValueError("a worker needs at least one queue")
        self.name = name
        self._queue_urls = tuple(queue_urls)
        self._handler = handler
        self._queue = queue
        self._orchestrator = orchestrator
        self._retry = retry
        self._progress = progress or ProgressPolicy()
        self._max_receives: dict[str, int | None] = {}
        self._heartbeat = heartbeat
        self._stop = stop
        self._idle_wait_s = idle_wait_s
        self._presence = presence
        # Why this worker cannot take a segment now (no free GPU memory), or None.
        self._capacity = capacity
        self._short_of: str | None = None
        self._take_recheck_s = take_recheck_s
        self._token_grace_s = token_grace_s
        # Held from taking a task until the queues are found empty (or the worker stops), so a
        # scale-in picks idle tasks; renewed with each heartbeat.
        self._protection = protection or NoProtection()
        # The next task, taken while this one renders when the backlog is deep (gpu_worker.delivery.lookahead).
        self.lookahead = Lookahead(lookahead or LookaheadPolicy(), queue, self._queue_urls, self)
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
        held: Held | None = None
        idle_from: float | None = None
        if self._presence is not None:
            self._presence.start()
        try:
            while not self._stop.requested.is_set():
                if max_tasks is not None and handled >= max_tasks:
                    why = f"{max_tasks} tasks done"
                    break
                if held is not None and self._outranked(held.message):
                    # Priorities overtake: a higher queue filled while this one waited its turn.
                    self._give_back(held)
                    held = None
                if held is None:
                    if self._lacks_capacity():
                        continue
                    polled = time.time()
                    message = self.dequeue()
                    if message is None:
                        if not self._finishing_now():
                            self._protection.release()
                        idle_from = idle_from or self._idle(polled)
                        continue
                    if idle_from is not None:
                        self._busy(idle_from)
                        idle_from = None
                else:
                    # Its queue time runs until its turn: the attempt records say how long it waited.
                    message = dataclasses.replace(held.message, received_at=time.time())
                self._may_look_ahead = max_tasks is None or handled + 1 < max_tasks
                self.execute(message, waited=held)
                handled += 1
                held = self.lookahead.collect()
        except ColdStop:
            why = "cold stop"
            self.cold_stopped = True
        finally:
            # A task taken early and not started goes back to the queue at once, not at its timeout.
            self._give_back(held or self.lookahead.collect())
            self._finisher.shutdown(wait=True)
            self._protection.release()
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

    def dequeue(self) -> QueueMessage | None:
        """Highest priority first; only the last queue is long-polled, so a busy high queue is never waited past."""
        for position, url in enumerate(self._queue_urls):
            last = position == len(self._queue_urls) - 1
            messages = self._queue.receive(
                url, wait_s=self._idle_wait_s if last else 0, visibility_s=self._heartbeat.visibility_s
            )
            if messages:
                return messages[0]
        return None

    def execute(self, message: QueueMessage, waited: Held | None = None) -> None:
        if waited is not None:
            waited.stop_keeping()
        try:
            task = self._handler.parse(message.body)
        except ValidationError as error:
            self._discard_malformed(message, error)
            return
        what = self._handler.describe(task)
        attempt = Attempt.of(message, prior=task.prior_attempts)
        if waited is not None and waited.keeper is not None and waited.keeper.lost.is_set():
            # Cancelled, superseded, held or gone while it waited for its turn.
            self._after_lost_hold(message, task, what, waited.keeper.lost_hold, attempt)
            return
        if waited is None and self._gone_at_take(message, task, what, attempt):
            return  # (a task taken early was looked at when taken, and kept an eye on since)
        if self._renewed(message, task, what, attempt):
            return
        logger.info("%s: attempt %s", what, attempt.number)
        self._protection.hold()
        self._begin(task)
        keeper = self._keeper(message, task, renew=self._protection.hold)
        keeper.start()
        try:
            if self._may_look_ahead:
                self.lookahead.begin()
            finish = self._handler.start(task, keeper.lost, attempt)
        except BaseException as error:
            keeper.stop()
            self._ended_early(message, task, what, attempt, keeper, error)
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
            self._ended_early(message, task, what, attempt, keeper, error)
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

    def _ended_early(
        self, message: QueueMessage, task: TaskT, what: str, attempt: Attempt, keeper: Keeper, error: BaseException
    ) -> None:
        """A task that raised instead of producing its result: released, handed back, retried or failed."""
        if isinstance(error, ColdStop | Released):
            # A warm stop (SIGTERM: the engine checkpoints and releases; a second one: a cold stop). On
            # its last delivery a release would dead-letter a segment that just checkpointed: it goes
            # back as a new message instead when it saved chunks since it was sent.
            self._end(task, None)
            if isinstance(error, Released):
                logger.info("%s", error)
            if not self._renewed(message, task, what, attempt, ending=True):
                self._release(message, what)
            if isinstance(error, ColdStop):
                raise error
            return
        if isinstance(error, Cancelled):
            self._end(task, None)
            self._after_lost_hold(message, task, what, keeper.lost_hold, attempt)
        elif isinstance(error, Blocked):
            self._end(task, None)
            logger.warning("%s", error)
            self._hand_back(message, task, attempt, what)
        elif isinstance(error, Exception):
            if keeper.lost.is_set():
                self._end(task, None)
                self._after_lost_hold(message, task, what, keeper.lost_hold, attempt)
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
        return not self._gone_at_take(message, task, self._handler.describe(task), attempt)

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

    def _keeper(self, message: QueueMessage, task: TaskT, renew: Callable[[], None] | None = None) -> Keeper:
        """A keeper (not started) of the message, its token and its job's cancel marker and winner."""
        return Keeper(
            self._queue, self._orchestrator, message, task.task_token, self._heartbeat,
            cancelled=lambda: self._handler.cancelled(task), renew=renew, held=lambda: self._handler.held(task),
            superseded=lambda: self._handler.superseded(task), alive=lambda: self._handler.alive(task),
        )  # fmt: skip

    def _gone_at_take(self, message: QueueMessage, task: TaskT, what: str, attempt: Attempt) -> bool:
        """A task of a cancelled job, or whose token is gone (its execution stopped), is dropped unrendered.

        Checked when the message is taken, before any work: a cancelled job's queued segments then
        leave the queues as fast as workers can receive them. The heartbeat comes first: on AWS a
        stopped execution's token answers it with TaskTimedOut/InvalidToken; LocalStack keeps a stopped
        execution RUNNING until each of its waiting tasks is woken, and a heartbeat is what wakes one.
        """
        try:
            self._first_heartbeat(task, attempt)
        except TokenGone as error:
            logger.warning("%s: its token is gone (%s); dropping the message unrendered", what, error.reason)
            self._delete(message)
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
            self._let_go(message, task, what)
            return True
        try:
            held = self._handler.held(task)
        except Exception:
            logger.warning("%s: its tenant's budget could not be read", what, exc_info=True)
            held = None
        if held:
            self._hold_back(message, task, attempt, what, held)
            return True
        return False

    def _hold_back(self, message: QueueMessage, task: TaskT, attempt: Attempt, what: str, why: str) -> None:
        """Its tenant's budget is spent: not rendered now, and not dropped either. The watchdog holds or
        cancels the job within a sweep; until then the task goes round as a new message (no attempt
        spent), and the first worker to take it after the stop finds its token gone. Dropped now, its
        token would never be heard of again (LocalStack keeps a stopped execution running until each of
        its waiting tasks is woken)."""
        logger.warning("%s: %s; handed back unrendered", what, why)
        self._hand_back(message, task, attempt, what, blocked=False)
        self._stop.requested.wait(self._idle_wait_s)

    def _renewed(self, message: QueueMessage, task: TaskT, what: str, attempt: Attempt, ending: bool = False) -> bool:
        """A segment on its last SQS delivery goes back as a new message when its attempts saved chunks,
        or when one of them ended with its worker killed or stopped rather than a failure.

        Killed deliveries must not walk the segment into the dead-letter queue: they are the host's
        fault, not the segment's. The new message carries the progress it was sent with, so only
        further progress forgives its failures, and ProgressPolicy.max_deliveries caps the total.
        `ending`: this delivery is ending in a warm stop (it counts as stopped). Any error: render
        under this one.
        """
        if not task.saves_progress or task.copy_number:
            return False  # a merge saves nothing; a backup copy never holds the token's last word
        try:
            limit = self._receive_limit(message.queue_url)
            if limit is None or message.receive_count < limit:
                return False  # spare the listing: not its last delivery
            saved = self._handler.saved_frames(task)
            sent_with = task.progress_frames
            earlier = range(attempt.number - message.receive_count + 1, attempt.number)  # this message's
            died = len(earlier) - self._handler.failed_attempts(task, earlier) + (1 if ending else 0)
            if not renew_delivery(self._progress, message.receive_count, limit, attempt.number, saved, sent_with, died):
                return False
            prior = attempt.number - 1
            # Progress forgives every attempt so far; without it only those that died are forgiven, so
            # a segment that fails on its own still meets its retry limit.
            forgiven = prior if saved > sent_with else task.forgiven_attempts + died - (1 if ending else 0)
            again = task.resent(prior_attempts=prior, forgiven_attempts=forgiven, progress_frames=saved)
            self._queue.send(message.queue_url, again.wire_json())
        except Exception:
            logger.warning("%s: could not renew its delivery; rendering it under this one", what, exc_info=True)
            return False
        logger.info(
            "%s: delivery %s of %s, %s frames saved (%s when sent), %s of its deliveries killed or stopped: "
            "sent again with a fresh receive count",
            what, message.receive_count, limit, saved, sent_with, died,
        )  # fmt: skip
        self._delete(message)
        return True

    def _receive_limit(self, queue_url: str) -> int | None:
        """The queue's redrive limit (None: it has none), asked once per queue."""
        if queue_url not in self._max_receives:
            self._max_receives[queue_url] = self._queue.max_receive_count(queue_url)
        return self._max_receives[queue_url]

    def _give_back(self, held: Held | None) -> None:
        """A task taken early and never started goes back for another worker at once.

        Taking it spent one of its SQS receives: on its last one a release would dead-letter a task
        nobody tried, so that one goes back as a new message with this delivery not counted.
        """
        if held is None:
            return
        message = held.message
        try:
            limit = self._receive_limit(message.queue_url)
            task = self._handler.parse(message.body) if limit is not None and message.receive_count >= limit else None
        except Exception:
            task = None  # malformed or the limit unknown: released as before, it meets its fate on its turn
        if task is None:
            release(self._queue, held)
            return
        held.stop_keeping()
        what = self._handler.describe(task)
        self._hand_back(message, task, Attempt.of(message, prior=task.prior_attempts), what, blocked=False)

    def _first_heartbeat(self, task: TaskT, attempt: Attempt) -> None:
        """Heartbeat a task just taken; TokenGone only when its token is gone for good.

        LocalStack registers a task's token just after sending its message, and later still under
        load: a 16-worker run saw a token unknown 1 s after its message was taken, and dropping that
        message left its job waiting for ever. So while the message is young (sent less than
        `token_grace_s` ago) a gone token is asked again after growing pauses, unless its job was
        cancelled or another copy committed the segment; an old message's token is asked twice. On
        AWS a token is valid once its message is sent, so a gone one stays gone and this only delays
        dropping a stopped job's young message.
        """
        pause = self._take_recheck_s
        # The message's age by the queue's clock (sent and received stamps), counted on from here.
        age = attempt.received_at - attempt.sent_at if attempt.sent_at else self._token_grace_s
        deadline = time.monotonic() + max(pause, self._token_grace_s - age)
        while True:
            try:
                self._orchestrator.heartbeat(task.task_token)
                return
            except TokenGone:
                if time.monotonic() > deadline or self._ended(task):
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 8.0)

    def _ended(self, task: TaskT) -> bool:
        """Its job was cancelled, or another copy committed its segment: a gone token is gone."""
        try:
            return bool(self._handler.cancelled(task) or self._handler.superseded(task) or self._handler.held(task))
        except Exception:
            return False

    def _let_go(self, message: QueueMessage, task: TaskT, what: str) -> None:
        """Drop a task of a cancelled or lost job; the Map learns of a lost job's task at once.

        A lost job's execution may go on (LocalStack's Distributed Map does not stop at a failed
        item): a token only heartbeated would keep its Map waiting until the watchdog stops it, so
        it is failed, once, before the message goes (a redelivery finds the token closed: TokenGone
        is final). A cancelled job's execution is already stopped: its token is only woken.
        """
        cause = None
        try:
            cause = self._handler.loss_cause(task)
        except Exception:
            logger.warning("%s: the job's failed marker could not be read", what, exc_info=True)
        if cause is None:
            self._wake(task.task_token)
        else:
            try:
                self._orchestrator.task_failure(task.task_token, JOB_LOST_ERROR, cause)
                logger.warning("%s: token failed (%s)", what, JOB_LOST_ERROR)
            except TokenGone as gone:
                logger.info("%s: token already closed (%s)", what, gone.reason)
            except Exception:
                logger.warning("%s: could not fail its token; waking it instead", what, exc_info=True)
                self._wake(task.task_token)
        self._delete(message)

    def _wake(self, token: str | None) -> None:
        """One more heartbeat for a cancelled job's task, so a stopped execution sees it is stopped."""
        if token:
            with contextlib.suppress(Exception):
                self._orchestrator.heartbeat(token)

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
        self._delete(message)

    def _fail(self, message: QueueMessage, task: TaskT, what: str, error: Exception, attempt: int) -> None:
        name, reason = describe(error)
        # Deliveries forgiven for their progress (see _renewed) do not count towards the retry limit.
        last = not retryable(error) or self._retry.is_last(attempt - task.forgiven_attempts)
        logger.error("%s: attempt %s failed (%s: %s)%s", what, attempt, name, reason, "; giving up" if last else "")
        if not isinstance(error, ValidationError | TokenGone):
            self._safely(lambda: self._handler.record_failure(task, name, reason, attempt), what)
        if not last:
            self._safely(lambda: self._queue.change_visibility(message, self._retry.delay_s(attempt)), what)
            return
        with self._counts:
            self.failed += 1
        if task.copy_number:
            # A straggler's backup copy never fails the segment: the original still holds the token.
            logger.warning("%s: backup copy %s gave up; the original carries on", what, task.copy_number)
            self._delete(message)
            return
        cause = self._handler.failure_cause(task, name, reason, attempt)
        # First, so the job's other segments stop now rather than after its notice (fusionfleet.jobs.loss).
        self._safely(lambda: self._handler.job_lost(task, name, cause, attempt), what)
        try:
            self._orchestrator.task_failure(task.task_token, name, cause)
        except TokenGone as gone:
            logger.warning("%s: token already gone (%s)", what, gone.reason)
        # Attempts that reached this message itself; a blocklisted worker's hand-back made a new message
        # carrying the earlier ones, and SQS counts only its own receives towards the redrive.
        received = attempt - task.prior_attempts
        if retryable(error) and self._retry.is_last(received):
            # Exhausted: make it visible so SQS moves it to the DLQ, where it can be inspected.
            self._safely(lambda: self._queue.change_visibility(message, 0), what)
        else:
            # Released again it would be delivered again, rendered again and fail again, over the
            # recorded reason of the job's failure: nobody wants it now that its token has failed.
            self._delete(message)

    def _after_lost_hold(
        self, message: QueueMessage, task: TaskT, what: str, hold: LostHold | None, attempt: Attempt
    ) -> None:
        detail = hold.detail if hold is not None else "no reason recorded"
        if hold is not None and hold.loss is HoldLoss.HELD:
            self._hold_back(message, task, attempt, what, f"stopped: {detail}")
            return
        if hold is not None and hold.loss is HoldLoss.TOKEN_GONE:
            logger.warning("%s: abandoned, its token is gone (%s)", what, detail)
            self._delete(message)
        elif hold is not None and hold.loss is HoldLoss.SUPERSEDED:
            logger.warning("%s: stopped, %s", what, detail)
            self._delete(message)
        elif hold is not None and hold.loss is HoldLoss.JOB_CANCELLED:
            logger.warning("%s: stopped, its job was cancelled or has failed (%s)", what, detail)
            self._let_go(message, task, what)
        else:
            logger.warning("%s: abandoned, the message was redelivered elsewhere (%s)", what, detail)

    def _hand_back(self, message: QueueMessage, task: TaskT, attempt: Attempt, what: str, blocked: bool = True) -> None:
        """Back to the queue as a new message, this delivery not counted: a blocklisted worker's release
        (`blocked`) or an early take's give-back must not walk the task into the dead-letter queue or spend
        its attempts."""
        again = task.resent(attempt.number - 1, task.forgiven_attempts, task.progress_frames)
        try:
            self._queue.send(self._hand_back_queue(message, attempt, blocked), again.wire_json())
        except Exception:
            logger.exception("%s: could not hand it back as a new message; released instead", what)
            self._release(message, what)
            return
        logger.info("%s: handed back for another worker (%s attempts so far)", what, attempt.number - 1)
        self._delete(message)
        if blocked:
            # Not at once: an idle fleet of blocked workers would otherwise pass it round without pause.
            self._stop.requested.wait(self._idle_wait_s)

    def _hand_back_queue(self, message: QueueMessage, attempt: Attempt, blocked: bool) -> str:
        """Where a hand-back goes: a blocklisted worker's retry to the top queue, else where it came from.

        A new message joins the tail of its queue. A task tried before decides its job's fate (the
        poison segment's last attempt goes to another worker this way), and behind a deep backlog the
        tail cost a doomed job's notice a whole backlog's wait (soak: 97 s of 121 s). Taken from the
        head of the highest non-empty queue, it overtakes nothing in the top queue that was there
        then. A fresh task stays in its queue: a blocked worker passes its job's many fresh segments
        on without starving itself of other jobs' work, which it would at the top.
        """
        if blocked and attempt.number > 1 and message.queue_url in self._queue_urls:
            return self._queue_urls[0]
        return message.queue_url

    def _release(self, message: QueueMessage, what: str) -> None:
        logger.warning("%s: released for another worker", what)
        self._safely(lambda: self._queue.change_visibility(message, 0), what)

    def _discard_malformed(self, message: QueueMessage, error: ValidationError) -> None:
        logger.error(
            "message %s is not a task (%s errors); failing its token if it has one",
            message.message_id,
            error.error_count(),
        )
        token = _token_of(message.body)
        if token:
            with contextlib.suppress(TokenGone):
                self._orchestrator.task_failure(token, "MalformedTask", f"the task message is invalid: {error}")
        self._delete(message)

    def _delete(self, message: QueueMessage) -> None:
        try:
            self._queue.delete(message)
        except ReceiptExpired:
            logger.warning("message %s was already redelivered; not deleted", message.message_id)

    @staticmethod
    def _safely(action: Callable[[], object], what: str) -> None:
        try:
            action()
        except Exception:
            logger.exception("%s: bookkeeping failed", what)


def _token_of(body: str) -> str | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    token = value.get("task_token") if isinstance(value, dict) else None
    return token if isinstance(token, str) else None
