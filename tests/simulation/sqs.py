"""SQS as the workers see it, modelled on the virtual clock: what moto does not hold (issue 43 item 2).

A received message is invisible for the visibility timeout the receive asked for, and comes with a new
receipt handle each time; the old handle no longer works (ChangeMessageVisibility and DeleteMessage
answer ReceiptExpired, as the adapter maps AWS's ReceiptHandleIsInvalid). Its receive count grows by one
per receive; a receive that finds a message already received `max_receive_count` times moves it to the
queue's dead-letter queue instead (SQS's redrive). Two faults beyond that: a message sent late (its
delay), and a message delivered twice (SQS's at-least-once: an in-flight message visible again at once,
so a second worker takes it while the first still works on it). The visibility timeout lapsing mid-work
needs no fault of its own: the clock moves while a worker stalls, and its keeper beats too late.

Every call is a scheduler checkpoint, so the schedule interleaves workers call by call.
"""

from __future__ import annotations

import itertools
from collections import Counter

from fusionfleet.adapters.queues import QueueDepth, QueueMessage
from tests.simulation.scheduler import Scheduler
from tests.support.fakes import Clock, Queue, Queued


class SimQueue:
    """The WorkQueue protocol (fusionfleet.adapters.queues) over in-memory queues on the virtual clock."""

    def __init__(self, scheduler: Scheduler, clock: Clock, faults: Counter[str]) -> None:
        self._scheduler = scheduler
        self._clock = clock
        self._faults = faults
        self.queues: dict[str, Queue] = {}
        self._ids = itertools.count(1)

    def create(self, url: str, max_receive_count: int | None = None, dead_letter_url: str | None = None) -> None:
        self.queues[url] = Queue(max_receive_count, dead_letter_url)

    def receive(self, queue_url: str, wait_s: int, visibility_s: int, max_messages: int = 1) -> list[QueueMessage]:
        self._scheduler.checkpoint(f"sqs.receive {queue_url}")
        queue = self.queues[queue_url]
        now = self._clock()
        taken = queue.receive(queue_url, now, visibility_s, max_messages)
        # The redriven go on to the dead-letter queue (when the queue names one), visible there at once.
        for queued in queue.dead_letters:
            if queue.dead_letter_url is not None:
                self.queues[queue.dead_letter_url].messages.append(queued)
                queued.visible_at = now
            self._faults["sqs_redriven_to_dlq"] += 1
        queue.dead_letters.clear()
        for message in taken:
            if message.receive_count > 1:
                self._faults["sqs_redelivered"] += 1
        return taken

    def delete(self, message: QueueMessage) -> None:
        self._scheduler.checkpoint(f"sqs.delete {message.message_id}")
        queue = self.queues[message.queue_url]
        queue.messages.remove(queue.find(message))

    def change_visibility(self, message: QueueMessage, seconds: int) -> None:
        self._scheduler.checkpoint(f"sqs.change_visibility {message.message_id} {seconds}")
        self.queues[message.queue_url].find(message).visible_at = self._clock() + seconds

    def send(self, queue_url: str, body: str, delay_s: float = 0.0) -> str:
        self._scheduler.checkpoint(f"sqs.send {queue_url}")
        message_id = f"m{next(self._ids)}"
        now = self._clock()
        if delay_s:
            self._faults["sqs_late_delivery"] += 1
        self.queues[queue_url].messages.append(Queued(message_id, body, sent_at=now, visible_at=now + delay_s))
        return message_id

    def depth(self, queue_url: str) -> QueueDepth:
        self._scheduler.checkpoint(f"sqs.depth {queue_url}")
        now = self._clock()
        messages = self.queues[queue_url].messages
        visible = sum(1 for queued in messages if queued.visible_at <= now and queued.receive_count)
        delayed = sum(1 for queued in messages if queued.visible_at > now and not queued.receive_count)
        fresh = sum(1 for queued in messages if queued.visible_at <= now and not queued.receive_count)
        return QueueDepth(visible=visible + fresh, in_flight=len(messages) - visible - fresh - delayed, delayed=delayed)

    def max_receive_count(self, queue_url: str) -> int | None:
        self._scheduler.checkpoint(f"sqs.attributes {queue_url}")
        return self.queues[queue_url].max_receive_count

    # The schedule's side, not the protocol's.
    def duplicate(self, queue_url: str, which: int) -> Queued | None:
        """SQS delivers an in-flight message again (at-least-once): visible at once, its holder unaware."""
        in_flight = [q for q in self.queues[queue_url].messages if q.receive_count and q.visible_at > self._clock()]
        if not in_flight:
            return None
        queued = in_flight[which % len(in_flight)]
        queued.visible_at = self._clock()
        self._faults["sqs_duplicate_delivery"] += 1
        return queued

    def pending(self, queue_url: str) -> list[Queued]:
        return list(self.queues[queue_url].messages)
