"""A per-job worker blocklist (Deadline's and Flamenco's bad-worker lists): the decisions. Pure.

A worker that fails `after_failures` distinct segments of one job (by its own doing, not the
network's) stops taking that job's segments, so a bad host cannot burn a job's retries. When every
live render worker has been blocklisted for a job for `stranded_grace_s`, nobody is left to render
it: the job fails with that reason rather than waiting forever (the rule chosen over ignoring the
list, which would hand the segment back to a host known to fail it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Failures of the network or of AWS, not of the host's rendering (Python's, urllib3's and botocore's
# names, as the worker records them): they count towards the segment's attempts, where the next try
# may well go through, but not towards the worker's blocklist. A soak worker was listed for one
# poison crash plus a LocalStack connection reset, and the poison job's last attempts then waited
# minutes for the only other worker. WorkersBlocklisted is the list's own verdict, not a failure.
NOT_THE_HOSTS_FAULT = frozenset(
    {
        "ConnectionError", "ConnectionResetError", "ConnectionAbortedError", "ConnectionRefusedError",
        "BrokenPipeError", "TimeoutError", "ProtocolError", "NewConnectionError", "EndpointConnectionError",
        "ConnectionClosedError", "ReadTimeoutError", "ConnectTimeoutError", "ResponseStreamingError",
        "IncompleteReadError", "ClientError", "WorkersBlocklisted",
    }
)  # fmt: skip


@dataclass(frozen=True)
class BlockPolicy:
    after_failures: int = 2  # 0: never blocklist
    # How long "every live worker is listed" must hold before the job fails for want of a worker. Not
    # at once: a worker that stops cleanly deletes its presence record, so one that is only restarting
    # looked gone, and a soak job failed with its one other worker back seconds later. Twice the
    # presence timeout (30 s), so a replacement or restarted worker has beaten at least once by then.
    stranded_grace_s: float = 60.0

    def counts(self, error: str) -> bool:
        """Whether a failed attempt with this error name counts against the worker that made it."""
        return error not in NOT_THE_HOSTS_FAULT

    def blocks(self, failures: int) -> bool:
        """Whether a worker that failed `failures` distinct segments of one job is done with that job."""
        return self.after_failures > 0 and failures >= self.after_failures

    def stranded(self, all_listed_for_s: float) -> bool:
        """Whether a job whose every live worker has been listed this long is left with nobody."""
        return all_listed_for_s >= self.stranded_grace_s


def nobody_left(live_workers: Iterable[str], blocked: Iterable[str]) -> bool:
    """True when there are live render workers and every one of them is blocklisted for the job."""
    live = set(live_workers)
    return bool(live) and live <= set(blocked)
