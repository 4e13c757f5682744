"""The fleet-overhead benchmark's pure parts: the sleep engine, a job's account, efficiency, goals."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.fleet_accounting import STAGES, ClientTimes, Stretches, account, idle_stretches
from benchmarks.fleet_overhead import (
    calibration,
    efficiencies,
    goals_met,
    picture,
    sleep_engine_s,
    sleep_faults,
    table,
)
from fusionfleet.messages import SegmentRecord


def record(
    index: int, worker: str, sent: float, start: float, engine: float, rendered: float, end: float
) -> SegmentRecord:
    return SegmentRecord(
        job_id="j", index=index, status="succeeded", worker=worker, queued_s=start - sent, engine_s=engine,
        total_s=end - start, started_at=start, rendered_at=rendered, finished_at=end,
    )  # fmt: skip


def test_the_sleep_engine_sleeps_at_every_fifth_output_frame() -> None:
    rules = sleep_faults(12)
    assert [rule["at_frame"] for rule in rules] == [0, 5, 10]
    assert all(rule == {"action": "slow", "seconds": 0.2, "at_frame": rule["at_frame"]} for rule in rules)
    assert sleep_engine_s(125) == pytest.approx(5.0)  # at frames 0, 5, …, 120
    assert sleep_engine_s(126) == pytest.approx(5.2)  # and at 125
    assert sleep_engine_s(1500) == pytest.approx(60.0)


def test_a_jobs_account_names_every_second_outside_the_engine() -> None:
    # GIVEN two workers; segment 1 waited for worker a (sent at 101.0, taken at 106.5 after a's 0.5 s gap),
    # and worker b went idle after its one segment
    records = [
        record(0, "a", sent=101.0, start=101.5, engine=4.0, rendered=105.8, end=106.0),
        record(1, "a", sent=101.2, start=106.5, engine=4.0, rendered=110.8, end=111.0),
        record(2, "b", sent=101.4, start=102.0, engine=4.0, rendered=106.3, end=106.5),
    ]
    times = ClientTimes(
        submit_began=98.0, submit_done=99.0, execution_started=100.0, notice_at=113.5, wait_done=114.0, downloaded=114.5
    )
    timings = {"merge_started_at": 111.5, "merge_s": 1.0}

    # AND the workers logged their empty-queue stretches: a until it took segment 0, b until segment 2
    # and again after it, to the end
    idle = idle_stretches(
        [
            "INFO gpu_worker.delivery.loop [1] worker a idle from 90.000",
            "INFO gpu_worker.delivery.loop [2] worker b idle from 90.000",
            "INFO gpu_worker.delivery.loop [1] worker a took work at 101.500, idle from 90.000",
            "INFO gpu_worker.delivery.loop [2] worker b took work at 102.000, idle from 90.000",
            "INFO gpu_worker.delivery.loop [2] worker b idle from 106.500",
            "INFO gpu_worker.delivery.loop [3] worker merge-1 idle from 90.000",
        ],
        ["a", "b"],
    )
    assert idle == {"a": [(90.0, 101.5)], "b": [(90.0, 102.0), (106.5, None)]}

    # WHEN the job is accounted for
    summary = account(times, records, timings, workers=2, idle=idle)

    # THEN each stage has its share, and with the engine they add up to the end to end
    stages = summary["stages_s"]
    assert list(stages) == list(STAGES)
    assert (stages["upload"], stages["slicer"], stages["first_dispatch"], stages["first_queue_wait"]) == (
        1.0,
        1.0,
        1.0,
        0.5,
    )
    assert stages["segment_setup_encode"] == 0.45  # 0.3 + 0.3 + 0.3 worker-seconds over 2 workers
    assert stages["segment_finish"] == 0.3  # 0.2 + 0.2 + 0.2 worker-seconds over 2 workers
    assert stages["between_segments"] == 0.25
    assert summary["render_s"] == 9.5
    # b's 0.5 s before its segment and 4.5 s after it, measured, over 2 workers
    assert stages["workers_idle"] == 2.5
    assert (stages["to_merge"], stages["merge"], stages["notice"], stages["client_wait"], stages["download"]) == (
        0.5,
        1.0,
        1.0,
        0.5,
        0.5,
    )
    assert summary["end_to_end_s"] == 16.5
    # AND, each measured on its own, the stages and the engine add up to the end to end here
    assert summary["unaccounted_s"] == 0.0


def test_what_the_measured_stages_miss_is_reported_not_absorbed() -> None:
    # GIVEN the same job, but worker b logged only 3.5 s idle after its segment (it spent the first
    # second of its wait in a receive that found nothing in time: no stage names that second)
    records = [
        record(0, "a", sent=101.0, start=101.5, engine=4.0, rendered=105.8, end=106.0),
        record(1, "a", sent=101.2, start=106.5, engine=4.0, rendered=110.8, end=111.0),
        record(2, "b", sent=101.4, start=102.0, engine=4.0, rendered=106.3, end=106.5),
    ]
    times = ClientTimes(98.0, 99.0, 100.0, 113.5, 114.0, 114.5)
    idle: Stretches = {"a": [(90.0, 101.5)], "b": [(90.0, 102.0), (107.5, None)]}
    summary = account(times, records, {"merge_started_at": 111.5, "merge_s": 1.0}, workers=2, idle=idle)
    # THEN the idle stage is what was logged, and the half second per worker nobody measured is unaccounted
    assert summary["stages_s"]["workers_idle"] == 2.0
    assert summary["unaccounted_s"] == 0.5
    assert summary["dispatch_per_segment_s"] == 0.2
    assert summary["workers_seen"] == 2


def test_a_finish_that_ran_beside_the_next_render_costs_no_wall_time() -> None:
    # GIVEN one worker that looked ahead: segment 1 started at 105.9, while segment 0 finished until 106.0
    records = [
        record(0, "a", sent=101.0, start=101.5, engine=4.0, rendered=105.8, end=106.0),
        record(1, "a", sent=101.2, start=105.9, engine=4.0, rendered=110.2, end=110.4),
    ]
    times = ClientTimes(98.0, 99.0, 100.0, 112.0, 112.1, 112.2)
    idle: Stretches = {"a": [(90.0, 101.5), (110.4, None)]}
    summary = account(times, records, {"merge_started_at": 110.5, "merge_s": 1.0}, workers=1, idle=idle)
    # THEN only the finish's 0.1 s outside the next render counts, besides the last segment's 0.2 s
    assert summary["stages_s"]["segment_finish"] == 0.3
    assert summary["stages_s"]["workers_idle"] == 0.0
    assert summary["unaccounted_s"] == 0.0


def test_efficiency_is_one_workers_time_over_n_times_n_workers_time_and_goals_use_the_one_minute_clip(
    tmp_path: Path,
) -> None:
    def run(clip: float, workers: int, render: float, e2e: float) -> dict[str, object]:
        stages = dict.fromkeys(STAGES, 0.1)
        return {
            "clip_s": clip, "workers": workers, "segments": 12, "render_s": render, "end_to_end_s": e2e,
            "engine_per_worker_s": render / 2, "stages_s": stages, "unaccounted_s": 0.0, "dispatch_per_segment_s": 0.4,
        }  # fmt: skip

    runs = [
        run(60.0, 1, 68.0, 74.0),
        run(60.0, 6, 12.0, 15.0),
        run(60.0, 12, 7.0, 10.0),
        {"clip_s": 180.0, "workers": 6, "failed": "RuntimeError('stuck')"},
    ]
    rows = efficiencies(runs)
    assert rows[0]["render"] == 1.0
    assert rows[1]["render"] == round(68.0 / (6 * 12.0), 3)
    assert rows[1]["end_to_end"] == round(74.0 / (6 * 15.0), 3)
    assert rows[3] == {"clip_s": 180.0, "workers": 6, "failed": "RuntimeError('stuck')"}
    # 0.944 ≥ 0.9, 0.822 ≥ 0.8, 0.81 < 0.85
    assert goals_met(rows) == {"render_6": True, "end_to_end_6": True, "render_12": False}
    assert goals_met(rows[:1]) == {"render_6": None, "end_to_end_6": None, "render_12": None}
    text = table(runs, rows)
    assert "60s x6" in text and "FAILED" in text
    picture(runs, tmp_path / "p.png", "t")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_the_simulations_inputs_are_medians_of_the_multi_worker_runs_and_the_merge_a_line_in_segments() -> None:
    def run(workers: int, segments: int, merge: float, dispatch: float, overhead: float) -> dict[str, object]:
        stages = dict.fromkeys(STAGES, 0.0)
        stages.update(slicer=1.0, first_dispatch=2.0, between_segments=0.5, to_merge=0.3, merge=merge, notice=0.4)
        return {
            "workers": workers, "segments": segments, "stages_s": stages, "dispatch_per_segment_s": dispatch,
            "segment_overhead_on_worker_s": {"mean": overhead},
        }  # fmt: skip

    runs = [
        run(1, 10, merge=1.0, dispatch=9.0, overhead=0.3),  # alone: dispatch paced by one worker
        run(6, 12, merge=1.1, dispatch=0.1, overhead=0.5),  # 12 segments, all in flight at once
        run(12, 30, merge=2.0, dispatch=0.5, overhead=0.7),  # 30 segments, 16 at once: paced by the render
        {"workers": 12, "failed": "x"},
    ]
    got = calibration(runs)
    assert got["job_start_s"] == 3.0 and got["to_merge_s"] == 0.3 and got["notice_s"] == 0.4
    assert got["dispatch_s"] == 0.1
    assert got["per_segment_overhead_alone_s"] == 0.3 + 0.5 * 1 / 10
    # 0.5 + 0.5 × 6 / 12 = 0.75 and 0.7 + 0.5 × 12 / 30 = 0.9: median 0.825
    assert got["per_segment_overhead_shared_s"] == 0.825
    # the merges (10, 1.0), (12, 1.1), (30, 2.0) lie on 0.5 s + 0.05 s a segment
    assert (got["merge_base_s"], got["merge_per_segment_s"]) == (0.5, 0.05)
