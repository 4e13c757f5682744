"""The render fleet's scaling rule, one pure function with two executors.

Backlog per worker against a target, as AWS's backlog-per-instance target tracking and KEDA's SQS
scaler do: the backlog is every render segment waiting *or being rendered* (in-flight counted, so
busy workers are not mistaken for surplus), and the target is how many segments one worker may have
ahead of it and still start the last within the acceptable latency:

    target = acceptable_latency_s / segment_cost_s          desired = ceil(backlog / target)

clamped to [minimum, maximum]. From zero workers a single waiting segment activates one worker (the
ratio has no denominator there). Scale-out waits `scale_out_cooldown_s` after the previous scale-out,
scale-in `scale_in_cooldown_s` after any change, so a fleet does not flap between polls. The local
autoscaler (`fleetctl/local/autoscaler.py`) applies it to worker processes, stopping only idle ones;
on AWS the template's target tracking on `(visible + in flight) / running` with `RenderBacklogPerTask`
and the same cooldowns is this rule (`AWS_COOLDOWNS`, checked by tests/static/test_template.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The template's target tracking cooldowns (scale-out, scale-in), seconds.
AWS_COOLDOWNS = (60, 300)


def backlog_target(acceptable_latency_s: float, segment_cost_s: float) -> float:
    """Segments one worker may have queued: those it clears within the acceptable latency (at least 1)."""
    if acceptable_latency_s <= 0 or segment_cost_s <= 0:
        raise ValueError("the acceptable latency and the segment cost must be positive")
    return max(1.0, acceptable_latency_s / segment_cost_s)


@dataclass(frozen=True)
class ScalingPolicy:
    minimum: int
    maximum: int
    backlog_per_worker: float = 1.0
    scale_out_cooldown_s: float = 5.0
    scale_in_cooldown_s: float = 30.0

    def __post_init__(self) -> None:
        if not 0 <= self.minimum <= self.maximum or self.maximum < 1:
            raise ValueError("workers must satisfy 0 <= minimum <= maximum and maximum >= 1")
        if self.backlog_per_worker <= 0:
            raise ValueError("the backlog per worker must be positive")


@dataclass(frozen=True)
class Backlog:
    """Render segments waiting in the queues, and being rendered (received, not yet deleted)."""

    waiting: int
    in_flight: int

    @property
    def total(self) -> int:
        return self.waiting + self.in_flight


@dataclass(frozen=True)
class ScalingState:
    """What the executor last asked for, and when it last scaled out and last changed at all."""

    desired: int
    last_scale_out_at: float = -math.inf
    last_change_at: float = -math.inf


@dataclass(frozen=True)
class Decision:
    desired: int
    wanted: int  # the rule's answer before cooldowns
    reason: str

    def state_after(self, state: ScalingState, now: float) -> ScalingState:
        if self.desired == state.desired:
            return state
        out = now if self.desired > state.desired else state.last_scale_out_at
        return ScalingState(self.desired, last_scale_out_at=out, last_change_at=now)


def wanted_workers(backlog: Backlog, policy: ScalingPolicy) -> int:
    """The rule without cooldowns: ceil(backlog / target) in [minimum, maximum]; from zero, one."""
    wanted = math.ceil(backlog.total / policy.backlog_per_worker)
    if backlog.total > 0:
        wanted = max(wanted, 1)  # activation from zero
    return min(max(wanted, policy.minimum), policy.maximum)


def decide(backlog: Backlog, state: ScalingState, policy: ScalingPolicy, now: float) -> Decision:
    wanted = wanted_workers(backlog, policy)
    current = min(max(state.desired, policy.minimum), policy.maximum)
    if wanted > current:
        if current > 0 and now - state.last_scale_out_at < policy.scale_out_cooldown_s:
            return Decision(current, wanted, f"scale-out cooling down ({backlog.total} segments)")
        # From zero there is no cooldown: a waiting job must not wait for one.
        return Decision(wanted, wanted, f"{backlog.total} segments, {policy.backlog_per_worker:g} per worker")
    if wanted < current:
        if now - state.last_change_at < policy.scale_in_cooldown_s:
            return Decision(current, wanted, f"scale-in cooling down ({backlog.total} segments)")
        return Decision(wanted, wanted, f"{backlog.total} segments, {policy.backlog_per_worker:g} per worker")
    return Decision(current, wanted, f"steady ({backlog.total} segments)")


def workers_to_stop(desired: int, running: int, idle: list[str]) -> list[str]:
    """Which workers go on scale-in: only idle ones, never more than the surplus."""
    return idle[: max(0, running - desired)]
