"""Retry policy as data: how many attempts, how long to wait, and which errors are worth retrying."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.errors import FusionFleetError, JobRejected, SegmentFailed
from gpu_worker.engines.base import EngineError, EngineUnavailable
from gpu_worker.errors import EngineFailure, WorkersBlocklisted


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    backoff_s: tuple[int, ...] = (2, 10, 60)

    def delay_s(self, attempt: int) -> int:
        """Seconds the message stays invisible after failed attempt number `attempt` (1-based)."""
        return self.backoff_s[min(attempt, len(self.backoff_s)) - 1]

    def is_last(self, attempt: int) -> bool:
        return attempt >= self.max_attempts


def retryable(error: BaseException) -> bool:
    """Bad input, a missing engine and a segment that failed for good fail the same way every time:
    retrying only delays the news."""
    if isinstance(error, EngineFailure):
        return error.retryable
    if isinstance(error, SegmentFailed):
        return not error.final
    return not isinstance(error, JobRejected | EngineUnavailable | WorkersBlocklisted)


def describe(error: BaseException) -> tuple[str, str]:
    """(error name, reason) for SendTaskFailure and the segment record."""
    if isinstance(error, EngineFailure):
        return error.name, error.reason
    if isinstance(error, FusionFleetError | EngineError):
        return type(error).__name__, error.reason
    return type(error).__name__, str(error) or repr(error)


@dataclass(frozen=True)
class ProgressPolicy:
    """When a delivery that saved chunks is forgiven: the message is sent again with a fresh receive count.

    SQS counts every receive towards the dead-letter queue, so kills alone (kill -9, a lost host)
    would dead-letter a segment that advanced each time, or one whose workers were killed before
    its first chunk. A message on its last delivery whose checkpoints advanced since it was sent, or
    one of whose deliveries ended with its worker killed or stopped rather than a failure, is re-sent
    instead (as Kubernetes' pod failure policy ignores disruptions); `max_deliveries` bounds the
    total, so a segment that crashes a little later each time, or kills its host, still ends.
    """

    max_deliveries: int = 12
    # Kills alone (no chunk saved since) buy one more round of deliveries, no more: a segment that takes
    # its whole worker down each time looks the same as a lost host, and must still end (after 5
    # deliveries instead of 3) and tell its job soon.
    max_deliveries_unsaved: int = 4


def worth_resending(
    policy: ProgressPolicy,
    receive_count: int,
    max_receive_count: int | None,
    attempt: int,
    saved: int,
    sent_with: int,
    died: int = 0,
) -> bool:
    """Re-send a message just taken instead of rendering it under its last SQS delivery. Pure.

    `receive_count`: this message's receives; `attempt`: the task's delivery number over all its
    messages; `saved`: frames checkpointed now; `sent_with`: frames checkpointed when it was sent;
    `died`: this message's deliveries that ended without a failure of the segment's own (the worker
    was killed or stopped: a lost host, a reclaimed instance), which are not the segment's fault.
    """
    if max_receive_count is None or receive_count < max_receive_count:
        return False  # not the last delivery: a kill now costs nothing final
    if saved > sent_with:
        return attempt < policy.max_deliveries
    return died > 0 and attempt < policy.max_deliveries_unsaved
