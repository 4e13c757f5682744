"""One delivery of a task to a worker: which attempt it is and how long it waited in the queue.

Taken from the queue message once, at the loop's edge; the render path never sees SQS.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.adapters.queues import QueueMessage


@dataclass(frozen=True)
class Attempt:
    number: int = 1
    sent_at: float = 0.0  # epoch seconds: when the orchestrator sent the task (0 when unknown)
    received_at: float = 0.0  # epoch seconds: when this worker took it

    @classmethod
    def of(cls, message: QueueMessage, prior: int = 0) -> Attempt:
        """`prior`: attempts made through earlier messages of the same task (see RenderTask.prior_attempts)."""
        return cls(number=prior + message.receive_count, sent_at=message.sent_at, received_at=message.received_at)

    @property
    def queued_s(self) -> float:
        """Seconds from the task being sent to a worker taking it (0 when the send time is unknown)."""
        return round(max(0.0, self.received_at - self.sent_at), 3) if self.sent_at else 0.0
