"""What the worker does to a message on its queue, one verb each.

- delete: the message is done with (its result taken, or nobody wants it any more);
- give back: visible again at once for another worker, one of its SQS receives spent;
- resend: back as a new message carrying its attempts so far, this delivery not counted, and this
  message deleted, so a task that no worker failed is not walked into the dead-letter queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Generic

from fusionfleet.adapters.queues import QueueMessage, ReceiptExpired, WorkQueue
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.lookahead import TakenEarly
from gpu_worker.delivery.lookahead import give_back as give_back_now
from gpu_worker.delivery.retry import ProgressPolicy, worth_resending
from gpu_worker.delivery.tasks import TaskHandler, TaskT
from gpu_worker.lifecycle.stopping import StopSignal

logger = logging.getLogger(__name__)


class QueueActions(Generic[TaskT]):
    """The queue actions of one worker: its queues (highest priority first) and its role's tasks."""

    def __init__(
        self,
        queue: WorkQueue,
        queue_urls: Sequence[str],
        handler: TaskHandler[TaskT],
        progress: ProgressPolicy,
        stop: StopSignal,
        idle_wait_s: int,
    ) -> None:
        self._queue = queue
        self._queue_urls = tuple(queue_urls)
        self._handler = handler
        self._progress = progress
        self._stop = stop
        self._idle_wait_s = idle_wait_s
        self._max_receives: dict[str, int | None] = {}

    def delete(self, message: QueueMessage) -> None:
        """Done with: a receipt that expired (redelivered elsewhere) leaves the message to its new holder."""
        try:
            self._queue.delete(message)
        except ReceiptExpired:
            logger.warning("message %s was already redelivered; not deleted", message.message_id)

    def give_back(self, message: QueueMessage, what: str) -> None:
        """Visible again at once, for another worker (the log line keeps its old word: tests read it)."""
        logger.warning("%s: released for another worker", what)
        safely(lambda: self._queue.change_visibility(message, 0), what)

    def give_back_taken_early(self, taken: TakenEarly | None) -> None:
        """A task taken early and never started goes back for another worker at once.

        Taking it spent one of its SQS receives: on its last one a give-back would dead-letter a task
        nobody tried, so that one goes back as a new message with this delivery not counted.
        """
        if taken is None:
            return
        message = taken.message
        try:
            limit = self.receive_limit(message.queue_url)
            task = self._handler.parse(message.body) if limit is not None and message.receive_count >= limit else None
        except Exception:
            task = None  # malformed or the limit unknown: given back as before, it meets its fate on its turn
        if task is None:
            give_back_now(self._queue, taken)
            return
        taken.stop_keeping()
        what = self._handler.describe(task)
        self.resend(message, task, Attempt.of(message, prior=task.prior_attempts), what, blocked=False)

    def resend(self, message: QueueMessage, task: TaskT, attempt: Attempt, what: str, blocked: bool = True) -> None:
        """Back to the queue as a new message, this delivery not counted: a blocklisted worker's task
        (`blocked`), or one taken early on its last receive, must not walk the task into the dead-letter queue or spend
        its attempts."""
        again = task.resent(attempt.number - 1, task.forgiven_attempts, task.progress_frames)
        try:
            self._queue.send(self._resend_queue(message, attempt, blocked), again.wire_json())
        except Exception:
            logger.exception("%s: could not hand it back as a new message; released instead", what)
            self.give_back(message, what)
            return
        logger.info("%s: handed back for another worker (%s attempts so far)", what, attempt.number - 1)
        self.delete(message)
        if blocked:
            # Not at once: an idle fleet of blocked workers would otherwise pass it round without pause.
            self._stop.requested.wait(self._idle_wait_s)

    def _resend_queue(self, message: QueueMessage, attempt: Attempt, blocked: bool) -> str:
        """Where a resend goes: a blocklisted worker's retry to the top queue, else where it came from.

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

    def resend_held(self, message: QueueMessage, task: TaskT, attempt: Attempt, what: str, why: str) -> None:
        """Its tenant's budget is spent: not rendered now, and not dropped either. The watchdog holds or
        cancels the job within a sweep; until then the task goes round as a new message (no attempt
        spent), and the first worker to take it after the stop finds its token gone. Dropped now, its
        token would never be heard of again (LocalStack keeps a stopped execution running until each of
        its waiting tasks is woken)."""
        logger.warning("%s: %s; handed back unrendered", what, why)
        self.resend(message, task, attempt, what, blocked=False)
        self._stop.requested.wait(self._idle_wait_s)

    def resent_for_progress(
        self, message: QueueMessage, task: TaskT, what: str, attempt: Attempt, ending: bool = False
    ) -> bool:
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
            limit = self.receive_limit(message.queue_url)
            if limit is None or message.receive_count < limit:
                return False  # spare the listing: not its last delivery
            saved = self._handler.saved_frames(task)
            sent_with = task.progress_frames
            earlier = range(attempt.number - message.receive_count + 1, attempt.number)  # this message's
            died = len(earlier) - self._handler.failed_attempts(task, earlier) + (1 if ending else 0)
            if not worth_resending(
                self._progress, message.receive_count, limit, attempt.number, saved, sent_with, died
            ):
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
        self.delete(message)
        return True

    def receive_limit(self, queue_url: str) -> int | None:
        """The queue's redrive limit (None: it has none), asked once per queue."""
        if queue_url not in self._max_receives:
            self._max_receives[queue_url] = self._queue.max_receive_count(queue_url)
        return self._max_receives[queue_url]


def safely(action: Callable[[], object], what: str) -> None:
    """Bookkeeping whose failure must not end the task's handling: logged, and the handling goes on."""
    try:
        action()
    except Exception:
        logger.exception("%s: bookkeeping failed", what)
