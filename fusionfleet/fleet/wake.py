"""Waking a cold render fleet the moment a job starts, instead of when queue metrics notice it.

On AWS the render service scales on SQS metrics (target tracking, and a wake alarm from zero). An idle
queue's metrics arrive in minutes (one-minute periods, published late), so a cold fleet would start its
first GPU host only after they do. The slicer knows at once how many segments a job has: right after
StartExecution it raises the service's desired count to what the job needs, if it is below that.

It only ever raises, up to the fleet's maximum: scaling in stays with target tracking. A failure to
raise is logged and never fails the job: the alarms still wake the fleet, minutes later. Locally the
workers are processes (`NoWaker`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Protocol

from fusionfleet.environment import settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WakePolicy:
    max_tasks: int
    # Segments per task target tracking aims for (RenderBacklogPerTask).
    backlog_per_task: float = settings.RENDER_BACKLOG_PER_TASK.default

    def __post_init__(self) -> None:
        if self.max_tasks < 1 or self.backlog_per_task <= 0:
            raise ValueError("waking needs max_tasks >= 1 and a positive backlog per task")


def raised_count(desired: int, segments: int, policy: WakePolicy) -> int | None:
    """The desired count a job of `segments` needs when the service asks for fewer, else None."""
    if segments <= 0:
        return None
    needed = min(policy.max_tasks, max(1, math.ceil(segments / policy.backlog_per_task)))
    return needed if desired < needed else None


class FleetWaker(Protocol):
    def wake(self, segments: int) -> None:
        """Make sure the fleet is starting enough workers for a job of `segments`; never raises."""


class NoWaker:
    """Where workers are not a service to scale (the local stack): nothing to do."""

    def wake(self, segments: int) -> None:
        return None


class EcsServiceWaker:
    """Raises an ECS service's desired count (DescribeServices, UpdateService) for a new job."""

    def __init__(self, client: Any, cluster: str, service: str, policy: WakePolicy) -> None:
        self._ecs = client
        self._cluster = cluster
        self._service = service
        self._policy = policy

    def wake(self, segments: int) -> None:
        try:
            response = self._ecs.describe_services(cluster=self._cluster, services=[self._service])
            (service,) = response["services"]
            desired = int(service["desiredCount"])
            raised = raised_count(desired, segments, self._policy)
            if raised is None:
                return
            self._ecs.update_service(cluster=self._cluster, service=self._service, desiredCount=raised)
            logger.info(
                "render service %s raised from %s to %s tasks for %s segments", self._service, desired, raised, segments
            )
        except Exception as error:  # waking early is a courtesy: the scaling alarms still wake the fleet
            logger.warning("render service %s not raised (%s); autoscaling will start it", self._service, error)
