"""Whether this ECS task is being replaced or removed, so the worker stops taking work (issue 45).

A worker holding a segment protects its task from scale-in (lifecycle/protection.py), and ECS stops no
protected task in a deployment or a scale-to-zero either: it waits. A worker that took its next segment
while the backlog lasted stayed protected throughout, so a stack update changing WorkerImage (a new
deployment) or a service delete waited for the whole backlog, and CloudFormation timed out and rolled
back. ECS sends no signal to a protected task, so the worker asks between segments: its task's
deployment (DescribeTasks' startedBy) against the service's PRIMARY one, and the service still ACTIVE.
A worker that is retiring finishes the segment it holds, takes no more, clears its protection and exits.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class Retirement(Protocol):
    def due(self) -> str | None:
        """Why this worker should take no more work, or None."""


class NeverRetire:
    """Off ECS (the local stack): nothing replaces a worker behind its back."""

    def due(self) -> str | None:
        return None


def metadata_task(metadata_uri: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """The task metadata endpoint v4's /task (Cluster, TaskARN): link-local, plain HTTP."""
    with urllib.request.urlopen(metadata_uri.rstrip("/") + "/task", timeout=timeout_s) as response:
        answer = json.loads(response.read())
    return answer if isinstance(answer, dict) else {}


class EcsRetirement:
    """Asks ECS at most every `every_s` whether this task's deployment is still the service's primary."""

    def __init__(
        self,
        ecs: Any,
        task: Callable[[], dict[str, Any]],
        every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ecs = ecs
        self._task = task
        self._every_s = every_s
        self._clock = clock
        self._next_s = -float("inf")
        self._why: str | None = None

    def due(self) -> str | None:
        if self._why is not None or self._clock() < self._next_s:
            return self._why
        self._next_s = self._clock() + self._every_s
        try:
            self._why = self._ask()
        except Exception as error:  # an unanswered question keeps the worker working, as before
            logger.warning("could not tell whether this task is being replaced: %s", error)
        return self._why

    def _ask(self) -> str | None:
        metadata = self._task()
        cluster, arn = str(metadata["Cluster"]), str(metadata["TaskARN"])
        (task,) = self._ecs.describe_tasks(cluster=cluster, tasks=[arn])["tasks"]
        group = str(task.get("group", ""))
        if not group.startswith("service:"):
            return None  # a standalone task: no deployment replaces it
        service_name = group.removeprefix("service:")
        services = self._ecs.describe_services(cluster=cluster, services=[service_name])["services"]
        if not services or services[0].get("status") != "ACTIVE":
            return f"service {service_name} is being deleted"
        primary = [d for d in services[0].get("deployments", []) if d.get("status") == "PRIMARY"]
        started_by = str(task.get("startedBy", ""))
        if primary and started_by and started_by != primary[0]["id"]:
            return f"deployment {started_by} of {service_name} is replaced by {primary[0]['id']}"
        return None
