"""Straggler backup copies: which running segments of a nearly finished job get a second copy. Pure.

MapReduce's backup tasks: when most of a job is done, the segments still running far longer than
their finished peers are rendered a second time by another worker, and the first copy to commit its
output wins (gpu_worker.rendering.commit). One backup per segment, ever: a second straggling copy would only
add load to a fleet that is already short of fast hosts.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fusionfleet.jobs.runs import RunRecord
    from fusionfleet.messages import JobContext


@dataclass(frozen=True)
class BackupPolicy:
    enabled: bool = True
    # A segment is a straggler when its attempt has run more than `factor` × the median time of the
    # job's finished segments…
    factor: float = 2.0
    # …and at least this long: a job of 2-second segments does not copy a segment that took 5 s.
    min_age_s: float = 30.0
    # Only near the end: this share of the segments is done, or at most `last_segments` are left.
    done_fraction: float = 0.75
    last_segments: int = 1


@dataclass(frozen=True)
class SegmentProgress:
    """What the work bucket says about one segment of the job's current run."""

    index: int
    render_s: float | None = None  # done: its winning copy's worker time
    running_since: float | None = None  # epoch seconds: when its current attempt started (None: waiting)
    backup_sent: bool = False


def nearly_done(done: int, total: int, policy: BackupPolicy) -> bool:
    """True near the job's end, where one slow segment decides its finishing time."""
    if total <= 0 or done <= 0 or done >= total:
        return False
    return done / total >= policy.done_fraction or total - done <= policy.last_segments


def straggler_threshold_s(render_times: Sequence[float], policy: BackupPolicy) -> float:
    """How long a running attempt may take before it gets a backup copy."""
    return max(policy.min_age_s, policy.factor * statistics.median(render_times))


def backups_due(segments: Sequence[SegmentProgress], total: int, now: float, policy: BackupPolicy) -> list[int]:
    """The segments to send a backup copy of now, in index order."""
    if not policy.enabled:
        return []
    times = [segment.render_s for segment in segments if segment.render_s is not None]
    if not nearly_done(len(times), total, policy):
        return []
    threshold = straggler_threshold_s(times, policy)
    return sorted(
        segment.index
        for segment in segments
        if segment.render_s is None
        and segment.running_since is not None
        and not segment.backup_sent
        and now - segment.running_since > threshold
    )


@dataclass(frozen=True)
class BackupSent:
    job_id: str
    index: int
    avoid_worker: str
    age_s: float
    threshold_s: float


class Backups(Protocol):
    """What the watchdog asks of a backup sender (fusionfleet.services.backups) for one running job."""

    def sweep(self, context: JobContext, run: RunRecord, now: float) -> list[BackupSent]: ...
