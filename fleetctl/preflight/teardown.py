"""`fusionfleet aws teardown --stack NAME`: what lets a stack's deletion (or a failed create's rollback) finish.

CloudFormation waits on what it cannot undo itself: GPU hosts protected from scale-in (new instances
are, for the capacity provider's managed termination protection, and ECS lifts a host's protection only
once no task runs there, which a stopping service may never reach), services that still want tasks, a
state machine with running executions (it stays DELETING while a task token waits, for hours, and its
name is fixed, so a redeploy under the same stack name fails meanwhile), and buckets that are not empty
(the work bucket, and the versioned dashboard bucket, whose old versions and delete markers count too).
This stops every running execution, purges the render and merge queues (their messages carry the
stopped executions' task tokens), sets both services to zero, lifts every host's scale-in protection and
takes the Auto Scaling group to zero, and empties the work bucket (plans, segments, records: all
derived, nothing a user uploaded) and the dashboard bucket (the published tenant page: `dashboard
publish` puts it back). The media bucket and the keys are retained by the template and left alone. Run
it before `sam delete`, or while a deletion or rollback waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fusionfleet.adapters.orchestrator import StepFunctions

Say = Callable[[str], None]
PROTECTION_BATCH = 50  # SetInstanceProtection takes at most 50 instances a call
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys (or versions) a call
# The queues whose messages carry task tokens of the executions teardown stops.
PURGED_QUEUES = ("RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow", "MergeQueue")


@dataclass(frozen=True)
class StackParts:
    cluster: str | None
    services: tuple[str, ...]
    auto_scaling_group: str | None
    work_bucket: str | None
    dashboard_bucket: str | None = None
    state_machine: str | None = None  # its ARN (a state machine's physical id)
    queues: tuple[str, ...] = ()  # the render and merge queues' URLs (a queue's physical id)

    @classmethod
    def from_resources(cls, resources: list[Mapping[str, Any]]) -> StackParts:
        """From ListStackResources' summaries (logical id → physical id)."""
        live = [r for r in resources if r.get("PhysicalResourceId") and r.get("ResourceStatus") != "DELETE_COMPLETE"]
        physical = {str(r["LogicalResourceId"]): str(r["PhysicalResourceId"]) for r in live}
        services = tuple(physical[name] for name in ("RenderService", "MergeService") if name in physical)
        queues = tuple(physical[name] for name in PURGED_QUEUES if name in physical)
        return cls(physical.get("RenderCluster"), services, physical.get("GpuAutoScalingGroup"),
                   physical.get("WorkBucket"), physical.get("DashboardBucket"), physical.get("RenderStateMachine"),
                   queues)  # fmt: skip


def stack_parts(cloudformation: Any, stack: str) -> StackParts:
    resources: list[Mapping[str, Any]] = []
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack):
        resources.extend(page["StackResourceSummaries"])
    return StackParts.from_resources(resources)


def teardown(
    parts: StackParts, ecs: Any, autoscaling: Any, s3: Any, say: Say, empty_work: bool = True,
    *, stepfunctions: Any, sqs: Any,
) -> None:  # fmt: skip
    # Executions first: a running one would send new messages to the queues purged next.
    if parts.state_machine:
        _stop_executions(stepfunctions, parts.state_machine, say)
    for queue in parts.queues:
        _purge(sqs, queue, say)
    if parts.cluster:
        for service in parts.services:
            try:
                ecs.update_service(cluster=parts.cluster, service=service, desiredCount=0)
                say(f"service {service.rsplit('/', 1)[-1]}: desired count 0")
            except (ecs.exceptions.ServiceNotFoundException, ecs.exceptions.ServiceNotActiveException):
                say(f"service {service.rsplit('/', 1)[-1]}: already gone")
    if parts.auto_scaling_group:
        _release_hosts(autoscaling, parts.auto_scaling_group, say)
    if parts.work_bucket and empty_work:
        say(f"work bucket {parts.work_bucket}: {_empty(s3, parts.work_bucket)} objects deleted")
    if parts.dashboard_bucket:
        deleted = _empty_versions(s3, parts.dashboard_bucket)
        say(f"dashboard bucket {parts.dashboard_bucket}: {deleted} versions and delete markers deleted")


def _stop_executions(stepfunctions: Any, state_machine: str, say: Say) -> None:
    running: list[str] = []
    try:
        running.extend(execution.arn for execution in StepFunctions(stepfunctions).running_executions(state_machine))
    except stepfunctions.exceptions.StateMachineDoesNotExist:
        say(f"state machine {state_machine.rsplit(':', 1)[-1]}: already gone")
        return
    for execution in running:
        try:
            stepfunctions.stop_execution(
                executionArn=execution, error="Teardown", cause="fusionfleet aws teardown: the stack is being deleted"
            )
        except stepfunctions.exceptions.ExecutionDoesNotExist:
            continue
    say(f"state machine {state_machine.rsplit(':', 1)[-1]}: {len(running)} running executions stopped")


def _purge(sqs: Any, queue: str, say: Say) -> None:
    name = queue.rsplit("/", 1)[-1]
    try:
        sqs.purge_queue(QueueUrl=queue)
        say(f"queue {name}: purged")
    except sqs.exceptions.PurgeQueueInProgress:
        say(f"queue {name}: a purge is already under way (SQS allows one a minute)")
    except sqs.exceptions.QueueDoesNotExist:
        say(f"queue {name}: already gone")


def _release_hosts(autoscaling: Any, group: str, say: Say) -> None:
    found = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"]
    if not found:
        say(f"Auto Scaling group {group}: already gone")
        return
    protected = [i["InstanceId"] for i in found[0].get("Instances", []) if i.get("ProtectedFromScaleIn")]
    for start in range(0, len(protected), PROTECTION_BATCH):
        autoscaling.set_instance_protection(
            AutoScalingGroupName=group, InstanceIds=protected[start : start + PROTECTION_BATCH],
            ProtectedFromScaleIn=False,
        )  # fmt: skip
    autoscaling.update_auto_scaling_group(AutoScalingGroupName=group, MinSize=0, DesiredCapacity=0)
    say(f"Auto Scaling group {group}: scale-in protection lifted from {len(protected)} hosts, desired 0")


def _empty(s3: Any, bucket: str) -> int:
    deleted = 0
    try:
        pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket=bucket))
    except s3.exceptions.NoSuchBucket:
        return 0
    for page in pages:
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            deleted += len(keys)
    return deleted


def _empty_versions(s3: Any, bucket: str) -> int:
    """Every version and delete marker of a versioned bucket: CloudFormation deletes only an empty one."""
    deleted = 0
    try:
        pages = list(s3.get_paginator("list_object_versions").paginate(Bucket=bucket))
    except s3.exceptions.NoSuchBucket:
        return 0
    versions = [
        {"Key": item["Key"], "VersionId": item["VersionId"]}
        for page in pages
        for item in (*page.get("Versions", []), *page.get("DeleteMarkers", []))
    ]
    for start in range(0, len(versions), DELETE_BATCH):
        batch = versions[start : start + DELETE_BATCH]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        deleted += len(batch)
    return deleted
