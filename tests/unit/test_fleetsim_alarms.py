"""Issue 45: template.yaml's scaling alarms, with CloudWatch's lag and re-invoked actions, keep a woken task."""

from __future__ import annotations

from typing import Any

from cfnlint.decode import cfn_yaml

from benchmarks.fleetsim.alarms import WakeRun, load_template, parameter_defaults, run_wake
from fusionfleet.fleet.wake import WakePolicy, raised_count

# MergeIdleAlarm and its policy's step as they were before 860669f: in ALARM whenever the queue is idle.
OLD_MERGE_IDLE = """
MergeIdleAlarm:
  Type: AWS::CloudWatch::Alarm
  Properties:
    ComparisonOperator: LessThanOrEqualToThreshold
    Threshold: 0
    EvaluationPeriods: 10
    DatapointsToAlarm: 10
    TreatMissingData: breaching
    AlarmActions: [!Ref MergeScaleInPolicy]
    Metrics:
      - Id: waiting
        ReturnData: false
        MetricStat:
          Period: 60
          Stat: Maximum
          Metric:
            Namespace: AWS/SQS
            MetricName: ApproximateNumberOfMessagesVisible
            Dimensions: [{Name: QueueName, Value: !GetAtt MergeQueue.QueueName}]
      - Id: in_flight
        ReturnData: false
        MetricStat:
          Period: 60
          Stat: Maximum
          Metric:
            Namespace: AWS/SQS
            MetricName: ApproximateNumberOfMessagesNotVisible
            Dimensions: [{Name: QueueName, Value: !GetAtt MergeQueue.QueueName}]
      - Id: merge_work
        Expression: FILL(waiting, 0) + FILL(in_flight, 0)
        ReturnData: true
"""


def _old_merge_template() -> dict[str, Any]:
    template = load_template()
    template["Resources"]["MergeIdleAlarm"] = cfn_yaml.loads(OLD_MERGE_IDLE)["MergeIdleAlarm"]
    steps = template["Resources"]["MergeScaleInPolicy"]["Properties"]["StepScalingPolicyConfiguration"]
    steps["StepAdjustments"] = [{"MetricIntervalUpperBound": 0, "ScalingAdjustment": -100}]
    return template


def _merge_wake(template: dict[str, Any], after_s: float = 1200.0) -> WakeRun:
    # A Fargate task takes about a minute to start; the merge is sent right after the wake.
    return run_wake(
        template, "MergeScalableTarget", "MergeQueue", start_s=60, wake_to=lambda _: 1, messages=1, work_s=30,
        after_s=after_s,
    )  # fmt: skip


def _render_wake(template: dict[str, Any], minimum: int) -> WakeRun:
    defaults = parameter_defaults(template)
    policy = WakePolicy(int(defaults["RenderMaxTasks"]), float(defaults["RenderBacklogPerTask"]))
    segments = 8
    # A GPU host boots in about four minutes; the slicer raises the count as fusionfleet.fleet.wake does.
    return run_wake(
        template, "RenderScalableTarget", "RenderQueueNormal", start_s=240,
        wake_to=lambda desired: raised_count(desired, segments, policy) or desired,
        messages=segments, work_s=120, parameters={"RenderMinTasks": minimum},
    )  # fmt: skip


def test_the_old_merge_idle_alarm_undoes_wake_merge_before_the_task_takes_the_merge() -> None:
    # GIVEN the merge service at zero for 30 minutes under the old alarm (in ALARM all along)
    # WHEN WakeMerge sets it to 1 and sends the merge
    run = _merge_wake(_old_merge_template())
    # THEN the scale-in, invoked again at the next evaluation, stops the woken task while it starts
    assert run.activities[0][1:] == ("MergeScaleInPolicy", 1, 0)
    assert run.stopped_before_work >= 1
    # and the merge waits for the backlog alarm's task, minutes later
    assert run.first_taken_s is not None and run.first_taken_s > 120


def test_the_template_merge_alarms_keep_the_woken_task_until_it_has_merged_then_scale_to_zero() -> None:
    # GIVEN template.yaml's alarms, WHEN WakeMerge wakes the idle service
    run = _merge_wake(load_template(), after_s=1500)
    # THEN the woken task takes the merge as soon as it runs
    assert run.first_taken_s == 60
    assert not [a for a in run.activities if a[1] == "MergeScaleInPolicy" and a[0] < 1800 + 60 + 30]
    # and the service goes back to zero once idle for 10 minutes (the step matches the alarm's breach)
    assert run.activities[-1][1] == "MergeScaleInPolicy" and run.activities[-1][3] == 0


def test_the_render_wake_is_not_cut_back_by_scale_in_while_woken_tasks_start() -> None:
    # GIVEN one render task kept warm (RenderMinTasks 1), idle for 30 minutes, WHEN the slicer raises the
    # service for an 8-segment job
    run = _render_wake(load_template(), minimum=1)
    # THEN no scale-in happens before the woken tasks have taken their segments
    assert [a for a in run.activities if a[3] < a[2]] == []
    assert run.stopped_before_work == 0
    assert run.all_taken_s is not None and run.all_taken_s <= 240 + 120 + 5  # two rounds of four


def test_the_render_wake_from_zero_keeps_its_tasks() -> None:
    run = _render_wake(load_template(), minimum=0)
    assert [a for a in run.activities if a[3] < a[2]] == []
    assert run.stopped_before_work == 0


def test_target_tracking_scale_in_cut_the_render_wake_back() -> None:
    # GIVEN the render scaling as it was (target tracking scaling in, no idle alarm)
    template = load_template()
    config = template["Resources"]["RenderBacklogTracking"]["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    config.pop("DisableScaleIn", None)
    template["Resources"].pop("RenderIdleAlarm", None)
    # WHEN the slicer wakes a warm idle fleet
    run = _render_wake(template, minimum=1)
    # THEN target tracking's scale-in alarm, in ALARM on stale datapoints, sets it back to 1 while the
    # woken tasks start
    cut = [a for a in run.activities if a[3] < a[2]]
    assert cut and cut[0][1] == "RenderBacklogTracking:in" and cut[0][0] - 1800 < 60
    assert run.stopped_before_work == cut[0][2] - cut[0][3]
