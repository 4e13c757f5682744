"""What the worker does to a message on its queue, one verb each (gpu_worker.delivery.settle says which, for
each way a message ends).

- delete: the message is done with (its result taken, or nobody wants it any more);
- give back: visible again at once for another worker, one of its SQS receives spent;
- resend: back as a new message carrying its attempts so far, this delivery not counted, and this
  message deleted, so a task that no worker failed is not walked into the dead-letter queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from fusionfleet.adapters.queues import QueueMessage, ReceiptExpired, WorkQueue

logger = logging.getLogger(__name__)


class QueueActions:
    """The queue actions of one worker on its queues (highest priority first)."""

    def __init__(self, queue: WorkQueue, queue_urls: Sequence[str]) -> None:
        self._queue = queue
        self._queue_urls = tuple(queue_urls)
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

    def change_visibility(self, message: QueueMessage, seconds: int) -> None:
        self._queue.change_visibility(message, seconds)

    def send(self, queue_url: str, body: str) -> None:
        self._queue.send(queue_url, body)

    def resend(self, message: QueueMessage, body: str, attempts_so_far: int, what: str, to_top: bool) -> bool:
        """Back to the queue as a new message (`body`), this one deleted; given back instead when the send
        fails (False). `to_top`: to the highest queue, else where it came from.

        A new message joins the tail of its queue: taken from the head of the highest non-empty queue, a
        task sent to the top overtakes nothing in the top queue that was there then. A fresh task stays in
        its queue: a blocked worker passes its job's many fresh segments on without starving itself of
        other jobs' work, which it would at the top.
        """
        url = self._queue_urls[0] if to_top and message.queue_url in self._queue_urls else message.queue_url
        try:
            self._queue.send(url, body)
        except Exception:
            logger.exception("%s: could not hand it back as a new message; released instead", what)
            self.give_back(message, what)
            return False
        logger.info("%s: handed back for another worker (%s attempts so far)", what, attempts_so_far)
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
