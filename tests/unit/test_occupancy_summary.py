"""The occupancy benchmark's measures (benchmarks/occupancy.py), from segment records: pure."""

from __future__ import annotations

import os
import time
from typing import Any

from benchmarks.occupancy import ENGINE_S_PER_FRAME, calibration, cpu_measures, cpu_s, goals_met, summary
from fusionfleet.messages import SegmentRecord


def _record(index: int, started: float, engine: float, rendered: float, finished: float) -> SegmentRecord:
    stages = {"engine": engine, "decode": 1.0, "encode": 2.0, "engine_waits_input": 0.05, "first_frame": 0.02}
    return SegmentRecord(
        job_id="j", index=index, status="succeeded", frames=125, engine_s=engine, started_at=started,
        rendered_at=rendered, finished_at=finished, stages=stages,
    )  # fmt: skip


def _clip(size: str, occupancy: float, over_floor: float, render: float = 21.0) -> dict[str, Any]:
    return {
        "size": size, "occupancy_segments": occupancy, "render_over_floor": over_floor, "render_s": render,
        "frames": 500,
    }  # fmt: skip


def test_a_clips_measures_come_from_its_records_and_the_floor_from_its_frames() -> None:
    # GIVEN four 125-frame segments, each 5.1 s of engine in 5.2 s of its own time, finished 0.3 s later
    records = [_record(i, 100 + 5.2 * i, 5.1, 100 + 5.2 * (i + 1), 100 + 5.2 * (i + 1) + 0.3) for i in range(4)]
    clip = summary("1920x1080", 20.0, records, {"render_s": 21.1, "end_to_end_s": 25.0})
    # THEN the floor is the frames' sleep, the occupancy the engine's share, the overhead what is past the floor
    assert clip["frames"] == 500 and clip["engine_floor_s"] == 500 * ENGINE_S_PER_FRAME
    assert clip["occupancy_segments"] == round(4 * 5.1 / (4 * 5.2), 3)
    assert clip["occupancy_render"] == round(4 * 5.1 / 21.1, 3)
    assert clip["render_over_floor"] == round(21.1 / 20.0, 3)
    assert clip["overhead_per_segment_s"] == round((21.1 - 20.0) / 4, 3)
    assert clip["finish_s_mean"] == 0.3 and clip["stages_s"]["decode"] == 4.0
    assert calibration([clip]) == {"overhead_per_segment_1920x1080_s": clip["overhead_per_segment_s"]}


def test_records_without_stages_give_no_occupancy_but_still_a_render_phase() -> None:
    # main's worker writes no stages: only the render phase against the floor is measured
    records = [_record(i, 10.0 * i, 5.0, 10.0 * i + 6, 10.0 * i + 6.5) for i in range(2)]
    bare = [r.model_copy(update={"stages": {}}) for r in records]
    clip = summary("640x360", 10.0, bare, {"render_s": 16.5, "end_to_end_s": 20.0})
    assert clip["occupancy_segments"] is None and clip["stages_s"] == {} and clip["render_over_floor"] == 1.65


def test_the_goals_are_judged_on_their_own_sizes_and_the_baseline() -> None:
    clips = [
        _clip("320x180", 0.99, 1.04, render=20.8),
        _clip("640x360", 0.98, 1.05, render=21.0),
        _clip("1920x1080", 0.96, 1.08),
        _clip("3840x2160", 0.85, 1.3),
    ]
    met = goals_met(clips, {"320x180": {"render_s": 24.2, "frames": 500}, "640x360": {"render_s": 26.4, "frames": 500}})
    assert met == {
        "occupancy_1080p": True,
        "render_over_floor_1080p": True,
        "occupancy_2160p": False,
        "no_slower_than_baseline": True,
    }
    assert goals_met(clips, {"640x360": {"render_s": 20.0, "frames": 500}})["no_slower_than_baseline"] is False
    # another clip (a different frame count) is not compared
    assert goals_met(clips, {"640x360": {"render_s": 20.0, "frames": 264}})["no_slower_than_baseline"] is None
    assert goals_met([{"size": "1920x1080", "failed": "stack"}], None) == {
        "occupancy_1080p": None, "render_over_floor_1080p": None, "occupancy_2160p": None,
        "no_slower_than_baseline": None,
    }  # fmt: skip


def test_the_cpu_floor_spreads_the_workers_cpu_time_over_every_core() -> None:
    # 40 CPU seconds for 500 frames on 2 cores: 80 ms a frame, and no render phase shorter than 20 s
    assert cpu_measures(40.0, 500, 2) == {"worker_cpu_s": 40.0, "worker_cpu_ms_per_frame": 80.0, "cpu_floor_s": 20.0}


def test_cpu_time_is_read_from_proc_and_grows_with_work() -> None:
    # GIVEN this process's CPU time as /proc tells it
    before = cpu_s([os.getpid()])
    # WHEN it spends a quarter of a second computing
    until = time.process_time() + 0.25
    while time.process_time() < until:
        pass
    # THEN /proc's count grew by about as much (ticks are 10 ms), and a process that is gone counts nothing
    assert 0.2 <= cpu_s([os.getpid()]) - before <= 0.5
    assert cpu_s([2**22 + 7]) == 0.0
