"""How long a job's callback tasks may wait, chosen together with the queues and the workers. Pure.

Four clocks guard a segment and they only work as a set:
- the render queue's visibility timeout V: a worker holds a message for V and extends it every V/3
  while it works, so a dead worker's message reappears at most V after its last extension;
- the worker's engine limit: one attempt is killed after `base + frames × seconds_per_frame`;
- the task's heartbeat H (Step Functions): its clock starts when the message is *sent*, so queue
  time counts. The longest gap between two beats of a token is a beat interval, then a dead
  worker's redelivery delay, then the wait in the backlog before another worker takes the message;
- the task's timeout T: covers waiting behind the accepted backlog and behind the job's own
  segments, then every attempt the queue allows, each followed by its redelivery delay.

So H > V/3 + redelivery + backlog + own queue, and T > H and T > own queue + backlog + attempts ×
(attempt + redelivery). `check` states the relation so tests can hold the template and the state
machine to it. A task that names no timeout is a bug: LocalStack's default is 60 s.

A job whose engine makes its content-analysis verdict once (FaceFusion) has one more task, before its
segments: the analysis (one decode of the whole target, the analyser on one frame a second). Its own
attempt limit grows with the whole job's frames, never with a segment's: a three-hour target's
analysis has the time it needs whatever the plan's segment length, and no segment waits inside its
own limit for it. Its heartbeat and timeout follow the same relation as a segment's, without the
job's own queue (it runs before any of its segments).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Step Functions' upper bound for TimeoutSeconds and HeartbeatSeconds.
MAX_TASK_SECONDS = 99_999_999
# Slack for API latency and clock differences between the worker, SQS and Step Functions.
MARGIN_S = 60
# How long a worker holds a render message between its heartbeats (the render queues' visibility timeout).
DEFAULT_VISIBILITY_S = 120


@dataclass(frozen=True)
class TimeoutPolicy:
    visibility_s: int = DEFAULT_VISIBILITY_S
    max_attempts: int = 3
    # The longest a failed attempt's message stays invisible before its retry (the worker's backoff).
    retry_delay_s: int = 60
    # The longest a segment may wait in the render queues behind other jobs' work.
    accepted_backlog_s: int = 6 * 3600
    # The engine host's wall-clock limit for one attempt: base + frames × seconds_per_frame.
    engine_base_s: float = 120.0
    engine_seconds_per_frame: float = 2.0
    # Merges are stream copies plus checks: a fraction of a render's cost per frame.
    merge_base_s: float = 300.0
    merge_seconds_per_frame: float = 0.05
    # The content analysis reads every frame once and analyses one a second: 0.02 s a frame is ten
    # times a 4K decode on two CPU cores (a 1080p one runs at about 700 frames a second).
    analysis_base_s: float = 300.0
    analysis_seconds_per_frame: float = 0.02

    @property
    def beat_interval_s(self) -> float:
        """How often a worker extends its message and beats its token (a third of V: two chances)."""
        return max(1.0, self.visibility_s / 3)

    @property
    def redelivery_s(self) -> int:
        """The longest a segment is out of sight after an attempt ends without an answer."""
        return max(self.visibility_s, self.retry_delay_s)

    def attempt_s(self, frames: int) -> float:
        return self.engine_base_s + frames * self.engine_seconds_per_frame

    def analysis_attempt_s(self, job_frames: int) -> float:
        """One content-analysis attempt's wall-clock limit: the whole target's frames, the only input."""
        return self.analysis_base_s + job_frames * self.analysis_seconds_per_frame


@dataclass(frozen=True)
class JobTimeouts:
    render_heartbeat_s: int
    render_timeout_s: int
    merge_heartbeat_s: int
    merge_timeout_s: int
    analysis_heartbeat_s: int
    analysis_timeout_s: int

    def as_limits(self) -> dict[str, int]:
        """The fields the state machine reads (`$.limits.*`)."""
        return {
            "render_heartbeat_s": self.render_heartbeat_s,
            "render_timeout_s": self.render_timeout_s,
            "merge_heartbeat_s": self.merge_heartbeat_s,
            "merge_timeout_s": self.merge_timeout_s,
            "analysis_heartbeat_s": self.analysis_heartbeat_s,
            "analysis_timeout_s": self.analysis_timeout_s,
        }


def job_timeouts(frame_count: int, longest_segment_frames: int, policy: TimeoutPolicy) -> JobTimeouts:
    """The job's task heartbeats and timeouts, from its length and the backlog the stack accepts."""
    # Worst case, one worker renders the whole job: the last segment waits behind all the others.
    own_queue_s = frame_count * policy.engine_seconds_per_frame
    waiting_s = policy.accepted_backlog_s + own_queue_s
    render_heartbeat = policy.beat_interval_s + policy.redelivery_s + waiting_s + MARGIN_S
    render_timeout = waiting_s + policy.max_attempts * (
        policy.attempt_s(longest_segment_frames) + policy.redelivery_s + policy.beat_interval_s
    )
    merge_attempt = policy.merge_base_s + frame_count * policy.merge_seconds_per_frame
    merge_heartbeat = policy.beat_interval_s + policy.redelivery_s + policy.accepted_backlog_s + MARGIN_S
    merge_timeout = policy.accepted_backlog_s + policy.max_attempts * (merge_attempt + policy.redelivery_s)
    # The analysis runs before any of the job's segments: it waits behind other jobs only.
    analysis_heartbeat = policy.beat_interval_s + policy.redelivery_s + policy.accepted_backlog_s + MARGIN_S
    analysis_timeout = policy.accepted_backlog_s + policy.max_attempts * (
        policy.analysis_attempt_s(frame_count) + policy.redelivery_s + policy.beat_interval_s
    )
    render_h, merge_h, analysis_h = (
        _seconds(value) for value in (render_heartbeat, merge_heartbeat, analysis_heartbeat)
    )
    return JobTimeouts(
        render_heartbeat_s=render_h,
        render_timeout_s=max(_seconds(render_timeout + MARGIN_S), render_h + MARGIN_S),
        merge_heartbeat_s=merge_h,
        merge_timeout_s=max(_seconds(merge_timeout + MARGIN_S), merge_h + MARGIN_S),
        analysis_heartbeat_s=analysis_h,
        analysis_timeout_s=max(_seconds(analysis_timeout + MARGIN_S), analysis_h + MARGIN_S),
    )


def _seconds(value: float) -> int:
    return min(MAX_TASK_SECONDS, math.ceil(value))


def check(timeouts: JobTimeouts, policy: TimeoutPolicy, frame_count: int, longest_segment_frames: int) -> list[str]:
    """Every way the clocks could let a recoverable segment's token die; empty when they hold."""
    problems = []
    if policy.beat_interval_s >= policy.visibility_s:
        problems.append(f"beats every {policy.beat_interval_s} s do not renew a {policy.visibility_s} s visibility")
    if policy.visibility_s < 30:
        problems.append(f"visibility {policy.visibility_s} s leaves no slack for a slow API call")
    waiting = policy.accepted_backlog_s + frame_count * policy.engine_seconds_per_frame
    gap = policy.beat_interval_s + policy.redelivery_s + waiting
    if timeouts.render_heartbeat_s <= gap:
        problems.append(
            f"render heartbeat {timeouts.render_heartbeat_s} s is not longer than the longest silence of a token "
            f"({gap:.0f} s: a beat interval, a redelivery and the backlog)"
        )
    needed = waiting + policy.max_attempts * (policy.attempt_s(longest_segment_frames) + policy.redelivery_s)
    if timeouts.render_timeout_s <= needed:
        problems.append(
            f"render timeout {timeouts.render_timeout_s} s does not cover the backlog and "
            f"{policy.max_attempts} attempts with their redeliveries ({needed:.0f} s)"
        )
    quiet = policy.beat_interval_s + policy.redelivery_s + policy.accepted_backlog_s
    if timeouts.analysis_heartbeat_s <= quiet:
        problems.append(
            f"analysis heartbeat {timeouts.analysis_heartbeat_s} s is not longer than the longest silence of its "
            f"token ({quiet:.0f} s)"
        )
    analysing = policy.accepted_backlog_s + policy.max_attempts * (
        policy.analysis_attempt_s(frame_count) + policy.redelivery_s
    )
    if timeouts.analysis_timeout_s <= analysing:
        problems.append(
            f"analysis timeout {timeouts.analysis_timeout_s} s does not cover the backlog and {policy.max_attempts} "
            f"attempts of {policy.analysis_attempt_s(frame_count):.0f} s at the whole target ({analysing:.0f} s)"
        )
    for name, heartbeat, timeout in (
        ("render", timeouts.render_heartbeat_s, timeouts.render_timeout_s),
        ("merge", timeouts.merge_heartbeat_s, timeouts.merge_timeout_s),
        ("analysis", timeouts.analysis_heartbeat_s, timeouts.analysis_timeout_s),
    ):
        if heartbeat >= timeout:
            problems.append(f"{name} heartbeat {heartbeat} s must be shorter than its timeout {timeout} s")
        if timeout > MAX_TASK_SECONDS:
            problems.append(f"{name} timeout {timeout} s is over Step Functions' limit")
    return problems
