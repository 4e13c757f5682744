"""CloudWatch alarms and Application Auto Scaling as they act on a woken ECS service (issue 45).

The fleet model (model.py) scales with `fusionfleet.fleet.autoscale.decide` on live numbers. On AWS the
scaling is alarms on metrics, and they behave differently: a period's datapoint arrives a minute or more
after the period ends, an alarm in ALARM invokes its scaling policy again at every evaluation (not once
on the transition), a step policy's cooldown blocks only that policy's next scale-in, and a target
tracking policy scales in by (desired count × metric / target) from its own 15-minute alarm. A direct
UpdateService (the state machine's WakeMerge, the slicer's wake) starts no cooldown, so a scale-in alarm
already in ALARM with a stale datapoint cuts it back while the woken tasks are still starting (and a
starting task has not protected itself).

This module reads the alarms and policies of template.yaml itself (thresholds, evaluation periods,
missing-data treatment, metric math, adjustments, cooldowns, target tracking's target and DisableScaleIn)
and runs them second by second against one service, its queue, a wake and the work sent after it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PERIOD_S = 60
# Alarms are evaluated once a minute, at a moment of their own: half a minute after a wake here.
EVALUATION_OFFSET_S = 30

# CloudWatch's comparison operators, and the two alarms target tracking creates for itself (AWS's
# documented defaults for a 1-minute metric: 3 of 3 above the target, 15 of 15 below 90 % of it).
COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}
TARGET_HIGH_PERIODS = 3
TARGET_LOW_PERIODS = 15
TARGET_LOW_SHARE = 0.9


def load_template(path: Path = ROOT / "template.yaml") -> dict[str, Any]:
    from cfnlint.decode import cfn_yaml  # a dev tool: only the simulation and its tests read the template

    return dict(cfn_yaml.load(str(path)))


def parameter_defaults(template: Mapping[str, Any]) -> dict[str, Any]:
    return {name: spec.get("Default") for name, spec in template.get("Parameters", {}).items()}


def resolve(value: Any, parameters: Mapping[str, Any]) -> Any:
    """!Ref of a parameter to its value (default or override), !Sub of parameters; other intrinsics kept."""
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref" and argument in parameters:
            return parameters[argument]
        if function == "Fn::Sub" and isinstance(argument, str):
            return re.sub(r"\$\{(\w+)\}", lambda m: str(parameters.get(m.group(1), m.group(0))), argument)
    if isinstance(value, dict):
        return {key: resolve(item, parameters) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, parameters) for item in value]
    return value


# ---------------------------------------------------------------------------------------- the world
@dataclass
class Task:
    requested_s: float
    running_s: float  # when it can poll (Fargate pull, or a GPU host's boot)
    protected: bool = False
    busy_until: float = 0.0
    stopped_s: float | None = None
    took_work: bool = False


@dataclass
class Service:
    """An ECS service: desired count, tasks that start after `start_s`, scale-in sparing protected tasks."""

    start_s: float
    desired: int = 0
    tasks: list[Task] = field(default_factory=list)
    stopped_before_work: int = 0

    def live(self) -> list[Task]:
        return [t for t in self.tasks if t.stopped_s is None]

    def running(self, now: float) -> list[Task]:
        return [t for t in self.live() if t.running_s <= now]

    def reconcile(self, now: float) -> None:
        live = self.live()
        for _ in range(self.desired - len(live)):
            self.tasks.append(Task(now, now + self.start_s))
        surplus = len(live) - self.desired
        if surplus <= 0:
            return
        # Pending tasks first, then idle running ones; a protected task is never chosen.
        candidates = [t for t in live if t.running_s > now] + [t for t in live if t.running_s <= now]
        for task in [t for t in candidates if not t.protected][:surplus]:
            task.stopped_s = now
            if not task.took_work:
                self.stopped_before_work += 1


@dataclass
class Queue:
    visible: int = 0
    in_flight: int = 0


@dataclass
class World:
    service: Service
    queue: Queue
    work_s: float  # one message's work once taken
    queue_name: str = ""  # the template's queue resource the work goes through
    # What the metrics read: AWS/SQS and ECS / Container Insights names to a live value (None: no datapoint).
    samples: list[dict[str, float | None]] = field(default_factory=list)

    def step(self, now: float) -> None:
        for task in self.service.running(now):
            if task.protected and task.busy_until <= now:
                task.protected = False  # done: the message deleted, protection cleared
                self.queue.in_flight -= 1
            if not task.protected and self.queue.visible > 0:
                self.queue.visible -= 1
                self.queue.in_flight += 1
                task.protected = task.took_work = True
                task.busy_until = now + self.work_s

    def sample(self, now: float) -> dict[str, float | None]:
        running = len(self.service.running(now))
        return {
            f"ApproximateNumberOfMessagesVisible@{self.queue_name}": float(self.queue.visible),
            f"ApproximateNumberOfMessagesNotVisible@{self.queue_name}": float(self.queue.in_flight),
            # ECS publishes a service's CPUUtilization only while a task of it runs.
            "CPUUtilization": float(running) if running else None,
            "RunningTaskCount": float(running),
            "DesiredTaskCount": float(self.service.desired),
            "PendingTaskCount": float(len(self.service.live()) - running),
        }


# ---------------------------------------------------------------------------------------- metrics
def _fill(value: float | None, default: float) -> float:
    return default if value is None else value


def _if(condition: Any, then: Any, otherwise: Any) -> Any:
    if condition is None:
        return None
    return then if condition else otherwise


def _math(expression: str, values: Mapping[str, float | None]) -> float | None:
    """CloudWatch metric math for the forms the template uses (IF, FILL, AND, OR, + - * /, comparisons)."""
    python = re.sub(r"\bAND\b", " and ", re.sub(r"\bOR\b", " or ", expression))
    try:
        result = eval(
            python, {"__builtins__": {}, "IF": _if, "FILL": _fill}, dict(values)
        )  # the template's own expressions, no builtins
    except (ZeroDivisionError, TypeError):
        return None  # a division by zero, or a bare metric with no datapoint: no datapoint
    return None if result is None else float(result)


@dataclass(frozen=True)
class MetricQuery:
    id: str
    name: str = ""
    expression: str = ""
    returns: bool = False


def _metric_name(metric: Mapping[str, Any]) -> str:
    name = str(metric["MetricName"])
    for dimension in metric.get("Dimensions", []):
        value = dimension["Value"]
        if dimension["Name"] == "QueueName" and isinstance(value, dict) and "Fn::GetAtt" in value:
            name += "@" + value["Fn::GetAtt"][0]  # one queue's metric, not every queue's
    return name


def metric_queries(properties: Mapping[str, Any]) -> list[MetricQuery]:
    if "Metrics" not in properties:  # a single-metric alarm
        return [MetricQuery("m", name=_metric_name(properties), returns=True)]
    queries = []
    for metric in properties["Metrics"]:
        stat = metric.get("MetricStat")
        name = _metric_name(stat["Metric"]) if stat else ""
        queries.append(
            MetricQuery(
                metric["Id"],
                name=name,
                expression=metric.get("Expression", ""),
                returns=bool(metric.get("ReturnData", True)),
            )
        )
    return queries


def evaluate(queries: list[MetricQuery], sample: Mapping[str, float | None]) -> float | None:
    # Queues other than the simulated one are empty (SQS publishes 0 for them).
    values: dict[str, float | None] = {
        q.id: sample.get(q.name, 0.0 if "@" in q.name else None) for q in queries if q.name
    }
    for query in queries:
        if query.expression:
            values[query.id] = _math(query.expression, values)
    (returned,) = [q for q in queries if q.returns]
    return values[returned.id]


# ---------------------------------------------------------------------------------------- scaling
@dataclass
class Target:
    """An Application Auto Scaling scalable target on the service's desired count."""

    service: Service
    minimum: int
    maximum: int
    activities: list[tuple[float, str, int, int]] = field(default_factory=list)  # (t, policy, from, to)

    def set(self, now: float, policy: str, count: int) -> bool:
        count = max(self.minimum, min(self.maximum, count))
        before = self.service.desired
        if count == before:
            return False  # no activity: no cooldown starts
        self.service.desired = count
        self.activities.append((now, policy, before, count))
        return True


@dataclass
class StepPolicy:
    name: str
    adjustment_type: str
    cooldown_s: float
    steps: list[tuple[float | None, float | None, int]]  # (lower, upper, adjustment), bounds off the threshold
    last_s: float = -math.inf

    def apply(self, target: Target, now: float, value: float, threshold: float, below: bool) -> None:
        # AWS: for an alarm breaching above its threshold a step's lower bound is inclusive and its upper
        # exclusive; below, the other way round. A value matching no step scales nothing.
        delta = value - threshold
        adjustment = next(
            (
                a
                for lo, hi, a in self.steps
                if (lo is None or (delta > lo if below else delta >= lo))
                and (hi is None or (delta <= hi if below else delta < hi))
            ),
            None,
        )
        if adjustment is None or now < self.last_s + self.cooldown_s:
            return
        current = target.service.desired
        if self.adjustment_type == "ExactCapacity":
            count = adjustment
        elif self.adjustment_type == "PercentChangeInCapacity":
            count = current + math.trunc(current * adjustment / 100)
        else:
            count = current + adjustment
        if target.set(now, self.name, count):
            self.last_s = now


@dataclass
class Alarm:
    name: str
    queries: list[MetricQuery]
    compare: Callable[[float, float], bool]
    threshold: float
    periods: int
    to_alarm: int
    missing: str  # breaching | notBreaching | missing | ignore
    action: Callable[[float, float], None] | None = None  # (now, newest value)
    state: str = "INSUFFICIENT_DATA"
    alarm_evaluations: int = 0

    def evaluate(self, now: float, datapoints: list[float | None]) -> None:
        window = datapoints[-self.periods :]
        if not window:
            return
        breaching = 0
        present = 0
        for value in window:
            if value is None:
                if self.missing == "breaching":
                    breaching += 1
                    present += 1
                elif self.missing == "notBreaching":
                    present += 1
                continue
            present += 1
            breaching += self.compare(value, self.threshold)
        if present == 0:
            return  # missing / ignore with no data: the state stays
        self.state = "ALARM" if breaching >= min(self.to_alarm, present) and breaching > 0 else "OK"
        if self.state == "ALARM":
            self.alarm_evaluations += 1
            if self.action is not None:
                newest = next((v for v in reversed(window) if v is not None), self.threshold)
                self.action(now, newest)


def alarm_from(name: str, properties: Mapping[str, Any]) -> Alarm:
    return Alarm(
        name,
        metric_queries(properties),
        COMPARE[properties["ComparisonOperator"]],
        float(properties["Threshold"]),
        int(properties["EvaluationPeriods"]),
        int(properties.get("DatapointsToAlarm", properties["EvaluationPeriods"])),
        str(properties.get("TreatMissingData", "missing")),
    )


def step_policy_from(name: str, properties: Mapping[str, Any]) -> StepPolicy:
    config = properties["StepScalingPolicyConfiguration"]
    steps = [
        (
            None if s.get("MetricIntervalLowerBound") is None else float(s["MetricIntervalLowerBound"]),
            None if s.get("MetricIntervalUpperBound") is None else float(s["MetricIntervalUpperBound"]),
            int(s["ScalingAdjustment"]),
        )
        for s in config["StepAdjustments"]
    ]
    return StepPolicy(name, config["AdjustmentType"], float(config.get("Cooldown", 0)), steps)


def _target_tracking(name: str, properties: Mapping[str, Any], target: Target) -> list[Alarm]:
    """Target tracking's own two alarms: scale out above the target, scale in (unless disabled) below."""
    config = properties["TargetTrackingScalingPolicyConfiguration"]
    goal = float(config["TargetValue"])
    queries = metric_queries(config["CustomizedMetricSpecification"])
    cooldowns = {"out": float(config.get("ScaleOutCooldown", 300)), "in": float(config.get("ScaleInCooldown", 300))}
    last = {"out": -math.inf, "in": -math.inf}

    def act(direction: str) -> Callable[[float, float], None]:
        def apply(now: float, value: float) -> None:
            if now < last[direction] + cooldowns[direction]:
                return
            count = max(target.minimum, min(target.maximum, math.ceil(target.service.desired * value / goal)))
            if (direction == "out") != (count > target.service.desired):
                return
            if target.set(now, f"{name}:{direction}", count):
                last[direction] = now

        return apply

    high = Alarm(f"{name}:high", queries, COMPARE["GreaterThanThreshold"], goal, TARGET_HIGH_PERIODS,
                 TARGET_HIGH_PERIODS, "missing", act("out"))  # fmt: skip
    alarms = [high]
    if not bool(config.get("DisableScaleIn", False)):
        low = Alarm(f"{name}:low", queries, COMPARE["LessThanThreshold"], goal * TARGET_LOW_SHARE,
                    TARGET_LOW_PERIODS, TARGET_LOW_PERIODS, "missing", act("in"))  # fmt: skip
        alarms.append(low)
    return alarms


def scaling_of(
    template: Mapping[str, Any], scalable_target: str, parameters: Mapping[str, Any], target: Target
) -> list[Alarm]:
    """Every alarm that scales `scalable_target` (a CloudWatch alarm naming one of its step policies, and
    each target tracking policy's own alarms), wired to act on `target`."""
    resources = template["Resources"]
    policies = {
        name: resolve(r["Properties"], parameters)
        for name, r in resources.items()
        if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"
        and r["Properties"]["ScalingTargetId"] == {"Ref": scalable_target}
    }
    alarms: list[Alarm] = []
    for name, properties in policies.items():
        if properties["PolicyType"] == "TargetTrackingScaling":
            alarms.extend(_target_tracking(name, properties, target))
    for name, resource in resources.items():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        properties = resolve(resource["Properties"], parameters)
        named = [a["Ref"] for a in properties.get("AlarmActions", []) if isinstance(a, dict) and "Ref" in a]
        for policy_name in [n for n in named if n in policies]:
            alarm = alarm_from(name, properties)
            policy = step_policy_from(policy_name, policies[policy_name])
            below = properties["ComparisonOperator"].startswith("Less")
            alarm.action = lambda now, value, p=policy, a=alarm, b=below: p.apply(target, now, value, a.threshold, b)
            alarms.append(alarm)
    return alarms


# ---------------------------------------------------------------------------------------- a wake
@dataclass(frozen=True)
class WakeRun:
    woken_to: int
    stopped_before_work: int  # woken tasks stopped (pending or idle) before they took a message
    first_taken_s: float | None  # wake → the first message taken
    all_taken_s: float | None  # wake → every message taken
    activities: list[tuple[float, str, int, int]]


def run_wake(
    template: Mapping[str, Any],
    scalable_target: str,
    queue: str,
    *,
    start_s: float,
    wake_to: Callable[[int], int],
    messages: int,
    work_s: float,
    lag_s: float = 90.0,
    before: Callable[[World, float], None] | None = None,
    warm_s: float = 1800.0,
    after_s: float = 1200.0,
    parameters: Mapping[str, Any] | None = None,
) -> WakeRun:
    """`warm_s` of history (`before` shapes it: a task idling, small jobs...), then at `warm_s` a direct
    UpdateService to `wake_to(desired)` and `messages` sent a second later; alarms evaluated every minute on
    the datapoints `lag_s` old or older, each in ALARM invoking its policy again."""
    values = {**parameter_defaults(template), **(parameters or {})}
    resource = template["Resources"][scalable_target]["Properties"]
    service = Service(start_s)
    target = Target(
        service, int(resolve(resource["MinCapacity"], values)), int(resolve(resource["MaxCapacity"], values))
    )
    service.desired = target.minimum
    world = World(service, Queue(), work_s, queue)
    alarms = scaling_of(template, scalable_target, values, target)
    published: list[tuple[float, dict[str, float | None]]] = []  # (available at, the period's sample)
    series: dict[str, list[float | None]] = {a.name: [] for a in alarms}
    seen = 0
    sent = 0
    first: float | None = None
    every: float | None = None
    stopped_at_wake = 0
    for second in range(int(warm_s + after_s)):
        now = float(second)
        if before is not None and now < warm_s:
            before(world, now)
        if now == warm_s:
            stopped_at_wake = service.stopped_before_work
            service.desired = max(service.desired, wake_to(service.desired))  # no AAS activity, no cooldown
        if now == warm_s + 1:
            world.queue.visible += messages
            sent = messages
        service.reconcile(now)
        world.step(now)
        if sent and first is None and world.queue.visible < sent:
            first = now - warm_s
        if sent and every is None and world.queue.visible == 0:
            every = now - warm_s
        if second % PERIOD_S == PERIOD_S - 1:  # the period's datapoint: its state at the end of the minute
            published.append((now + 1 + lag_s, world.sample(now)))
        if second % PERIOD_S == EVALUATION_OFFSET_S:
            while seen < len(published) and published[seen][0] <= now:
                for alarm in alarms:
                    series[alarm.name].append(evaluate(alarm.queries, published[seen][1]))
                seen += 1
            for alarm in alarms:
                alarm.evaluate(now, series[alarm.name])
            service.reconcile(now)
    woken = [t for t in service.tasks if t.requested_s >= warm_s]
    return WakeRun(
        woken_to=len(woken),
        stopped_before_work=service.stopped_before_work - stopped_at_wake,
        first_taken_s=first,
        all_taken_s=every,
        activities=[a for a in target.activities if a[0] >= warm_s],
    )
