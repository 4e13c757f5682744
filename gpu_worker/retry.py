"""Retry policy as data: how many attempts, how long to wait, and which errors are worth retrying."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.errors import FusionFleetError, JobRejected
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
    """Bad input and a missing engine fail the same way every time: retrying only delays the news."""
    if isinstance(error, EngineFailure):
        return error.retryable
    return not isinstance(error, JobRejected | EngineUnavailable | WorkersBlocklisted)


def describe(error: BaseException) -> tuple[str, str]:
    """(error name, reason) for SendTaskFailure and the segment record."""
    if isinstance(error, EngineFailure):
        return error.name, error.reason
    if isinstance(error, FusionFleetError | EngineError):
        return type(error).__name__, error.reason
    return type(error).__name__, str(error) or repr(error)
