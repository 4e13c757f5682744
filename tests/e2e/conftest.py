"""A real local stack for end-to-end tests: LocalStack started by `fusionfleet local up`, over HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleetctl.local.recording import OPERATOR_POLICY, RENDER_ROLE, role_env
from fleetctl.local.state import LocalState
from fleetctl.stack import StackResources
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.environment.contract import env_of
from fusionfleet.environment.settings import FUSIONFLEET_IAM_RECORD_DIR
from fusionfleet.environment.worker import WorkerEnvironment
from tests.support.browser import chromium
from tests.support.media import write_video
from tests.support.scheduling import STACK_FILES_FIRST
from tests.support.stack_health import HealthWatch

ROOT = Path(__file__).resolve().parents[2]
E2E = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Fault tests need a short hold (a killed worker's segment comes back within seconds) and short
# engine limits (a hang is cut off quickly); the copy engine renders far inside them.
VISIBILITY_S = 15
FAULT_ENV = {
    "FUSIONFLEET_ENGINE_BASE_TIMEOUT_SECONDS": "20",
    "FUSIONFLEET_SECONDS_PER_FRAME": "0.2",
    "FUSIONFLEET_ENGINE_MAX_RSS_MB": "900",
}


@dataclass
class Stack:
    state_dir: Path
    endpoint: str
    resources: StackResources
    aws: AwsTarget
    port: int
    health: HealthWatch | None = None
    down: bool = False  # stopped: by the session's end, or early once no later test of this process needs it

    @property
    def faults_file(self) -> Path:
        return self.state_dir / "faults.json"

    def set_faults(self, rules: list[dict[str, Any]]) -> None:
        self.faults_file.write_text(json.dumps(rules))

    def up(self, workers: int = 2) -> None:
        """`local up` again: starts what died, stops what is not wanted (how a test respawns workers)."""
        result = subprocess.run(
            up_command(self.port, self.state_dir, workers), env={**os.environ, **FAULT_ENV}, cwd=ROOT,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    def state(self) -> LocalState:
        state = LocalState.load(self.state_dir / "state.json")
        assert state is not None
        return state

    def worker_log(self, name: str) -> str:
        return (self.state_dir / "logs" / f"{name}.log").read_text(errors="replace")

    def worker_holding(self, text: str, timeout_s: float = 60) -> str:
        """The name of the worker whose log shows `text` (e.g. who took a segment)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for process in self.state().by_role("worker"):
                if text in self.worker_log(process.name):
                    return process.name
            time.sleep(0.3)
        raise AssertionError(f"no worker log shows {text!r}:\n{self.logs()}")

    def kill(self, name: str, number: int) -> None:
        (process,) = [p for p in self.state().processes if p.name == name]
        os.killpg(process.pid, number)

    @contextmanager
    def paused(self, name: str) -> Iterator[None]:
        """`name` (e.g. the watchdog) frozen with SIGSTOP for the block, then let go with SIGCONT.

        For a test that must change the stack in several steps before that process may look at it."""
        self.kill(name, signal.SIGSTOP)
        try:
            yield
        finally:
            self.kill(name, signal.SIGCONT)

    def worker_env(self, name: str) -> dict[str, str]:
        """The environment `local up` gives a render worker, for tests that run one of their own."""
        state = self.state()
        return {
            **os.environ, **FAULT_ENV,
            "AWS_ENDPOINT_URL": state.endpoint, "AWS_REGION": state.region, "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            **env_of(WorkerEnvironment,
                queue_urls=self.resources.render_queue_urls, visibility_s=VISIBILITY_S, faults_file=self.faults_file,
                scratch=self.state_dir / "scratch", name=name,
            ),
            **role_env(RENDER_ROLE),
        }  # fmt: skip

    def env(self) -> dict[str, str]:
        return {**os.environ, "FUSIONFLEET_LOCAL_DIR": str(self.state_dir)}

    def cli(self, *args: str, timeout: float = 600, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        # An operator's commands run with the stack's OperatorPolicy (the IAM judge holds them to it);
        # `local` commands deploy and stop the stack, which no policy of the stack is for.
        operator = role_env(OPERATOR_POLICY, "cli") if args[:1] != ("local",) else {}
        return subprocess.run(
            [sys.executable, "-m", "fleetctl.cli", *args],
            env={**self.env(), **operator}, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
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
        """The notices themselves (each envelope's Message), as they arrive within `wait_s`."""
        return [json.loads(envelope["Message"]) for envelope in self.envelopes(inbox, wait_s, count)]

    def envelopes(self, inbox: str, wait_s: float, count: int = 1) -> list[dict[str, Any]]:
        """The SNS envelopes themselves (Subject, MessageAttributes, Message), for tests of what SNS is given."""
        sqs = self.client("sqs")
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(found) < count:
            for message in sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            ):
                found.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=inbox, ReceiptHandle=message["ReceiptHandle"])
        return found

    def logs(self) -> str:
        parts = []
        for log in sorted((self.state_dir / "logs").glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-25:]
            parts.append(f"--- {log.name}\n" + "\n".join(lines))
        return "\n".join(parts)


def up_command(port: int, state_dir: Path, workers: int) -> list[str]:
    return [
        sys.executable, "-m", "fleetctl.cli", "local", "up", "--workers", str(workers), "--port", str(port),
        "--default-engine", "copy", "--state-dir", str(state_dir), "--visibility-seconds", str(VISIBILITY_S),
        "--faults-file", str(state_dir / "faults.json"),
        # Fault tests count attempts and resumes of one copy: backup copies are the straggler test's own.
        "--no-backups",
    ]  # fmt: skip


@pytest.fixture(scope="session")
def iam_recording() -> Path:
    """The folder where every local stack the suite starts records each AWS call its processes make (the IAM
    judge's input; tests/support/iam/recording.py names it once for all test processes and judges it at the end)."""
    return Path(os.environ[FUSIONFLEET_IAM_RECORD_DIR])


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    state_dir = tmp_path_factory.mktemp("local-stack")
    (state_dir / "faults.json").write_text("[]")
    port = free_port()
    up = subprocess.run(
        up_command(port, state_dir, 2), env={**os.environ, **FAULT_ENV},
        cwd=ROOT, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    state = LocalState.load(state_dir / "state.json")
    if up.returncode != 0 or state is None:
        subprocess.run(
            [sys.executable, "-m", "fleetctl.cli", "local", "down", "--state-dir", str(state_dir)],
            cwd=ROOT,
            check=False,
        )
        pytest.fail(f"local up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}")
    assert up.stdout.strip().splitlines()[-1] == f"http://127.0.0.1:{port}"
    aws = AwsTarget(region=state.region, endpoint_url=state.endpoint)
    health = HealthWatch(state.endpoint)
    stack = Stack(state_dir, state.endpoint, StackResources.from_outputs(state.outputs), aws, port, health)
    health.start()
    _shared.append(stack)
    try:
        yield stack
    finally:
        _take_down(stack)


# The session's shared stack, once started: taken down as soon as no test of this process can need it.
_shared: list[Stack] = []


def _take_down(stack: Stack) -> None:
    """Its logs printed and the stack stopped, once (the session's end, or the last stack file's)."""
    if stack.down:
        return
    stack.down = True
    if stack.health is not None:
        stack.health.stop()
        if stack.health.down is not None:
            print(f"LocalStack stopped answering: {stack.health.down}")
    print(stack.logs())
    subprocess.run(
        [sys.executable, "-m", "fleetctl.cli", "local", "down", "--state-dir", str(stack.state_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def no_stack_file_after(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """True when no test this process runs after `item` is in tests/e2e, so its shared stack can go.

    In one process the session's order says it. Under `make test`'s scheduler (tests/support/scheduling.py)
    every e2e file is handed out before any other, so the first other file a process is given is past them."""
    if nextitem is None or nextitem.path.is_relative_to(E2E):
        return False
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is not None:
        return bool(workerinput.get(STACK_FILES_FIRST))
    items = item.session.items
    after = items[items.index(nextitem) :] if nextitem in items else []
    return not any(later.path.is_relative_to(E2E) for later in after)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    # After the test's own teardown (its module's fixtures on the stack first): an idle stack costs about
    # 4 CPU s a minute, and the rest of a process's files can take many minutes on the two cores.
    result = yield
    if _shared and no_stack_file_after(item, nextitem):
        _take_down(_shared[0])
    return result


@pytest.fixture(autouse=True)
def stack_answering(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that uses the stack fails at once, with the reason, when LocalStack stops answering."""
    if "stack" not in request.fixturenames:
        yield
        return
    stack: Stack = request.getfixturevalue("stack")
    if stack.down:
        pytest.fail("this process's shared stack was taken down after its last e2e file; a later file needs it")
    if stack.health is None:
        yield
        return
    with stack.health.guarding():
        yield


@pytest.fixture(scope="module")
def stamped_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 s at 25 fps, each frame stamped with its number: two segments of 125 frames, chunks [0, 50), [50, 100),
    [100, 125)."""
    return write_video(
        tmp_path_factory.mktemp("stamped") / "clip.mp4", seconds=10, fps=25, width=320, height=240, with_stamp=True
    )


@pytest.fixture
def no_faults(stack: Stack) -> None:
    """No fault injected at the test's start (a test before it may have left some); use with `usefixtures`."""
    stack.set_faults([])


@pytest.fixture
def browser() -> str:
    """Debian's headless Chromium, for the dashboards' browser tests."""
    found = chromium()
    if found is None:
        pytest.fail("the dashboards' browser tests need Debian's chromium (apt-get install -y chromium; .ci/run does)")
    return found
