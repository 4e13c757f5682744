"""The worker loop, in rq's shape: check for stop → take → run (kept alive) → decide → settle.

A message is deleted only after Step Functions took the result (or the token is gone for good), so
a worker that dies at any point loses nothing: the message reappears and another worker takes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic

from pydantic import ValidationError

from fusionfleet.adapters.orchestrator import TaskCallbacks
from fusionfleet.adapters.queues import QueueMessage, WorkQueue
from fusionfleet.errors import TokenGone
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.facts import Alive, Names, Next, Progress, Standing
from gpu_worker.delivery.keeper import Keeper, KeepPolicy
from gpu_worker.delivery.lookahead import Lookahead, LookaheadPolicy, TakenEarly
from gpu_worker.delivery.lookahead import give_back as give_back_now
from gpu_worker.delivery.outcomes import (
    Delivery,
    Finished,
    GiveBack,
    Lost,
    Malformed,
    Raised,
    Rules,
    Taken,
    Unstarted,
    decide,
    ended_well,
    progress_matters,
)
from gpu_worker.delivery.queue_actions import QueueActions
from gpu_worker.delivery.retry import ProgressPolicy, RetryPolicy
from gpu_worker.delivery.settle import Settler
from gpu_worker.delivery.tasks import Output, TaskHandler, TaskT
from gpu_worker.delivery.token_actions import TokenActions
from gpu_worker.errors import GivenBack as GivenBackError
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
        self._rules = Rules(retry, progress or ProgressPolicy())
        self._queue_actions = QueueActions(queue, self._queue_urls)
        self._tokens = TokenActions(orchestrator, handler, take_recheck_s, token_grace_s)
        self._settler = Settler(self._queue_actions, self._tokens, orchestrator, handler, stop.requested, idle_wait_s)
        self._finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="finish")
        self._finishing: Future[None] | None = None
        self._may_look_ahead = False
        self.cold_stopped = False

    @property
    def completed(self) -> int:
        return self._settler.completed

    @property
    def failed(self) -> int:
        """Tasks this worker gave up on (their token failed, or a backup copy's message dropped)."""
        return self._settler.failed

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
                    self._give_back_unstarted(taken)
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
            self._give_back_unstarted(taken or self.lookahead.collect())
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
        """One message from take to its end: its checks, its run, then decide how it ends and settle that."""
        if waited is not None:
            waited.stop_keeping()
        try:
            task = self._handler.parse(message.body)
        except ValidationError as error:
            self._settler.settle(
                message, None, Names(f"message {message.message_id}"), decide(None, None, Malformed(error))
            )
            return
        names = self._handler.describe(task)
        attempt = Attempt.of(message, prior=task.prior_attempts)
        delivery = self._delivery(message, attempt)
        if waited is not None and waited.keeper is not None and waited.keeper.lost.is_set():
            # Cancelled, superseded, held or gone while it waited for its turn.
            self._settler.settle(message, task, names, decide(task, delivery, Lost(waited.keeper.loss), self._rules))
            return
        # A task taken early was looked at when taken, and kept an eye on since: only its progress is read now.
        taken = self._take_checks(task, names, attempt, delivery, look=waited is None, progress=True)
        outcome = decide(task, delivery, taken, self._rules)
        if outcome is not None and self._settler.settle(message, task, names, outcome):
            return
        self._run(message, task, names, attempt, delivery)

    def _run(self, message: QueueMessage, task: TaskT, names: Names, attempt: Attempt, delivery: Delivery) -> None:
        logger.info("%s: attempt %s", names.what, attempt.number)
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
            self._raised(message, task, names, delivery, keeper, error)
            return
        if self.lookahead.enabled:
            # The engine is free: the segment's join, check, upload, callback and delete go on in the
            # background while the next one renders. One at a time, so finishing never falls behind.
            self._await_finishing()
            self._finishing = self._finisher.submit(self._complete, message, task, names, delivery, keeper, finish)
        else:
            self._complete(message, task, names, delivery, keeper, finish)

    def _complete(
        self,
        message: QueueMessage,
        task: TaskT,
        names: Names,
        delivery: Delivery,
        keeper: Keeper,
        finish: Callable[[], Output],
    ) -> None:
        """Finish a task whose engine part is done, still holding its message; then settle it."""
        try:
            output = finish()
        except BaseException as error:
            keeper.stop()
            self._raised(message, task, names, delivery, keeper, error)
            return
        keeper.stop()
        self._settler.settle(message, task, names, decide(task, delivery, Finished(output), self._rules))
        self._end(task, True)

    def _raised(
        self, message: QueueMessage, task: TaskT, names: Names, delivery: Delivery, keeper: Keeper, error: BaseException
    ) -> None:
        """A task that raised instead of producing its result: decided and settled; a cold stop goes on up."""
        if not isinstance(error, Exception | ColdStop):
            raise error
        # A warm stop on the task's last delivery may renew it (outcomes._renewed): its progress is read.
        progress = self._progress(task, names, delivery) if isinstance(error, ColdStop | GivenBackError) else None
        outcome = decide(task, delivery, Raised(error, keeper.lost.is_set(), keeper.loss, progress), self._rules)
        self._end(task, ended_well(outcome))
        self._settler.settle(message, task, names, outcome)
        if isinstance(error, ColdStop):
            raise error

    def _await_finishing(self) -> None:
        if self._finishing is not None:
            with contextlib.suppress(Exception):  # its own errors are handled where it ran
                self._finishing.result()
            self._finishing = None

    def _finishing_now(self) -> bool:
        return self._finishing is not None and not self._finishing.done()

    def still_wanted(self, message: QueueMessage) -> bool:
        """The checks of a task just taken, made for one taken early as it is taken: False when it ended."""
        try:
            task = self._handler.parse(message.body)
        except ValidationError:
            return True  # discarded, with its token failed, when its turn comes
        names = self._handler.describe(task)
        attempt = Attempt.of(message, prior=task.prior_attempts)
        delivery = self._delivery(message, attempt)
        taken = self._take_checks(task, names, attempt, delivery, look=True, progress=False)
        outcome = decide(task, delivery, taken, self._rules)
        return outcome is None or not self._settler.settle(message, task, names, outcome)

    def taken_early(self, message: QueueMessage) -> None:
        """A task taken early starts next: its handler prepares for it (a render starts its decoder)."""
        try:
            task = self._handler.parse(message.body)
            self._handler.note(task, Next())
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

    def _give_back_unstarted(self, taken: TakenEarly | None) -> None:
        """A task taken early and never started goes back for another worker at once (or, on its last
        receive, as a new message: outcomes.decide)."""
        if taken is None:
            return
        message = taken.message
        try:
            task = self._handler.parse(message.body)
            limit = self._queue_actions.receive_limit(message.queue_url)
        except Exception:
            give_back_now(self._queue, taken)  # malformed or the limit unknown: it meets its fate on its turn
            return
        delivery = Delivery(Attempt.of(message, prior=task.prior_attempts).number, message.receive_count, limit)
        outcome = decide(task, delivery, Unstarted(), self._rules)
        if isinstance(outcome, GiveBack):
            give_back_now(self._queue, taken)
            return
        taken.stop_keeping()
        self._settler.settle(message, task, self._handler.describe(task), outcome)

    def _keeper(self, message: QueueMessage, task: TaskT, on_keep: Callable[[], None] | None = None) -> Keeper:
        """A keeper (not started) of the message, its token and its job's cancel marker and winner."""
        return Keeper(
            self._queue, self._orchestrator, message, task.task_token, self._keep,
            standing=lambda: self._handler.standing(task), on_keep=on_keep,
            alive=lambda: self._handler.note(task, Alive()),
        )  # fmt: skip

    def _delivery(self, message: QueueMessage, attempt: Attempt) -> Delivery:
        try:
            limit = self._queue_actions.receive_limit(message.queue_url)
        except Exception:
            logger.warning("the redrive limit of %s could not be read", message.queue_url, exc_info=True)
            limit = None  # then no delivery counts as the last: none is renewed, it renders under this one
        return Delivery(attempt.number, message.receive_count, limit)

    def _take_checks(
        self, task: TaskT, names: Names, attempt: Attempt, delivery: Delivery, look: bool, progress: bool
    ) -> Taken:
        """What decide needs of a task just taken, read in order until one ends it. `look`: beat its token and
        read its job's markers; `progress`: read its progress when it matters.

        Checked when the message is taken, before any work: a cancelled job's queued segments then leave
        the queues as fast as workers can receive them. The heartbeat comes first: on AWS a stopped
        execution's token answers it with TaskTimedOut/InvalidToken; LocalStack keeps a stopped execution
        RUNNING until each of its waiting tasks is woken, and a heartbeat is names wakes one.
        """
        what = names.what
        if look:
            try:
                self._tokens.first_beat(task, attempt)
            except TokenGone as error:
                return Taken(token_gone=error.reason)
            except Exception:
                # A transient API error: the keeper beats again soon, and a gone token is found then.
                logger.warning("%s: the first heartbeat failed", what, exc_info=True)
        progress_of = delivery.earlier if progress and progress_matters(task, delivery) else None
        if not look and progress_of is None:
            return Taken()
        try:
            standing = self._handler.standing(task, progress_of)
        except Exception:
            # Its job's markers, its budget or its progress: rendered under this delivery (the keeper looks again).
            logger.warning("%s: its job's markers or its progress could not be read", what, exc_info=True)
            return Taken()
        if not look:
            standing = Standing(progress=standing.progress)  # looked at when taken early, and watched since
        return Taken(standing=standing)

    def _progress(self, task: TaskT, names: Names, delivery: Delivery) -> Progress | None:
        """The task's progress, read only on its last delivery (outcomes.progress_matters); None if unread."""
        if not progress_matters(task, delivery):
            return None
        try:
            return self._handler.standing(task, delivery.earlier).progress
        except Exception:
            logger.warning("%s: could not renew its delivery; rendering it under this one", names.what, exc_info=True)
            return None

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
