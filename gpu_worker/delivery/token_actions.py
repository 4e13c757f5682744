"""What the worker says to a task's token besides its result: the first beat of a task just taken,
one more beat to wake a stopped execution, and the failure of a lost job's task or a malformed message.

The token's verbs: beat (SendTaskHeartbeat), succeed and fail (the loop reports a task's own result).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import Generic

from fusionfleet.adapters.orchestrator import TaskCallbacks
from fusionfleet.adapters.queues import QueueMessage
from fusionfleet.errors import TokenGone
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.tasks import TaskHandler, TaskT

logger = logging.getLogger(__name__)


# The error a task dropped for its lost job fails its token with (Standing.token_cause says the cause).
JOB_LOST_ERROR = "JobLost"

# LocalStack registers a task's token just after it sends the message, later still under load: a young
# message's gone token is asked again for this long there. On AWS a token is valid once its message is
# sent, so a gone token is gone at once (asked twice, a pause apart) and a stopped job's message is
# dropped without the wait.
LOCALSTACK_TOKEN_GRACE_S = 30.0


def token_grace_s(endpoint_url: str | None) -> float:
    """The grace for a gone token: LocalStack's (an endpoint is set) or none (AWS). Pure."""
    return LOCALSTACK_TOKEN_GRACE_S if endpoint_url else 0.0


class TokenActions(Generic[TaskT]):
    def __init__(
        self, orchestrator: TaskCallbacks, handler: TaskHandler[TaskT], take_recheck_s: float, token_grace_s: float
    ) -> None:
        self._orchestrator = orchestrator
        self._handler = handler
        self._take_recheck_s = take_recheck_s
        self._token_grace_s = token_grace_s

    def first_beat(self, task: TaskT, attempt: Attempt) -> None:
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
            standing = self._handler.standing(task)
            return bool(standing.stopped or standing.superseded or standing.held)
        except Exception:
            return False

    def answer_stopped_job(self, task: TaskT, what: str, cause: str | None) -> None:
        """The token of a cancelled or lost job's task, before its message is deleted: the Map learns of a
        lost job's task at once.

        A lost job's execution may go on (LocalStack's Distributed Map does not stop at a failed
        item): a token only heartbeated would keep its Map waiting until the watchdog stops it, so
        it is failed with `cause`, once, before the message goes (a redelivery finds the token closed:
        TokenGone is final). A cancelled job's execution is already stopped (`cause` None): its token is
        only woken.
        """
        if cause is None:
            self.beat(task.task_token)
            return
        try:
            self._orchestrator.task_failure(task.task_token, JOB_LOST_ERROR, cause)
            logger.warning("%s: token failed (%s)", what, JOB_LOST_ERROR)
        except TokenGone as gone:
            logger.info("%s: token already closed (%s)", what, gone.reason)
        except Exception:
            logger.warning("%s: could not fail its token; waking it instead", what, exc_info=True)
            self.beat(task.task_token)

    def beat(self, token: str | None) -> None:
        """One more heartbeat for a cancelled job's task, so a stopped execution sees it is stopped."""
        if token:
            with contextlib.suppress(Exception):
                self._orchestrator.heartbeat(token)

    def fail_malformed(self, message: QueueMessage, detail: str, cause: str) -> None:
        """A message that is not a task: its token, if it names one, failed with `cause`."""
        logger.error("message %s is not a task (%s); failing its token if it has one", message.message_id, detail)
        token = _token_of(message.body)
        if token:
            with contextlib.suppress(TokenGone):
                self._orchestrator.task_failure(token, "MalformedTask", cause)


def _token_of(body: str) -> str | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    token = value.get("task_token") if isinstance(value, dict) else None
    return token if isinstance(token, str) else None
