from __future__ import annotations

from gpu_worker.merging.audio import Sample, coalesce, durations


def test_nearby_samples_are_fetched_together() -> None:
    samples = [Sample(1, 0, 100, 10), Sample(1, 1024, 120, 10), Sample(1, 2048, 1_000_000, 10)]
    ranges = coalesce(samples, gap=64)
    assert [(start, end, len(members)) for start, end, members in ranges] == [(100, 130, 2), (1_000_000, 1_000_010, 1)]


def test_durations_follow_the_timestamps() -> None:
    assert durations([0, 1024, 2048], 1024) == [1024, 1024, 1024]
    assert durations([5], 1024) == [1024]
