"""The throughput benchmark's figures from segment records: overhead, gaps while work waited, rate."""

from __future__ import annotations

from benchmarks.throughput import summarise
from fusionfleet.messages import SegmentRecord


def record(index: int, worker: str, sent: float, start: float, engine: float, total: float) -> SegmentRecord:
    return SegmentRecord(
        job_id="j", index=index, status="succeeded", worker=worker, queued_s=start - sent,
        engine_s=engine, total_s=total, started_at=start, finished_at=start + total,
    )  # fmt: skip


def test_overhead_is_life_on_the_worker_minus_engine_and_gaps_count_only_while_work_waited() -> None:
    records = [
        record(0, "a", sent=0.0, start=0.0, engine=2.0, total=2.5),
        # Waiting since 0.1 when worker a finished at 2.5: a gap of 0.3 s is machinery.
        record(1, "a", sent=0.1, start=2.8, engine=2.0, total=2.5),
        record(2, "b", sent=0.2, start=0.4, engine=2.0, total=2.5),
        # Sent only at 9.0, after worker b went idle at 2.9: that wait is not overhead.
        record(3, "b", sent=9.0, start=9.2, engine=2.0, total=2.5),
    ]
    summary = summarise(records, workers=2)
    assert summary["overhead_on_worker_s"]["mean"] == 0.5
    assert summary["gap_between_segments_s"] == {"count": 1, "mean": 0.3, "p95": 0.3}
    assert summary["render_phase_s"] == 11.7
    assert summary["segments_per_s"] == round(4 / 11.7, 3)
    assert summary["busy_share"] == round(8.0 / (2 * 11.7), 3)
    assert summary["dispatch"]["send_span_s"] == 9.0
    assert summary["workers_seen"] == 2


def test_the_engine_is_free_from_a_segments_last_frame_to_the_next_render_and_the_finish_may_overlap_it() -> None:
    # GIVEN a worker that finished segment 0 (frames done at 2.0, committed at 2.6) in the background
    # and began segment 1, waiting since 0.1, at 2.2
    first = record(0, "a", sent=0.0, start=0.0, engine=2.0, total=2.6).model_copy(update={"rendered_at": 2.0})
    second = record(1, "a", sent=0.1, start=2.2, engine=2.0, total=2.6).model_copy(update={"rendered_at": 4.2})
    summary = summarise([first, second], workers=1)
    # THEN the engine waited 0.2 s between them, and each finish took 0.6 s after its last frame
    assert summary["engine_free_between_segments_s"] == {"count": 1, "p50": 0.2, "p95": 0.2}
    assert summary["finish_s"]["p50"] == 0.6
    # AND the gap from one record's commit to the next start counts as none, not negative
    assert summary["gap_between_segments_s"]["mean"] == 0.0
