"""Where a job's seconds went (benchmarks/fleet_overhead.py's accounting): the stages outside the engine,
each measured on its own, the idle time the workers logged, and what no stage names. Pure.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchmarks.throughput import percentile
from fusionfleet.messages import SegmentRecord

# The stages outside the engine, in the order a job meets them (the table's and the picture's order).
STAGES = (
    "upload",
    "slicer",
    "first_dispatch",
    "first_queue_wait",
    "segment_setup_encode",
    "segment_finish",
    "between_segments",
    "workers_idle",
    "to_merge",
    "merge",
    "notice",
    "client_wait",
    "download",
)


@dataclass(frozen=True)
class ClientTimes:
    """Epoch seconds the benchmark saw on its side of the job."""

    submit_began: float
    submit_done: float  # media and manifest uploaded
    execution_started: float
    notice_at: float  # the final notice arrived on a subscribed queue
    wait_done: float  # `Client.wait` returned
    downloaded: float


IDLE_FROM = re.compile(r"worker (\S+) idle from (\d+(?:\.\d+)?)")
TOOK_WORK = re.compile(r"worker (\S+) took work at (\d+(?:\.\d+)?), idle from (\d+(?:\.\d+)?)")
Stretches = dict[str, list[tuple[float, float | None]]]


def idle_stretches(lines: Iterable[str], names: Iterable[str]) -> Stretches:
    """Each named worker's stretches with its queues empty, as it logged them: (from, to), `to` None while
    still idle. Pure."""
    wanted = set(names)
    found: Stretches = {name: [] for name in wanted}
    for line in lines:
        if (took := TOOK_WORK.search(line)) is not None and took[1] in wanted:
            stretches = found[took[1]]
            began = float(took[3])
            stretches[:] = [s for s in stretches if not (s[1] is None and s[0] == began)]
            stretches.append((began, float(took[2])))
        elif (idle := IDLE_FROM.search(line)) is not None and idle[1] in wanted:
            found[idle[1]].append((float(idle[2]), None))
    return found


def idle_seconds(stretches: Stretches, start: float, end: float) -> float:
    """Worker-seconds of `stretches` within [start, end] (an open stretch lasts past `end`). Pure."""
    return sum(
        max(0.0, min(end, to if to is not None else end) - max(start, began))
        for own in stretches.values()
        for began, to in own
    )


def account(
    times: ClientTimes, records: list[SegmentRecord], timings: dict[str, Any], workers: int, idle: Stretches
) -> dict[str, Any]:
    """Where a job's seconds went: its stages outside the engine and their sum with the engine. Pure.

    Per-segment costs in the render phase are worker-seconds, shown divided by the fleet's size (the
    wall time they cost when spread evenly), and so is the workers' idle time in the render phase (the
    dispatch's stagger and the last round's imbalance), measured from the stretches each worker logged
    with its queues empty (`idle`). What the engine, the stages and the idle time do not fill, or fill
    twice, is the unaccounted remainder.
    """
    ordered = sorted(records, key=lambda r: r.started_at)
    sent = sorted(r.started_at - r.queued_s for r in records)
    first_start = ordered[0].started_at
    last_end = max(r.finished_at for r in records)
    render = last_end - first_start
    engine = sum(r.engine_s for r in records)
    setup = sum(max(0.0, (r.rendered_at or r.finished_at) - r.started_at - r.engine_s) for r in records)
    # A worker that looks ahead finishes a segment while it renders the next: that part costs no wall time.
    finish = sum(r.finished_at - r.rendered_at for r in records if r.rendered_at) - _overlaps(records)
    gaps = _gaps_between_segments(records)
    merge_started = float(timings["merge_started_at"])
    merge_s = float(timings["merge_s"])
    stages = {
        "upload": times.submit_done - times.submit_began,
        "slicer": times.execution_started - times.submit_done,
        "first_dispatch": sent[0] - times.execution_started,
        "first_queue_wait": first_start - sent[0],
        "segment_setup_encode": setup / workers,
        "segment_finish": finish / workers,
        "between_segments": gaps / workers,
        "workers_idle": idle_seconds(idle, first_start, last_end) / workers,
        "to_merge": merge_started - last_end,
        "merge": merge_s,
        "notice": times.notice_at - (merge_started + merge_s),
        "client_wait": times.wait_done - times.notice_at,
        "download": times.downloaded - times.wait_done,
    }
    end_to_end = times.downloaded - times.submit_began
    return {
        "segments": len(records),
        "workers_seen": len({r.worker for r in records}),
        "render_s": round(render, 3),
        "end_to_end_s": round(end_to_end, 3),
        "engine_s": round(engine, 3),
        "engine_per_worker_s": round(engine / workers, 3),
        "stages_s": {name: round(stages[name], 3) for name in STAGES},
        # What the stages and the engine's share do not add up to (each is measured on its own).
        "unaccounted_s": round(end_to_end - engine / workers - sum(stages.values()), 3),
        "dispatch_per_segment_s": round((sent[-1] - sent[0]) / max(1, len(sent) - 1), 4),
        "segment_overhead_on_worker_s": _spread([r.total_s - r.engine_s for r in records]),
        "attempts_max": max(r.attempt for r in records),
    }


def _overlaps(records: list[SegmentRecord]) -> float:
    """Seconds on each worker when a segment's finish ran beside its next segment's render."""
    total = 0.0
    for own in _by_worker(records).values():
        for before, after in itertools.pairwise(own):
            total += max(0.0, before.finished_at - after.started_at)
    return total


def _by_worker(records: list[SegmentRecord]) -> dict[str, list[SegmentRecord]]:
    by_worker: dict[str, list[SegmentRecord]] = defaultdict(list)
    for record in records:
        by_worker[record.worker].append(record)
    for own in by_worker.values():
        own.sort(key=lambda r: r.started_at)
    return by_worker


def _gaps_between_segments(records: list[SegmentRecord]) -> float:
    """Seconds on each worker between one segment's end and its next segment's start, while that waited."""
    total = 0.0
    for own in _by_worker(records).values():
        for before, after in itertools.pairwise(own):
            if after.started_at - after.queued_s <= before.finished_at:
                total += max(0.0, after.started_at - before.finished_at)
    return total


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": round(statistics.fmean(values), 3),
        "p50": round(percentile(values, 0.5), 3),
        "p95": round(percentile(values, 0.95), 3),
    }
