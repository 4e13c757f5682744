"""Take the next task while the current one renders, so the GPU does not wait on the queue between segments.

Between two segments a worker otherwise receives a message, beats its token, reads the cancel marker
and the segment's records before its engine starts again; all of that can happen while the engine is
still busy with the segment in hand. Only when the queues hold at least `min_backlog` visible
messages: idle workers long-poll these queues, so visible messages mean no worker is idle now and
taking one early delays nobody, while with fewer a worker that frees up first should have it.

The message taken early gets a taken task's checks at once (its token is alive, its job not cancelled),
is kept as any other (a Keeper extends its visibility, beats its token and watches the cancel marker)
until its turn comes, and is given back for another worker if this one stops before starting it or if
higher-priority work arrived meanwhile. The finished task's finish then runs in the background, beside
the next task's render: the engine's part ends with the segment's frames encoded, and the join, check,
upload, commit, callback and delete need no engine (gpu_worker.rendering.encoded_segment). Its message is kept until
then, a failure there is retried like any other, and a worker that dies meanwhile leaves a message
whose next taker renders it again or answers with the committed result.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from fusionfleet.adapters.queues import QueueMessage, WorkQueue
from gpu_worker.delivery.keeper import Keeper

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LookaheadPolicy:
    min_backlog: int = 0  # 0: never take a task early
    # Look only this long after the task in hand began. An idle worker long-polls one queue at a time,
    # so a message can sit visible for up to one poll while workers are idle; a job meeting as many
    # idle workers as it has segments lost half of them to early takes without it (6 of 12,
    # benchmarks/results/fleet-overhead-after.json). After a poll's time visible messages do mean
    # that no worker is idle.
    settle_s: float = 0.0

    def worth_taking(self, visible: int) -> bool:
        """Pure: take the next task early only from a backlog this deep."""
        return self.min_backlog > 0 and visible >= self.min_backlog


class EarlyTaker(Protocol):
    """What taking a task early needs from the worker: the worker's own receive and checks."""

    def take(self) -> QueueMessage | None:
        """The next message, as the worker receives one (highest priority first), or None."""
        ...

    def still_wanted(self, message: QueueMessage) -> bool:
        """The checks a task gets when taken (token alive, job not cancelled); False: it was dropped."""
        ...

    def keeper_until_turn(self, message: QueueMessage) -> Keeper | None:
        """A keeper (not started) to hold the message until its turn, or None for one that needs none."""
        ...


@runtime_checkable
class PreparesEarly(Protocol):
    """A taker that prepares for a task taken early while the current one runs."""

    def taken_early(self, message: QueueMessage) -> None:
        """Kept until its turn: prepare for it meanwhile (the next segment's decoder starts)."""
        ...


@dataclass
class TakenEarly:
    """A message taken early and the keeper holding it until its turn."""

    message: QueueMessage
    keeper: Keeper | None

    def stop_keeping(self) -> None:
        if self.keeper is not None:
            self.keeper.stop()


class Lookahead:
    """One task taken early, in a background thread; `collect` hands it over (or None)."""

    def __init__(
        self,
        policy: LookaheadPolicy,
        queue: WorkQueue,
        queue_urls: Sequence[str],
        taker: EarlyTaker,
    ) -> None:
        self._policy = policy
        self._queue = queue
        self._queue_urls = tuple(queue_urls)
        self._taker = taker
        self._thread: threading.Thread | None = None
        self._taken: TakenEarly | None = None
        self._done = threading.Event()  # the task in hand ended: a look still settling gives up
        self.taken = 0  # tasks taken early, for the log and the tests

    @property
    def enabled(self) -> bool:
        return self._policy.min_backlog > 0

    def begin(self) -> None:
        """Look for the next task now, in the background (no-op when off or already looking)."""
        if not self.enabled or self._thread is not None:
            return
        self._done.clear()
        self._thread = threading.Thread(target=self._look, name="lookahead", daemon=True)
        self._thread.start()

    def collect(self) -> TakenEarly | None:
        """The task taken early, if one was; waits for a look still under way (at most one receive), and
        stops one still settling."""
        if self._thread is not None:
            self._done.set()
            self._thread.join()
            self._thread = None
        taken, self._taken = self._taken, None
        return taken

    def _look(self) -> None:
        if self._policy.settle_s > 0 and self._done.wait(self._policy.settle_s):
            return
        try:
            visible = sum(self._queue.depth(url).visible for url in self._queue_urls)
            if not self._policy.worth_taking(visible):
                return
            message = self._taker.take()
            if message is None or not self._taker.still_wanted(message):
                return
            keeper = self._taker.keeper_until_turn(message)
            if keeper is not None:
                keeper.start()
            self._taken = TakenEarly(message, keeper)
            self.taken += 1
            logger.info("took message %s early (%s visible)", message.message_id[:8], visible)
            if isinstance(self._taker, PreparesEarly):
                self._taker.taken_early(message)
        except Exception:
            # Taking early is an optimisation: a failed look leaves the next task to the usual receive.
            logger.warning("looking ahead failed", exc_info=True)


def give_back(queue: WorkQueue, taken: TakenEarly | None) -> None:
    """Give a task taken early back to the queue at once, for another worker."""
    if taken is None:
        return
    taken.stop_keeping()
    with contextlib.suppress(Exception):
        queue.change_visibility(taken.message, 0)
    logger.info("released message %s taken early", taken.message.message_id[:8])
