"""Who gets a straggler backup copy, and when: the pure rule (fusionfleet.fleet.stragglers)."""

from __future__ import annotations

from fusionfleet.fleet.stragglers import BackupPolicy, SegmentProgress, backups_due, nearly_done, straggler_threshold_s

POLICY = BackupPolicy(factor=2.0, min_age_s=10.0, done_fraction=0.75, last_segments=1)
NOW = 1_000.0


def job(done: int, running: dict[int, float], total: int = 8, render_s: float = 20.0) -> list[SegmentProgress]:
    """`done` segments finished in `render_s` each; `running` maps index → seconds its attempt has run."""
    segments = [SegmentProgress(index, render_s=render_s) for index in range(done)]
    segments += [SegmentProgress(index, running_since=NOW - age) for index, age in running.items()]
    return segments


def test_a_segment_running_past_k_times_the_median_near_the_end_gets_a_backup() -> None:
    # GIVEN 6 of 8 segments done in 20 s each, one running 41 s and one 39 s
    segments = job(6, {6: 41.0, 7: 39.0})
    # THEN only the one past 2 × 20 s is due
    assert backups_due(segments, 8, NOW, POLICY) == [6]


def test_no_backup_before_the_job_is_nearly_done() -> None:
    # GIVEN 5 of 8 done (62 %, 3 left): a segment running ten times the median is not copied yet
    assert backups_due(job(5, {5: 200.0, 6: 1.0, 7: 1.0}), 8, NOW, POLICY) == []
    # WHEN a sixth finishes (75 %)
    assert backups_due(job(6, {6: 200.0, 7: 1.0}), 8, NOW, POLICY) == [6]


def test_the_last_segments_rule_covers_small_jobs() -> None:
    # GIVEN a two-segment job with one done (50 %): only the last one is left
    assert nearly_done(1, 2, POLICY)
    assert backups_due(job(1, {1: 41.0}, total=2), 2, NOW, POLICY) == [1]
    assert not nearly_done(1, 3, POLICY) and not nearly_done(0, 1, POLICY) and not nearly_done(2, 2, POLICY)


def test_the_minimum_age_keeps_short_segments_from_being_copied() -> None:
    # GIVEN segments of 2 s: a 9 s attempt is 4.5 × the median but younger than the 10 s minimum
    assert straggler_threshold_s([2.0, 2.0, 3.0], POLICY) == 10.0
    assert backups_due(job(7, {7: 9.0}, render_s=2.0), 8, NOW, POLICY) == []
    assert backups_due(job(7, {7: 11.0}, render_s=2.0), 8, NOW, POLICY) == [7]


def test_at_most_one_backup_per_segment_and_none_for_waiting_segments() -> None:
    # GIVEN a straggler whose backup was already sent, and a segment no worker has taken yet
    segments = job(6, {})
    segments += [SegmentProgress(6, running_since=NOW - 500, backup_sent=True), SegmentProgress(7)]
    # THEN neither is due
    assert backups_due(segments, 8, NOW, POLICY) == []


def test_backups_off_sends_none() -> None:
    off = BackupPolicy(enabled=False)
    assert backups_due(job(7, {7: 10_000.0}), 8, NOW, off) == []
