"""A job's timeline: the trim and the output rate, as FaceFusion 3.8.1 applies them. Pure."""

from __future__ import annotations

from fractions import Fraction

import pytest

from fusionfleet.jobs.timeline import Timeline, output_rate, timeline, trim_problem, trim_range

F25 = Fraction(25)


def test_without_trim_or_rate_every_frame_is_shown_once() -> None:
    line = timeline({}, 300, F25)
    assert (line.start, line.end, line.mode, line.output_frames()) == (0, 300, "same", 300)
    assert all(line.shown(frame) == 1 for frame in range(300)) and line.shown(300) == 0
    assert line.duration_s == 12 and line.frame_number(7) == 7


def test_trim_is_clamped_to_the_target_as_facefusion_clamps_it() -> None:
    assert trim_range({"trim_frame_start": 30, "trim_frame_end": 270}, 300) == (30, 270)
    assert trim_range({"trim_frame_end": 1000}, 300) == (0, 300)
    assert trim_range({"trim_frame_start": 299}, 300) == (299, 300)
    assert trim_problem({"trim_frame_start": 30, "trim_frame_end": 270}, 300) is None
    assert trim_problem({"trim_frame_start": 300}, 300) == (
        "options: trim_frame_start 300 leave no frame of the target's 300 to render"
    )
    assert trim_problem({"trim_frame_start": 50, "trim_frame_end": 50}, 300) is not None


def test_a_higher_rate_repeats_frames_from_the_ranges_start() -> None:
    # 25 → 30 fps over frames 30..269: FaceFusion's writer pipes them from 0 at 25 fps into fps=30
    line = timeline({"trim_frame_start": 30, "trim_frame_end": 270, "output_video_fps": 30}, 300, F25)
    assert line.mode == "duplicate" and line.output_frames() == 288 and line.temp_fps == 25
    assert [line.shown(frame) for frame in range(30, 36)] == [1, 1, 2, 1, 1, 1]
    assert sum(line.shown(frame) for frame in range(300)) == 288
    # any cut of the range adds up: segments agree with the whole
    assert line.output_frames(30, 100) + line.output_frames(100, 270) == 288
    assert line.frame_number(42) == 42


def test_a_lower_rate_keeps_every_frame_slower_in_the_memory_workflow_and_drops_frames_on_disk() -> None:
    slower = timeline({"output_video_fps": 15}, 300, F25)
    assert slower.mode == "retime" and slower.output_frames() == 300 and slower.duration_s == 20
    dropped = timeline({"output_video_fps": 15, "workflow_strategy": "disk"}, 300, F25)
    assert dropped.mode == "select" and dropped.output_frames() == 180 and dropped.duration_s == 12
    assert [dropped.shown(frame) for frame in range(6)] == [1, 0, 1, 0, 1, 1]
    # the disk workflow numbers kept frames from the range's start: the 3rd kept frame is frame 2
    assert dropped.frame_number(4) == 2 and dropped.temp_fps == 15


def test_the_rate_is_kept_within_facefusions_bounds_and_read_as_ffmpeg_reads_it() -> None:
    assert output_rate({"output_video_fps": 120.0}, F25) == 60
    assert output_rate({"output_video_fps": 29.97}, F25) == Fraction(2997, 100)
    assert output_rate({}, Fraction(30000, 1001)) == Fraction(30000, 1001)


@pytest.mark.parametrize("mode", ["same", "duplicate", "retime", "select"])
def test_every_frame_of_the_output_comes_from_exactly_one_target_frame(mode: str) -> None:
    out = {"same": (25, 1), "duplicate": (60, 1), "retime": (12, 1), "select": (24000, 1001)}[mode]
    line = Timeline(17, 283, 25, 1, *out, mode)  # type: ignore[arg-type]
    shown = [line.shown(frame) for frame in range(line.start, line.end)]
    assert sum(shown) == line.output_frames() and min(shown) >= 0
    # the output frames made before each target frame are the sum of those it shows before it
    assert all(line.output_frames(line.start, frame) == sum(shown[: frame - line.start])
               for frame in range(line.start, line.end))  # fmt: skip
