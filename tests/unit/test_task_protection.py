"""A render worker protects its ECS task from scale-in while it holds a segment, and only then."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpu_worker.config import add_arguments, resolve
from gpu_worker.protection import TaskProtection
from tests.support.template import load_template


class Agent(ThreadingHTTPServer):
    calls: list[tuple[str, str, dict[str, Any]]]


@pytest.fixture
def agent() -> Iterator[Agent]:
    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert isinstance(self.server, Agent)
            self.server.calls.append(("PUT", self.path, body))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = Agent(("127.0.0.1", 0), Handler)
    server.calls = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def test_hold_and_release_reach_the_agents_task_protection_endpoint(agent: Agent) -> None:
    # GIVEN the ECS agent's endpoint
    protection = TaskProtection(f"http://127.0.0.1:{agent.server_address[1]}/v4/abc", expires_minutes=30)
    # WHEN a segment starts and ends
    protection.hold()
    protection.release()
    # THEN the task was protected, with an expiry, then unprotected
    assert agent.calls == [
        ("PUT", "/v4/abc/task-protection/v1/state", {"ProtectionEnabled": True, "ExpiresInMinutes": 30}),
        ("PUT", "/v4/abc/task-protection/v1/state", {"ProtectionEnabled": False}),
    ]


def test_an_agent_that_does_not_answer_never_stops_the_work() -> None:
    # GIVEN no agent on the port WHEN the worker asks for protection THEN it carries on
    TaskProtection("http://127.0.0.1:9/none", timeout_s=0.5).hold()


def test_the_task_role_may_protect_its_own_cluster_tasks() -> None:
    statements = load_template()["Resources"]["RenderTaskRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    (protect,) = [s for s in statements["Statement"] if s.get("Sid") == "ProtectWhileRendering"]
    assert set(protect["Action"]) == {"ecs:GetTaskProtection", "ecs:UpdateTaskProtection"}
    assert "task/${RenderCluster}/*" in protect["Resource"]["Fn::Sub"]


def test_the_worker_reads_the_agents_endpoint_from_ecs() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    env = {"FUSIONFLEET_QUEUE_URLS": "q", "AWS_REGION": "us-east-1"}
    assert resolve(parser.parse_args([]), env).ecs_agent_uri is None
    env["ECS_AGENT_URI"] = "http://169.254.170.2/v4/x"
    assert resolve(parser.parse_args([]), env).ecs_agent_uri == "http://169.254.170.2/v4/x"
