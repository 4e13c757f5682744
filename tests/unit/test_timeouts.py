"""The four clocks of a segment (visibility, engine limit, heartbeat, task timeout) hold together."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fusionfleet.jobs.timeouts import MAX_TASK_SECONDS, JobTimeouts, TimeoutPolicy, check, job_timeouts
from tests.support.cfn import properties, source, transform

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "infra" / "statemachine" / "render.asl.json"


def _tasks(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        if state["Type"] == "Task":
            yield name, state
        if state["Type"] == "Map":
            yield from _tasks(state["ItemProcessor"]["States"])


@pytest.mark.parametrize(
    ("frames", "segment_frames"),
    [(250, 100), (1500, 100), (4500, 125), (3 * 3600 * 30, 150)],
    ids=["10s", "1min", "3min", "3h"],
)
def test_the_derived_timeouts_keep_every_recoverable_segment_alive(frames: int, segment_frames: int) -> None:
    # GIVEN the default policy and jobs from ten seconds to three hours
    policy = TimeoutPolicy()
    # WHEN their timeouts are derived
    timeouts = job_timeouts(frames, segment_frames, policy)
    # THEN the relation holds, and the backlog the stack accepts fits in the heartbeat
    assert check(timeouts, policy, frames, segment_frames) == []
    assert timeouts.render_heartbeat_s > policy.accepted_backlog_s + policy.visibility_s
    assert timeouts.render_timeout_s <= MAX_TASK_SECONDS


@pytest.mark.parametrize("segment_frames", [50, 150, 300])
def test_a_three_hour_targets_analysis_does_not_depend_on_any_segments_time_limit(segment_frames: int) -> None:
    # GIVEN a three-hour target at 60 fps, planned into segments of any length
    policy, frames = TimeoutPolicy(), 3 * 3600 * 60
    timeouts = job_timeouts(frames, segment_frames, policy)
    # THEN one analysis attempt may take what a decode of the whole target at 0.02 s a frame takes,
    # far more than any segment's attempt is given
    analysis = policy.analysis_attempt_s(frames)
    assert analysis == policy.analysis_base_s + frames * policy.analysis_seconds_per_frame
    assert analysis > 10 * policy.attempt_s(segment_frames)
    # AND the analysis task's own clocks cover the backlog and every attempt of it, as a segment's do
    assert check(timeouts, policy, frames, segment_frames) == []
    assert timeouts.analysis_timeout_s > policy.accepted_backlog_s + policy.max_attempts * analysis
    # AND they are the same whatever the segments: nothing about the analysis is a segment's
    assert timeouts.analysis_timeout_s == job_timeouts(frames, 1, policy).analysis_timeout_s
    assert timeouts.analysis_heartbeat_s == job_timeouts(frames, 1, policy).analysis_heartbeat_s


def test_a_longer_job_or_a_deeper_backlog_waits_longer() -> None:
    short = job_timeouts(250, 100, TimeoutPolicy())
    long = job_timeouts(4500, 100, TimeoutPolicy())
    deep = job_timeouts(250, 100, TimeoutPolicy(accepted_backlog_s=12 * 3600))
    assert long.render_timeout_s > short.render_timeout_s and long.render_heartbeat_s > short.render_heartbeat_s
    assert deep.render_timeout_s - short.render_timeout_s >= 6 * 3600


def test_the_check_names_each_way_the_clocks_can_fail() -> None:
    policy = TimeoutPolicy(visibility_s=120, accepted_backlog_s=600)
    # GIVEN LocalStack's default of 60 s for a task with a heartbeat and no timeout
    engine_default = JobTimeouts(
        render_heartbeat_s=30, render_timeout_s=60, merge_heartbeat_s=30, merge_timeout_s=60,
        analysis_heartbeat_s=30, analysis_timeout_s=60,
    )  # fmt: skip
    problems = check(engine_default, policy, 1500, 100)
    # THEN both the silence of a dead worker and the attempts are found uncovered
    assert any("render heartbeat 30 s is not longer" in p for p in problems), problems
    assert any("render timeout 60 s does not cover" in p for p in problems), problems
    assert any("analysis heartbeat 30 s is not longer" in p for p in problems), problems
    assert any("analysis timeout 60 s does not cover" in p for p in problems), problems
    # AND a heartbeat at least as long as its timeout is refused (Step Functions refuses it too)
    assert any(
        "merge heartbeat" in p for p in check(JobTimeouts(10**5, 10**6, 500, 500, 10**5, 10**6), policy, 1500, 100)
    )
    # AND a visibility the beats cannot renew in time is refused
    assert check(job_timeouts(1500, 100, TimeoutPolicy(visibility_s=10)), TimeoutPolicy(visibility_s=10), 1500, 100)


def test_every_task_in_the_state_machine_has_an_explicit_timeout_and_callbacks_take_the_jobs() -> None:
    # GIVEN the state machine definition and the limits the slicer puts in every execution input
    definition = json.loads(ASL.read_text())
    limits = set(job_timeouts(250, 100, TimeoutPolicy()).as_limits())
    tasks = dict(_tasks(definition["States"]))
    assert tasks
    for name, task in tasks.items():
        # THEN no task falls back to an engine's default (LocalStack's is 60 s)
        assert "TimeoutSeconds" in task or "TimeoutSecondsPath" in task, name
        if task["Resource"].endswith(".waitForTaskToken"):
            # AND every callback takes the job's derived heartbeat and timeout
            for field in ("TimeoutSecondsPath", "HeartbeatSecondsPath"):
                assert task[field].removeprefix("$.limits.") in limits, (name, field)


def test_the_templates_defaults_satisfy_the_relation() -> None:
    # GIVEN the template's queue and backlog parameters as deployed by default
    parameters = source()["Parameters"]

    def default(name: str) -> int:
        return int(parameters[name]["Default"])

    policy = TimeoutPolicy(
        visibility_s=default("RenderVisibilitySeconds"),
        max_attempts=default("RenderMaxAttempts"),
        accepted_backlog_s=default("AcceptedBacklogSeconds"),
    )
    # THEN a three-minute and a three-hour job at 30 fps get clocks that hold
    for frames in (5400, 324000):
        assert check(job_timeouts(frames, 150, policy), policy, frames, 150) == []
    # AND the watchdog does not stop a job that waits its turn behind the accepted backlog
    assert default("WatchdogStallSeconds") > default("AcceptedBacklogSeconds")


def test_dead_letter_queues_hold_a_message_longer_than_their_consumer_runs() -> None:
    # GIVEN the transformed template (the event source mappings exist only after the SAM transform)
    template = transform("prod")
    resources = template["Resources"]
    mappings = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    assert mappings
    for mapping in mappings:
        queue = mapping["EventSourceArn"]["Fn::GetAtt"][0]
        function = mapping["FunctionName"]["Ref"]
        # THEN Lambda would accept the mapping: visibility at least the function's timeout
        visibility = int(properties(template, queue).get("VisibilityTimeout", 30))
        assert visibility >= int(resources[function]["Properties"]["Timeout"]), queue
