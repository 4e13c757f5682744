"""Fairness within one priority: how many segments of one job may be in flight at once. Pure.

The render queues are first come, first served within a priority, so a job that puts all of its
segments in at once makes a small job that arrives a moment later wait for every one of them. The
Map's `MaxConcurrency` caps a job's segments in flight (queued or rendering). Capped at
`rounds_ahead` × the fleet, a job alone still keeps every worker busy with a segment queued behind
each, and a later job of the same priority waits behind at most that many of its segments (about
`rounds_ahead` segment times, not the big job's whole length); two big jobs share the fleet.
"""

from __future__ import annotations

import math

ROUNDS_AHEAD = 2.0


def fair_concurrency(fleet_workers: int, rounds_ahead: float = ROUNDS_AHEAD) -> int:
    """Segments of one job in flight at once for a fleet of `fleet_workers`."""
    if fleet_workers < 1 or rounds_ahead < 1:
        raise ValueError("a fleet has at least one worker, and a job keeps at least one round in flight")
    return math.ceil(rounds_ahead * fleet_workers)


def batch_window(fleet_workers: int, rounds_ahead: float = ROUNDS_AHEAD) -> int:
    """Items of one batch running at once: as many as one job keeps segments in flight. An item is one
    segment (an image) or a few (a short clip), so the batch holds about `rounds_ahead` rounds of the
    fleet, like any big job, and a job arriving after it waits behind that many, not the whole batch."""
    return fair_concurrency(max(1, fleet_workers), rounds_ahead)
