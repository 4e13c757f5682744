"""The watchdog's rule: which jobs need a notice from it, and which must be stopped first. Pure."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from fusionfleet.adapters.orchestrator import Progress
from fusionfleet.jobs.loss import JobFailedMarker
from fusionfleet.services.watchdog import Observation, Verdict, WatchdogPolicy, judge

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
POLICY = WatchdogPolicy(stall_s=600, dispatch_grace_s=120)


def running(started_s_ago: float, progress: Progress | None, changed_s_ago: float | None = None) -> Observation:
    changed = NOW - timedelta(seconds=changed_s_ago) if changed_s_ago is not None else None
    return Observation("job", "RUNNING", started=NOW - timedelta(seconds=started_s_ago), progress=progress,
                       last_change=changed)  # fmt: skip


def test_ended_with_its_own_notice_needs_nothing() -> None:
    assert judge(Observation("job", "SUCCEEDED"), NOW, POLICY).action == "none"
    assert judge(Observation("job", "FAILED", error="JobFailed"), NOW, POLICY).action == "none"


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        ("FAILED", "SNS.NotFoundException", "ended FAILED (SNS.NotFoundException: topic gone)"),
        ("TIMED_OUT", None, "ended TIMED_OUT"),
        ("ABORTED", None, "ended ABORTED"),
    ],
)
def test_ended_without_a_notice_gets_one_saying_how(status: str, error: str | None, expected: str) -> None:
    observation = Observation("job", status, error=error, cause="topic gone" if error else None)
    verdict = judge(observation, NOW, POLICY)
    assert verdict.action == "notify"
    assert expected in verdict.reason and "without a notification" in verdict.reason


def test_a_map_run_that_never_dispatches_is_stopped_after_the_grace() -> None:
    nothing = Progress(total=5, pending=5)
    assert judge(running(60, nothing), NOW, POLICY).action == "none"
    assert judge(running(60, None), NOW, POLICY).action == "none"
    verdict = judge(running(121, nothing), NOW, POLICY)
    assert (verdict.action, verdict.error) == ("stop", "JobNeverDispatched")
    assert judge(running(121, None), NOW, POLICY).error == "JobNeverDispatched"


def test_a_long_content_analysis_is_not_a_map_that_never_dispatched() -> None:
    # GIVEN a job that has analysed its three-hour target for an hour (its progress record written 5 s ago):
    # no Map Run yet
    analysing = dataclasses.replace(running(3600, None, changed_s_ago=5), analysing=True)
    # THEN it is left alone (the step's own clocks bound it), however long past the dispatch grace
    assert judge(analysing, NOW, POLICY).action == "none"
    # AND once its verdict is kept, its segments get the grace from then, not from the job's start
    just_done = dataclasses.replace(running(3600, None, changed_s_ago=60), analysed_at=NOW - timedelta(seconds=60))
    assert judge(just_done, NOW, POLICY).action == "none"
    stuck = judge(dataclasses.replace(just_done, analysed_at=NOW - timedelta(seconds=121)), NOW, POLICY)
    assert (stuck.action, stuck.error) == ("stop", "JobNeverDispatched")
    assert "121 s after its content analysis ended" in stuck.reason


def test_a_job_waiting_its_turn_or_rendering_is_left_alone() -> None:
    waiting = Progress(total=5, running=5)
    assert judge(running(500, waiting), NOW, POLICY).action == "none"
    assert judge(running(5000, waiting, changed_s_ago=30), NOW, POLICY).action == "none"


def test_a_job_with_no_progress_for_the_stall_time_is_stopped_saying_since_when() -> None:
    verdict = judge(running(5000, Progress(total=5, running=2, succeeded=3), changed_s_ago=601), NOW, POLICY)
    assert (verdict.action, verdict.error) == ("stop", "JobStalled")
    assert "no progress for 601 s" in verdict.reason


def test_a_running_job_marked_failed_is_stopped_with_the_markers_cause_however_young() -> None:
    marker = JobFailedMarker(job_id="job", segment=2, attempts=3, error="SegmentFailed", cause="seg 2", by="w", at=0)
    observation = dataclasses.replace(running(started_s_ago=5, progress=Progress(total=4, running=1)), failed=marker)
    assert judge(observation, NOW, POLICY) == Verdict("stop", error="SegmentFailed", reason="seg 2")
