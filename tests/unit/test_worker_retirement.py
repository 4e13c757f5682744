"""Issue 45: a worker whose task's deployment is replaced (or whose service is deleted) stops taking work
between segments and clears its protection, instead of holding the deployment for the whole backlog."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber

from fusionfleet.adapters.aws import AwsTarget
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.lifecycle.protection import EcsTaskProtection, ProtectionPolicy
from gpu_worker.lifecycle.retirement import EcsRetirement
from gpu_worker.lifecycle.stopping import StopSignal
from tests.support.fakes import FakeOrchestrator, FakeQueue
from tests.unit.test_task_protection import QUEUE, Agent, Step, WaitingHandler

CLUSTER = "arn:aws:ecs:us-east-1:123456789012:cluster/farm"
TASK = "arn:aws:ecs:us-east-1:123456789012:task/farm/0123456789abcdef"


@pytest.fixture
def agent() -> Iterator[Agent]:
    stand_in = Agent()  # the ECS agent's task protection endpoint, as test_task_protection stands it in
    stand_in.thread.start()
    yield stand_in
    stand_in.server.shutdown()
    stand_in.server.server_close()


class Flag:
    def __init__(self) -> None:
        self.why: str | None = None

    def due(self) -> str | None:
        return self.why


def test_a_retiring_worker_finishes_its_segment_clears_protection_and_leaves_the_backlog(agent: Agent) -> None:
    # GIVEN a protected worker on ECS with a backlog of five segments
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE, max_receive_count=3)
    for n in range(5):
        queue.send(QUEUE, Step(task_token=f"t{n}", seconds=0.3).model_dump_json())
    handler = WaitingHandler(agent)
    retirement = Flag()
    protection = EcsTaskProtection(agent.uri, ProtectionPolicy(expires_minutes=1, renew_after_s=0))
    subject = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3), KeepPolicy(visibility_s=3),
        StopSignal(), idle_wait_s=0, protection=protection, retirement=retirement,
    )  # fmt: skip
    runner = threading.Thread(target=subject.run)
    runner.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and subject.completed < 1:
        time.sleep(0.01)
    # WHEN its deployment is replaced while it renders its second segment
    retirement.why = "deployment ecs-svc/1 is replaced by ecs-svc/2"
    runner.join(timeout=20)
    # THEN it finished the segment it held, took no more, and cleared its protection at once
    assert not runner.is_alive()
    assert subject.completed == 2
    assert queue.depth(QUEUE).visible == 3 and queue.depth(QUEUE).in_flight == 0
    assert agent.puts()[-1] == {"ProtectionEnabled": False} and not agent.enabled


def _stubbed(deployments: list[dict[str, Any]], status: str = "ACTIVE", started_by: str = "ecs-svc/1") -> Any:
    ecs = AwsTarget(region="us-east-1").client("ecs")
    stubber = Stubber(ecs)
    stubber.add_response(
        "describe_tasks",
        {"tasks": [{"taskArn": TASK, "group": "service:render", "startedBy": started_by}]},
        {"cluster": CLUSTER, "tasks": [TASK]},
    )
    stubber.add_response(
        "describe_services",
        {"services": [{"serviceName": "render", "status": status, "deployments": deployments}]},
        {"cluster": CLUSTER, "services": ["render"]},
    )
    stubber.activate()
    return ecs


def _retirement(ecs: Any) -> EcsRetirement:
    return EcsRetirement(ecs, lambda: {"Cluster": CLUSTER, "TaskARN": TASK})


def test_a_task_of_the_primary_deployment_keeps_working() -> None:
    ecs = _stubbed([{"id": "ecs-svc/1", "status": "PRIMARY"}])
    assert _retirement(ecs).due() is None


def test_a_task_of_an_older_deployment_retires() -> None:
    ecs = _stubbed([{"id": "ecs-svc/2", "status": "PRIMARY"}, {"id": "ecs-svc/1", "status": "ACTIVE"}])
    assert _retirement(ecs).due() == "deployment ecs-svc/1 of render is replaced by ecs-svc/2"


def test_a_task_of_a_service_being_deleted_retires() -> None:
    ecs = _stubbed([{"id": "ecs-svc/1", "status": "PRIMARY"}], status="DRAINING")
    assert _retirement(ecs).due() == "service render is being deleted"


def test_an_unanswered_question_keeps_the_worker_working_and_is_asked_again_a_minute_later() -> None:
    ecs = AwsTarget(region="us-east-1").client("ecs")
    stubber = Stubber(ecs)
    stubber.add_client_error("describe_tasks", "ThrottlingException")
    stubber.activate()
    now = [0.0]
    subject = EcsRetirement(ecs, lambda: {"Cluster": CLUSTER, "TaskARN": TASK}, clock=lambda: now[0])
    assert subject.due() is None
    assert subject.due() is None  # within the minute: not asked again (the stubber has no more answers)
    stubber.assert_no_pending_responses()
