"""Keep a message and its task token while a worker works on it: its visibility extended, its token beaten.

SQS visibility is the liveness signal (a dead worker's message reappears); the Step Functions
heartbeat is the last-resort timeout. Timing is a pure function; the Keeper thread applies it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from types import TracebackType

from fusionfleet.adapters.orchestrator import TaskCallbacks
from fusionfleet.adapters.queues import QueueMessage, ReceiptExpired, WorkQueue
from fusionfleet.errors import TokenGone
from fusionfleet.jobs.cost import ALIVE_EVERY_S
from fusionfleet.jobs.timeouts import DEFAULT_VISIBILITY_S
from gpu_worker.delivery.facts import Standing

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeepPolicy:
    visibility_s: int = DEFAULT_VISIBILITY_S
    # Extend when a third of the visibility is left: two chances before the message reappears.
    fraction: float = 1 / 3
    # How often the job's cancel marker is looked at while a segment renders: a cancelled job's
    # worker stops within this, not at the next beat minutes later.
    cancel_check_s: float = 2.0

    def interval_s(self) -> float:
        return max(1.0, self.visibility_s * self.fraction)

    def tick_s(self) -> float:
        """How often the keeper wakes: for the next beat or the next cancel check, whichever comes first."""
        return min(self.interval_s(), max(0.2, self.cancel_check_s))


class LossKind(Enum):
    """Why a worker lost its hold on a message; the loop decides what to do with it by this type."""

    TOKEN_GONE = "the task token is gone"  # final: the job moved on or timed out; drop the message
    REDELIVERED = "the message was redelivered"  # another worker holds it now; leave it alone
    JOB_CANCELLED = "the job was cancelled"  # final: an operator cancelled it; drop the message
    SUPERSEDED = "another copy won"  # final: a straggler's other copy committed the segment; drop it
    HELD = "its tenant's budget is spent"  # not final: resend it; the job is held, to resume


@dataclass(frozen=True)
class Loss:
    kind: LossKind
    detail: str  # what the API said, for the log
    # JOB_CANCELLED: what the task's token fails with (Standing.token_cause); None: it is only woken.
    token_cause: str | None = None

    def __str__(self) -> str:
        return f"{self.kind.value} ({self.detail})"


class Keeper:
    """A background thread that extends the message's visibility and beats the task token.

    `lost` is set when either can no longer be kept (token closed, receipt expired): the work in
    hand is then pointless and the caller stops it.
    """

    def __init__(
        self,
        queue: WorkQueue,
        orchestrator: TaskCallbacks,
        message: QueueMessage,
        token: str | None,
        policy: KeepPolicy,
        standing: Callable[[], Standing] | None = None,
        on_keep: Callable[[], None] | None = None,
        alive: Callable[[], None] | None = None,
    ) -> None:
        self._queue = queue
        self._orchestrator = orchestrator
        self._message = message
        self._token = token
        self._policy = policy
        # What the task's job and records say of it (TaskHandler.standing): its job cancelled or failed,
        # another copy of the segment committed first (the loser stops within seconds rather than at the
        # next beat, when its closed token would tell it the same), its tenant's budget spent (work stops
        # within seconds of the budget's end). Looked at every `cancel_check_s`.
        self._standing = standing
        # Called at each beat that kept the message: what else must last as long as the hold does
        # (ECS task scale-in protection).
        self._on_keep = on_keep
        # Called every ALIVE_EVERY_S while the message is held: the attempt record's `alive_at`, what
        # a killed worker's attempt is billed up to (fusionfleet.jobs.cost).
        self._alive = alive
        self._stop = threading.Event()
        self.lost = threading.Event()
        self.loss: Loss | None = None
        self._thread = threading.Thread(target=self._run, name=f"keeper-{message.message_id[:8]}", daemon=True)

    def _run(self) -> None:
        next_beat = time.monotonic() + self._policy.interval_s()
        next_alive = time.monotonic() + ALIVE_EVERY_S
        while not self._stop.wait(self._policy.tick_s()):
            if self._alive is not None and time.monotonic() >= next_alive:
                next_alive = time.monotonic() + ALIVE_EVERY_S
                self._probe_alive()
            standing = self._look()
            if standing.stopped:
                marker = "the job's cancel or failed marker is set"
                self._lose(Loss(LossKind.JOB_CANCELLED, marker, token_cause=standing.token_cause))
                return
            if standing.superseded:
                self._lose(Loss(LossKind.SUPERSEDED, standing.superseded))
                return
            if standing.held:
                self._lose(Loss(LossKind.HELD, standing.held))
                return
            if time.monotonic() < next_beat:
                continue
            try:
                next_beat = time.monotonic() + self._policy.interval_s()
                self._queue.change_visibility(self._message, self._policy.visibility_s)
                if self._token:
                    self._orchestrator.heartbeat(self._token)
                if self._on_keep is not None:
                    self._on_keep()
            except TokenGone as error:
                self._lose(Loss(LossKind.TOKEN_GONE, error.reason))
                return
            except ReceiptExpired as error:
                self._lose(Loss(LossKind.REDELIVERED, f"receipt expired: {error}"))
                return
            except Exception:
                # A transient API error: try again at the next beat, the visibility still has slack.
                logger.exception("heartbeat for message %s failed", self._message.message_id)

    def _look(self) -> Standing:
        """The look's own errors never cost a beat: the hold matters more than a prompt cancel."""
        if self._standing is None:
            return Standing()
        try:
            return self._standing()
        except Exception:
            logger.warning("cancel check for message %s failed", self._message.message_id, exc_info=True)
            return Standing()

    def _probe_alive(self) -> None:
        assert self._alive is not None
        try:
            self._alive()
        except Exception:
            logger.warning("alive stamp for message %s failed", self._message.message_id, exc_info=True)

    def _lose(self, loss: Loss) -> None:
        self.loss = loss
        logger.warning("lost hold of message %s: %s", self._message.message_id, loss)
        self.lost.set()

    def start(self) -> None:
        """Begin keeping the message: extend, beat and watch until `stop`."""
        self._thread.start()

    def stop(self) -> None:
        """Stop keeping it (the work in hand ended); waits for a beat in flight."""
        self._stop.set()
        self._thread.join(timeout=30)

    def __enter__(self) -> Keeper:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
