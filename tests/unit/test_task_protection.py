"""ECS task scale-in protection, against a small real HTTP server standing in for the ECS agent.

The real endpoint exists only inside an ECS task ($ECS_AGENT_URI); it cannot run here. The stand-in
speaks its contract as documented: PUT /task-protection/v1/state with {"ProtectionEnabled",
"ExpiresInMinutes"}, answering {"protection": {...}}, or {"failure": {...}} / {"error": {...}}.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fusionfleet.messages import SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.lifecycle.protection import (
    EcsTaskProtection,
    NoProtection,
    ProtectionPolicy,
    task_protection,
)
from gpu_worker.lifecycle.stopping import StopSignal
from tests.support.fakes import Clock, FakeOrchestrator, FakeQueue
from tests.support.scripted import StepHandler
from tests.support.tasks import StubTask

QUEUE = "https://sqs.fake/render-normal"
TASK_ARN = "arn:aws:ecs:us-east-1:123456789012:task/render/abc"


class Agent:
    """The stand-in agent: records each request; `answer` is what it says next (status, body)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.answer: tuple[int, dict[str, Any]] | None = None
        self.enabled = False
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                agent.requests.append(("PUT", self.path, body))
                status, answer = agent.answer or (200, agent.grant(body))
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/api/task-id"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def grant(self, body: dict[str, Any]) -> dict[str, Any]:
        self.enabled = bool(body["ProtectionEnabled"])
        return {"protection": {"ProtectionEnabled": self.enabled, "TaskArn": TASK_ARN, "ExpirationDate": None}}

    def puts(self) -> list[dict[str, Any]]:
        return [body for method, _path, body in self.requests if method == "PUT"]


@pytest.fixture
def agent() -> Iterator[Agent]:
    stand_in = Agent()
    stand_in.thread.start()
    yield stand_in
    stand_in.server.shutdown()
    stand_in.server.server_close()


def test_a_grant_outlasts_a_missed_beat_and_is_renewed_before_it_ends() -> None:
    # GIVEN the worker's default clocks: visibility 120 s, a beat every 40 s
    policy = ProtectionPolicy.for_keeping(120, 40)
    # THEN a grant lasts 6 minutes and is renewed after 160 s, leaving more than a hold's window
    assert (policy.expires_minutes, policy.renew_after_s) == (6, 160)
    assert policy.expires_minutes * 60 - policy.renew_after_s >= 120 + 40
    # AND the agent's bounds hold for any clocks
    assert ProtectionPolicy.for_keeping(1, 1).expires_minutes == 1
    assert ProtectionPolicy.for_keeping(10**6, 10**5).expires_minutes == 2880


def test_hold_puts_once_renews_when_due_and_release_clears(agent: Agent) -> None:
    clock = Clock(0.0)
    protection = EcsTaskProtection(agent.uri, ProtectionPolicy(expires_minutes=6, renew_after_s=160), clock=clock)
    # WHEN the worker takes a task and beats twice within the renewal window
    protection.protect()
    clock.advance(40)
    protection.protect()
    clock.advance(40)
    protection.protect()
    # THEN the agent was asked once, at the documented path, for 6 minutes
    assert agent.requests == [
        ("PUT", "/api/task-id/task-protection/v1/state", {"ProtectionEnabled": True, "ExpiresInMinutes": 6})
    ]
    # WHEN the renewal is due
    clock.advance(80)
    protection.protect()
    # THEN the grant is renewed
    assert len(agent.puts()) == 2 and agent.enabled
    # WHEN the worker goes idle, twice
    protection.unprotect()
    protection.unprotect()
    # THEN protection is cleared once
    assert agent.puts()[2:] == [{"ProtectionEnabled": False}] and not agent.enabled


@pytest.mark.parametrize(
    ("status", "answer", "said"),
    [
        (
            200,
            {"failure": {"Arn": TASK_ARN, "Reason": "TASK_NOT_VALID", "Detail": "standalone task"}},
            "TASK_NOT_VALID",
        ),
        (400, {"error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "AccessDeniedException"),
    ],
)
def test_a_refusal_is_logged_not_raised_and_tried_again(
    agent: Agent, status: int, answer: dict[str, Any], said: str, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN an agent that refuses (a role without ecs:UpdateTaskProtection, a task outside a service)
    agent.answer = (status, answer)
    protection = EcsTaskProtection(agent.uri, ProtectionPolicy(expires_minutes=6, renew_after_s=160))
    # WHEN the worker asks for protection
    protection.protect()
    # THEN the work goes on, the reason is in the log, and the next beat asks again
    assert not protection.protected
    assert said in caplog.text
    agent.answer = None
    protection.protect()
    assert protection.protected and agent.enabled


def test_an_agent_that_does_not_answer_costs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    protection = EcsTaskProtection("http://127.0.0.1:9", ProtectionPolicy(1, 30), timeout_s=1)
    protection.protect()
    assert not protection.protected and "did not answer" in caplog.text


def test_off_ecs_protection_is_a_no_op() -> None:
    assert isinstance(task_protection(None, 120, 40), NoProtection)
    assert isinstance(task_protection("http://169.254.170.2/api/x", 120, 40), EcsTaskProtection)


class Step(StubTask):
    seconds: float


class WaitingHandler(StepHandler[Step]):
    """A render handler that works for `seconds` and notes whether the task was protected meanwhile."""

    task_model = Step

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.protected_while_working: list[bool] = []

    def execute(self, task: Step, cancel: threading.Event, attempt: Attempt) -> SegmentResult:
        self.protected_while_working.append(self.agent.enabled)
        time.sleep(task.seconds)
        self.protected_while_working.append(self.agent.enabled)
        return SegmentResult(index=0, key="work/s/00000.mp4", frames=50, engine_s=task.seconds)


def test_the_worker_is_protected_while_it_holds_a_segment_renews_with_the_heartbeat_and_clears_when_idle(
    agent: Agent,
) -> None:
    # GIVEN a worker on ECS whose heartbeat comes every second, and a segment that takes 2.5 s
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE, max_receive_count=3)
    queue.send(QUEUE, Step(task_token="t", seconds=2.5).model_dump_json())
    handler = WaitingHandler(agent)
    stop = StopSignal()
    heartbeat = KeepPolicy(visibility_s=3)
    # Renewal due at every beat, so the test sees renewals within seconds.
    protection = EcsTaskProtection(agent.uri, ProtectionPolicy(expires_minutes=1, renew_after_s=0))
    subject = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3), heartbeat, stop,
        idle_wait_s=0, protection=protection,
    )  # fmt: skip
    runner = threading.Thread(target=subject.run)
    # WHEN it runs until the queue is empty
    runner.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (subject.completed == 1 and not agent.enabled):
        time.sleep(0.05)
    stop.requested.set()
    runner.join(timeout=10)
    # THEN the task was protected from before the engine started until it finished
    assert handler.protected_while_working == [True, True]
    puts = agent.puts()
    # AND the heartbeat renewed it while the segment rendered (the first PUT, then at least one beat)
    assert puts[0] == {"ProtectionEnabled": True, "ExpiresInMinutes": 1}
    assert sum(1 for body in puts if body["ProtectionEnabled"]) >= 2
    # AND protection was cleared once the queue was found empty, and not asked for again
    assert puts[-1] == {"ProtectionEnabled": False} and not agent.enabled
    assert subject.completed == 1
