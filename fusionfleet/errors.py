"""Domain exceptions. Each carries a `reason` a user can act on; adapters translate SDK errors into these."""

from __future__ import annotations


class FusionFleetError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class JobRejected(FusionFleetError):
    """The job cannot start: its manifest or media is wrong. Nothing was rendered, nothing deleted."""

    def __init__(self, reason: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.problems = problems or (reason,)


class InputRejected(JobRejected):
    """A user-supplied media file is not acceptable (format, size, content)."""


class MediaError(FusionFleetError):
    """ffmpeg or the decoder failed on media the system produced or already accepted."""


class ObjectMissing(FusionFleetError):
    """An S3 object that should exist does not."""


class TokenGone(FusionFleetError):
    """A task token timed out or was closed: the callback is final, never retried."""


class SegmentFailed(FusionFleetError):
    """One segment could not be rendered or failed its integrity check."""


class JobNotFound(FusionFleetError):
    """No job has this id: no job record and no rejection in the work bucket."""


class OperationRefused(FusionFleetError):
    """An operator's action does not apply to the job as it is (cancel an ended job, retry a running one).

    Nothing was changed; the reason says why and what would work.
    """
