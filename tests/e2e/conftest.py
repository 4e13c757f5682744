"""A real local stack for end-to-end tests: LocalStack started by `fusionfleet local up`, over HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fusionfleet.aws import AwsTarget
from fusionfleet.local.state import LocalState
from fusionfleet.stack import StackResources

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Stack:
    state_dir: Path
    endpoint: str
    resources: StackResources
    aws: AwsTarget

    def env(self) -> dict[str, str]:
        return {**os.environ, "FUSIONFLEET_LOCAL_DIR": str(self.state_dir)}

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fusionfleet.cli", *args],
            env=self.env(), cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def client(self, service: str) -> Any:
        return self.aws.client(service)

    def subscribe(self) -> str:
        """A fresh SQS queue subscribed to the notification topic (how tests read notifications)."""
        sqs = self.client("sqs")
        url = sqs.create_queue(QueueName=f"inbox-{time.monotonic_ns()}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.client("sns").subscribe(TopicArn=self.resources.topic_arn, Protocol="sqs", Endpoint=arn)
        return str(url)

    def notifications(self, inbox: str, wait_s: float, count: int = 1) -> list[dict[str, Any]]:
        sqs = self.client("sqs")
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(found) < count:
            for message in sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            ):
                found.append(json.loads(json.loads(message["Body"])["Message"]))
                sqs.delete_message(QueueUrl=inbox, ReceiptHandle=message["ReceiptHandle"])
        return found

    def logs(self) -> str:
        parts = []
        for log in sorted((self.state_dir / "logs").glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-25:]
            parts.append(f"--- {log.name}\n" + "\n".join(lines))
        return "\n".join(parts)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    state_dir = tmp_path_factory.mktemp("local-stack")
    port = free_port()
    up = subprocess.run(
        [sys.executable, "-m", "fusionfleet.cli", "local", "up", "--workers", "2", "--port", str(port),
         "--default-engine", "copy", "--state-dir", str(state_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    state = LocalState.load(state_dir / "state.json")
    if up.returncode != 0 or state is None:
        subprocess.run(
            [sys.executable, "-m", "fusionfleet.cli", "local", "down", "--state-dir", str(state_dir)],
            cwd=ROOT,
            check=False,
        )
        pytest.fail(f"local up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}")
    assert up.stdout.strip().splitlines()[-1] == f"http://127.0.0.1:{port}"
    aws = AwsTarget(region=state.region, endpoint_url=state.endpoint)
    stack = Stack(state_dir, state.endpoint, StackResources.from_outputs(state.outputs), aws)
    try:
        yield stack
    finally:
        print(stack.logs())
        subprocess.run(
            [sys.executable, "-m", "fusionfleet.cli", "local", "down", "--state-dir", str(state_dir)],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
