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


class BadRequest(FusionFleetError):
    """A request that cannot be served as sent (an API's body or query); `problems` lists every reason."""

    def __init__(self, summary: str, problems: tuple[str, ...]) -> None:
        super().__init__(f"{summary}: " + "; ".join(problems))
        self.summary = summary
        self.problems = problems


class ObjectMissing(FusionFleetError):
    """An S3 object that should exist does not."""


class ObjectRefused(FusionFleetError):
    """S3 refused to say whether an object exists (403): the caller's grant does not match the request.

    A HEAD carries no `s3:prefix`, so a role whose ListBucket is scoped by prefix gets 403, not 404,
    for a missing key under its own prefix: callers that built the key from their own scope may read
    it as "not there".
    """


class DeleteFailed(FusionFleetError):
    """S3 refused to delete some objects (DeleteObjects answers 200 and lists them under Errors).

    `failures` holds (key, code, message) for each; the objects are still there.
    """

    def __init__(self, bucket: str, failures: list[tuple[str, str, str]]) -> None:
        shown = "; ".join(f"{key} ({code}: {message})" for key, code, message in failures[:10])
        more = f"; and {len(failures) - 10} more" if len(failures) > 10 else ""
        super().__init__(f"could not delete {len(failures)} object(s) in s3://{bucket}: {shown}{more}")
        self.bucket = bucket
        self.failures = tuple(failures)
        self.keys = tuple(key for key, _code, _message in failures)


class TokenGone(FusionFleetError):
    """A task token timed out or was closed: the callback is final, never retried."""


class SegmentFailed(FusionFleetError):
    """One segment could not be rendered or failed its integrity check.

    `final`: no retry can mend it (the merge gate read a segment's record of its last failed attempt):
    whoever holds the task fails its token at once, with this reason.
    """

    def __init__(self, reason: str, final: bool = False) -> None:
        super().__init__(reason)
        self.final = final


class JobNotFound(FusionFleetError):
    """No job has this id: no job record and no rejection in the work bucket."""


class OperationRefused(FusionFleetError):
    """An operator's action does not apply to the job as it is (cancel an ended job, retry a running one).

    Nothing was changed; the reason says why and what would work.
    """
