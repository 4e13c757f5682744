"""`fusionfleet aws teardown --stack NAME`: what lets a stack's deletion (or a failed create's rollback) finish.

CloudFormation waits on three things it cannot undo itself: GPU hosts protected from scale-in (new
instances are, for the capacity provider's managed termination protection, and ECS lifts a host's
protection only once no task runs there, which a stopping service may never reach), services that still
want tasks, and a work bucket that is not empty. This sets both services to zero, lifts every host's
scale-in protection and takes the Auto Scaling group to zero, and empties the work bucket (plans,
segments, records: all derived, nothing a user uploaded). The media bucket and the keys are retained by
the template and left alone. Run it before `sam delete`, or while a deletion or rollback waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Say = Callable[[str], None]
PROTECTION_BATCH = 50  # SetInstanceProtection takes at most 50 instances a call


@dataclass(frozen=True)
class StackParts:
    cluster: str | None
    services: tuple[str, ...]
    auto_scaling_group: str | None
    work_bucket: str | None

    @classmethod
    def from_resources(cls, resources: list[Mapping[str, Any]]) -> StackParts:
        """From ListStackResources' summaries (logical id → physical id)."""
        live = [r for r in resources if r.get("PhysicalResourceId") and r.get("ResourceStatus") != "DELETE_COMPLETE"]
        physical = {str(r["LogicalResourceId"]): str(r["PhysicalResourceId"]) for r in live}
        services = tuple(physical[name] for name in ("RenderService", "MergeService") if name in physical)
        return cls(physical.get("RenderCluster"), services, physical.get("GpuAutoScalingGroup"),
                   physical.get("WorkBucket"))  # fmt: skip


def stack_parts(cloudformation: Any, stack: str) -> StackParts:
    resources: list[Mapping[str, Any]] = []
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack):
        resources.extend(page["StackResourceSummaries"])
    return StackParts.from_resources(resources)


def teardown(parts: StackParts, ecs: Any, autoscaling: Any, s3: Any, say: Say, empty_work: bool = True) -> None:
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
