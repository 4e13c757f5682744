"""The content-analysis verdict is FaceFusion's rule over the whole video, and a job-level decision."""

from __future__ import annotations

from fractions import Fraction

from fusionfleet.facefusion.content_analysis import LIMIT_PERCENT, judge, refusal_reason, sample_step, sampled_frames
from fusionfleet.jobs.decisions import CONTENT_ANALYSIS, JOB_LEVEL, REFERENCE_FRAME, job_level
from fusionfleet.jobs.engine_options import selects_faces
from fusionfleet.jobs.manifest import ENGINE_NAMES


def test_frames_are_sampled_as_facefusion_samples_a_whole_video() -> None:
    # content_analyser.analyse_video: frame_number % int(video_fps) == 0 over the whole trim range
    assert list(sampled_frames(100, Fraction(25))) == [0, 25, 50, 75]
    assert sample_step(Fraction(30000, 1001)) == 29 and sample_step(0.5) == 1
    assert len(sampled_frames(3 * 3600 * 25, 25.0)) == 3 * 3600


def test_one_flagged_frame_in_a_long_video_passes_where_a_segment_alone_would_refuse() -> None:
    # GIVEN one flagged frame among 11 samples of the whole video (9.09 %: FaceFusion passes it)
    whole = judge([False] * 5 + [True] + [False] * 5, every=25)
    assert not whole.refused and whole.rate_percent < LIMIT_PERCENT
    # WHILE the segment holding it, with 2 samples, would be refused on its own (50 %)
    assert judge([True, False], every=25).refused
    # AND more than 10 % is refused, with FaceFusion's numbers in the reason
    refused = judge([True, True] + [False] * 9, every=25)
    assert refused.refused
    assert "flagged 2 of the 11 frames sampled across the whole video" in refusal_reason(refused)


def test_exactly_the_limit_passes_and_nothing_sampled_passes() -> None:
    assert not judge([True] + [False] * 9, every=1).refused  # 10 % is not more than 10 %
    assert not judge([], every=1).refused


def test_every_engine_declares_its_job_level_decisions() -> None:
    assert set(JOB_LEVEL) == set(ENGINE_NAMES)
    assert CONTENT_ANALYSIS in job_level("facefusion") and CONTENT_ANALYSIS not in job_level("classic")
    # The reference frame is job-level exactly for the engines that follow FaceFusion's selector.
    for engine in ENGINE_NAMES:
        assert (REFERENCE_FRAME in job_level(engine)) == selects_faces(engine), engine
