"""The worker's own exceptions, shared by the loop, the render path and the engine host.

They live apart so that every module of the render path can raise or catch them while the
modules themselves depend on each other one way only.
"""

from __future__ import annotations

from fusionfleet.errors import FusionFleetError


class ConfigError(FusionFleetError):
    """The worker cannot start: a required setting is missing or invalid."""


class Cancelled(Exception):
    """The hold on the message was lost (token closed, receipt expired) or a stop came."""


class Drained(Exception):
    """A warm stop was asked for: the chunks done so far are saved, the rest is left for another worker."""

    def __init__(self, next_frame: int) -> None:
        super().__init__(f"stopped before frame {next_frame}")
        self.next_frame = next_frame


class GivenBack(Exception):
    """A warm stop: the segment was checkpointed and should go back to the queue at once."""


class Blocked(Exception):
    """This worker is blocklisted for the task's job: the task goes back, not counted as an attempt."""


class WorkersBlocklisted(FusionFleetError):
    """Every live render worker is blocklisted for the job: nobody is left to render its segment."""


class EngineFailure(FusionFleetError):
    """The engine process failed an attempt; carries the child's error name and whether a retry can help."""

    def __init__(self, name: str, reason: str, retryable: bool = True) -> None:
        super().__init__(reason)
        self.name = name
        self.retryable = retryable
