"""`fusionfleet local up|down|status`: LocalStack, the deployed template, and the local processes.

On AWS the slicer is a Lambda and the workers are ECS tasks; here each is a separate process,
started (not imported), that talks to the others only through S3, SQS, Step Functions and SNS.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

from fleetctl.local import localstack, recording
from fleetctl.local.deploy import deploy_stack, package
from fleetctl.local.engines import worker_engines
from fleetctl.local.page_uploads import allow_page_uploads
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions, process_environments
from fleetctl.local.recording import role_env
from fleetctl.local.state import LIMITS, LocalState, ManagedProcess
from fleetctl.local.tokens import LOCAL_AUDIENCE, LOCAL_ISSUER, KeyFiles, mint
from fleetctl.stack import StackResources
from fusionfleet.adapters.aws import LOCAL_ACCESS_KEY, AwsTarget
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.environment.settings import AWS_DEFAULT_REGION, AWS_ENDPOINT_URL, AWS_REGION, FUSIONFLEET_LOCAL_DIR
from fusionfleet.layout import is_tenant_name

logger = logging.getLogger(__name__)

DEFAULT_PORT = 4566
STOP_GRACE_S = 30.0
DASHBOARD_READY_S = 60.0
API_READY_S = 60.0
Say = Callable[[str], None]


def _aws_env(state: LocalState) -> dict[str, str]:
    return {
        AWS_ENDPOINT_URL: state.endpoint,
        AWS_REGION: state.region,
        AWS_DEFAULT_REGION: state.region,
        "AWS_ACCESS_KEY_ID": LOCAL_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": LOCAL_ACCESS_KEY,
    }


def _spawn(argv: list[str], env: dict[str, str], log: Path, cwd: Path) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not killed with the terminal that ran `local up`
        )
    return process.pid


class LocalStack:
    def __init__(self, paths: LocalPaths, say: Say = print) -> None:
        self.paths = paths
        self._say = say

    def load(self) -> LocalState | None:
        return LocalState.load(self.paths.state_file)

    # ------------------------------------------------------------------ up
    def up(self, options: UpOptions) -> LocalState:
        state = self.load()
        started = time.monotonic()
        if state is not None and (options.port is not None and options.port != state.port):
            self._say(f"stopping the local stack on port {state.port} to move it to {options.port}")
            self.down()
            state = None
        state = self._ensure_localstack(state, options)
        self._deploy(state, options)
        self._ensure_processes(state, options)
        state.save(self.paths.state_file)
        self._say(f"local stack ready in {time.monotonic() - started:.1f} s")
        return state

    def _ensure_localstack(self, state: LocalState | None, options: UpOptions) -> LocalState:
        running = state.by_role("localstack") if state else []
        if state and running and running[0].alive() and localstack.healthy(state.endpoint):
            self._say(f"LocalStack already running on {state.endpoint} (pid {running[0].pid})")
            return state
        port = options.port or (state.port if state else DEFAULT_PORT)
        if state:
            self._stop_all(state)
        if localstack.port_in_use(port):
            raise RuntimeError(
                f"port {port} is already in use by another program (another local stack?); "
                "stop it or choose another with --port"
            )
        state = LocalState(port=port, region=options.region, stack=options.stack)
        log = self.paths.logs / "localstack.log"
        child = localstack.start(
            self.paths.localstack_python,
            self.paths.localstack_launcher,
            port,
            self.paths.localstack_volume,
            log,
            dict(os.environ),
        )
        pid = child.pid
        process = ManagedProcess("localstack", "localstack", pid, str(log))
        state.processes.append(process)
        state.save(self.paths.state_file)
        self._say(f"starting LocalStack on {state.endpoint} (pid {pid}, log {log})")
        try:
            localstack.wait_healthy(state.endpoint, timeout_s=180, process=child)
        except (TimeoutError, RuntimeError) as error:
            raise RuntimeError(f"{error}; last lines of {log}:\n{_tail(log)}") from error
        return state

    def _deploy(self, state: LocalState, options: UpOptions) -> None:
        aws = AwsTarget(region=state.region, endpoint_url=state.endpoint)
        s3, cloudformation = aws.client("s3"), aws.client("cloudformation")
        parameters = {"Stage": "local", **dict(options.stage_parameters)}
        began = time.monotonic()
        body = package(self.paths.root, self.paths.template, s3)
        state.outputs = deploy_stack(cloudformation, s3, state.stack, body, parameters)
        state.save(self.paths.state_file)
        recording.record_at_up(cloudformation, state.stack, state.endpoint, state.region)
        self._say(f"stack {state.stack} deployed (Stage=local) in {time.monotonic() - began:.1f} s")

    def _ensure_processes(self, state: LocalState, options: UpOptions) -> None:
        resources = StackResources.from_outputs(state.outputs)
        state.processes = [p for p in state.processes if p.role == "localstack" or p.alive()]
        python = sys.executable
        env = _aws_env(state)
        envs = process_environments(options, resources, self.paths.scratch)
        # The workers get this environment and this interpreter: what they can run is known here.
        state.engines = list(worker_engines(os.environ, importlib.util.find_spec("facefusion") is not None))
        state.default_engine = options.default_engine
        state.limits = {name: getattr(options, name) for name in LIMITS}
        state.fleet_max_workers = options.max_workers or 0  # as process_environments gives the slicer
        wanted: list[tuple[str, str, list[str], dict[str, str]]] = [
            (
                "slicer",
                "slicer",
                [python, str(self.paths.event_source_runner), "--name", "slicer",
                 "--queue-url", resources.ingest_queue_url, "--handler", "functions.slicer.app.handler"],
                envs.slicer,
            ),
            (
                "watchdog",
                "watchdog",
                [python, str(self.paths.schedule_runner), "--name", "watchdog",
                 "--handler", "functions.watchdog.app.handler", "--every", str(options.watchdog_every_s)],
                envs.watchdog,
            ),
            *[
                (
                    "dlq",
                    f"dlq-{kind}",
                    [python, str(self.paths.event_source_runner), "--name", f"dlq-{kind}",
                     "--queue-url", url, "--handler", "functions.dlq.app.handler"],
                    envs.dead_letters,
                )
                for kind, url in (("render", resources.render_dlq_url), ("merge", resources.merge_dlq_url))
            ],
            *[
                (
                    "job-events",
                    name,
                    [python, str(self.paths.event_source_runner), "--name", name, "--queue-url", url,
                     "--handler", "functions.job_events.app.handler", "--batch-size", "5", *extra],
                    envs.job_events,
                )
                for name, url, extra in (
                    # Lambda's semantics: a failed delivery keeps the visibility the handler gave it.
                    ("webhooks", resources.webhook_queue_url, ["--keep-failures", "--timeout", "120"]),
                    ("notices", resources.notice_follow_queue_url, []),
                )
                if url
            ],
            (
                "merge",
                "merge-1",
                [python, "-m", "gpu_worker", "--role", "merge", "--name", "merge-1"],
                envs.merge,
            ),
        ]  # fmt: skip
        worker_env = envs.render
        if _autoscaled(options):
            wanted.append(self._autoscaler(state, options, resources, worker_env))
        for number in range(1, 0 if _autoscaled(options) else options.workers + 1):
            name = f"worker-{number}"
            wanted.append(
                ("worker", name, [python, "-m", "gpu_worker", "--role", "render", "--name", name], worker_env)
            )
        names = {name for _role, name, _argv, _env in wanted}
        for process in [p for p in state.processes if p.role in FLEET_ROLES and p.name not in names]:
            self._say(f"stopping {process.name} (pid {process.pid}): not wanted")
            _terminate([process], STOP_GRACE_S)
            state.processes.remove(process)
        running = {p.name for p in state.processes}
        fresh = []
        for role, name, argv, extra in wanted:
            if name in running:
                continue
            log = self.paths.logs / f"{name}.log"
            pid = _spawn(argv, {**env, **extra}, log, self.paths.root)
            process = ManagedProcess(role, name, pid, str(log))
            state.processes.append(process)
            fresh.append(process)
            self._say(f"started {role} {name} (pid {pid}, log {log})")
        state.save(self.paths.state_file)
        time.sleep(1.0 if fresh else 0)
        dead = [p for p in fresh if not p.alive()]
        if dead:
            raise RuntimeError(
                "processes exited at start: " + "; ".join(f"{p.name}: {_tail(Path(p.log))}" for p in dead)
            )
        operator = role_env(recording.OPERATOR_POLICY, "dashboard")
        # Its state folder named: its retry admits with the limits the state records (fleetctl.admission).
        folder: dict[str, str] = {FUSIONFLEET_LOCAL_DIR: str(self.paths.state_dir)}
        moved = self._ensure_dashboard(state, options, {**env, "PYTHONUNBUFFERED": "1", **operator, **folder})
        # The API allows the dashboard's origin (the tenant page): a new dashboard needs a new API process.
        self._ensure_api(state, options, {**env, "PYTHONUNBUFFERED": "1"}, resources, restart=moved)

    def _autoscaler(
        self, state: LocalState, options: UpOptions, resources: StackResources, worker_env: dict[str, str]
    ) -> tuple[str, str, list[str], dict[str, str]]:
        """The autoscaler process; named by its limits, so new limits replace it."""
        assert options.max_workers is not None
        name = f"autoscaler-{options.workers}-{options.max_workers}"
        argv = [
            sys.executable, "-m", "fleetctl.local.autoscaler", "--name", name,
            "--min", str(options.workers), "--max", str(options.max_workers),
            "--backlog-per-worker", str(options.backlog_per_worker),
            "--queue-urls", ",".join(resources.render_queue_urls), "--work-bucket", resources.work_bucket,
            "--status-file", str(self.paths.autoscaler_status), "--log-dir", str(self.paths.logs),
            "--region", state.region, "--endpoint-url", state.endpoint,
        ]  # fmt: skip
        return ("autoscaler", name, argv, worker_env)

    def _ensure_dashboard(self, state: LocalState, options: UpOptions, env: dict[str, str]) -> bool:
        """The `dashboard` process: the web page and its API, on 127.0.0.1, its URL kept in the state.

        True when it started one (the first, or a replacement), False when the running one stays.
        """
        running = [p for p in state.by_role("dashboard") if p.alive()]
        wanted = options.dashboard_port
        if running and state.dashboard_url and (wanted is None or state.dashboard_url == _local_url(wanted, "/")):
            return False
        for process in state.by_role("dashboard"):
            if process.alive():
                self._say(f"stopping dashboard (pid {process.pid}) to move it to port {wanted}")
                _terminate([process], STOP_GRACE_S)
            state.processes.remove(process)
        previous = int(state.dashboard_url.rstrip("/").rsplit(":", 1)[1]) if state.dashboard_url else None
        port = wanted or (previous if previous and not localstack.port_in_use(previous) else _free_port())
        if localstack.port_in_use(port):
            raise RuntimeError(f"the dashboard's port {port} is in use; choose another with --dashboard-port")
        argv = [
            sys.executable, "-m", "fleetctl.dashboard", "--port", str(port),
            "--endpoint-url", state.endpoint, "--region", state.region, "--stack", state.stack,
        ]  # fmt: skip
        log = self.paths.logs / "dashboard.log"
        process = ManagedProcess("dashboard", "dashboard", _spawn(argv, env, log, self.paths.root), str(log))
        state.processes.append(process)
        state.dashboard_url = _local_url(port, "/")
        state.save(self.paths.state_file)
        _wait_answering(state.dashboard_url, process, DASHBOARD_READY_S)
        self._say(f"started dashboard on {state.dashboard_url} (pid {process.pid}, log {log})")
        return True

    def _ensure_api(
        self, state: LocalState, options: UpOptions, env: dict[str, str], resources: StackResources,
        restart: bool = False,
    ) -> None:  # fmt: skip
        """The `api` process: the HTTP API's handler behind a JWT check, as API Gateway serves it on AWS.

        Tokens are verified against a key pair made once in the state directory (`local token` signs
        with it), so tokens stay valid across `local up`.
        """
        keys = KeyFiles.under(self.paths.state_dir).ensure()
        if state.dashboard_url:
            allow_page_uploads(AwsTarget(state.region, state.endpoint).client("s3"), resources.media_bucket,
                               state.dashboard_url)  # fmt: skip
        running = [p for p in state.by_role("api") if p.alive()]
        wanted = options.api_port
        if running and state.api_url and (wanted is None or state.api_url == _local_url(wanted)) and not restart:
            return
        for process in state.by_role("api"):
            if process.alive():
                why = "for the dashboard's new origin" if restart else f"to move it to port {wanted}"
                self._say(f"stopping api (pid {process.pid}) {why}")
                _terminate([process], STOP_GRACE_S)
            state.processes.remove(process)
        previous = int(state.api_url.rsplit(":", 1)[1]) if state.api_url else None
        port = wanted or (previous if previous and not localstack.port_in_use(previous) else _free_port())
        if localstack.port_in_use(port):
            raise RuntimeError(f"the API's port {port} is in use; choose another with --api-port")
        argv = [
            sys.executable, "-m", "infra.emulators.api_gateway", "--name", "api", "--port", str(port),
            "--handler", "functions.api.app.handler", "--public-key", str(keys.public),
            "--issuer", LOCAL_ISSUER, "--audience", LOCAL_AUDIENCE,
        ]  # fmt: skip
        if state.dashboard_url:
            # The tenant page (the dashboard's /tenant/) calls the API from the dashboard's origin.
            argv += ["--cors-origin", state.dashboard_url.rstrip("/")]
        api_env = {**env, **process_environments(options, resources, self.paths.scratch).api}
        log = self.paths.logs / "api.log"
        process = ManagedProcess("api", "api", _spawn(argv, api_env, log, self.paths.root), str(log))
        state.processes.append(process)
        state.api_url = _local_url(port)
        state.save(self.paths.state_file)
        # Any answer will do (an unauthenticated request is 401): the server is up.
        _wait_answering(state.api_url + "/jobs", process, API_READY_S, any_status=True)
        self._say(f"started api on {state.api_url} (pid {process.pid}, log {log})")

    def token(self, tenant: str, ttl_s: int) -> str:
        """A token for `tenant` that the local API accepts, signed with the key `local up` made."""
        if not is_tenant_name(tenant):
            raise ValueError(
                f"{tenant!r} is not a tenant name: 1-32 of a-z, 0-9 and '-', starting with a letter or digit"
            )
        if ttl_s <= 0:
            raise ValueError(f"--ttl must be a positive number of seconds, not {ttl_s}")
        keys = KeyFiles.under(self.paths.state_dir)
        if not keys.private.is_file():
            raise RuntimeError(f"no local API key in {self.paths.state_dir}: start the stack with fusionfleet local up")
        return mint(keys.private.read_bytes(), tenant, ttl_s)

    def respawn(self, options: UpOptions) -> LocalState:
        """Start the processes that died (as ECS replaces tasks), without redeploying anything."""
        state = self.load()
        if state is None:
            raise RuntimeError("no local stack is running")
        self._ensure_processes(state, options)
        state.save(self.paths.state_file)
        return state

    # ------------------------------------------------------------------ down
    def down(self) -> int:
        state = self.load()
        if state is None:
            self._say("no local stack is running")
            return 0
        count = self._stop_all(state, before_localstack=lambda: self._close_recording(state))
        self.paths.state_file.unlink(missing_ok=True)
        self._say(f"stopped {count} processes")
        return count

    def _close_recording(self, state: LocalState) -> None:
        if state.outputs and localstack.healthy(state.endpoint):
            recording.record_at_down(self._say, state.endpoint, state.region, state.outputs)

    def _stop_all(self, state: LocalState, before_localstack: Callable[[], None] = lambda: None) -> int:
        # Workers first (they finish or release their segment, and their last calls still count as this
        # stack's: `down` closes the IAM recording only after them; closed before, a worker's leaving calls
        # had no recorded stack, and a run of the suite under load failed the IAM judge so), LocalStack last.
        others = [p for p in state.processes if p.role != "localstack"]
        for process in others:
            self._say(f"stopping {process.role} {process.name} (pid {process.pid})")
        _terminate(others, STOP_GRACE_S)
        before_localstack()
        emulator = state.by_role("localstack")
        for process in emulator:
            self._say(f"stopping LocalStack (pid {process.pid})")
        _terminate(emulator, 20.0)
        return len(others) + len(emulator)

    # ------------------------------------------------------------------ status
    def status(self) -> list[str]:
        state = self.load()
        if state is None:
            return ["no local stack is running (fusionfleet local up starts one)"]
        lines = [f"endpoint {state.endpoint}  stack {state.stack}  region {state.region}"]
        if state.engines:
            # What a job that names no engine gets, and what else its workers run (fleetctl.local.engines).
            lines.append(f"engine {state.default_engine} by default; workers run {', '.join(state.engines)}")
        if state.dashboard_url:
            lines.append(f"dashboard {state.dashboard_url}")
        if state.api_url:
            lines.append(f"api {state.api_url}")
        if state.dashboard_url and state.api_url:
            lines.append(f"tenant-page {tenant_page_url(state.dashboard_url, state.api_url)}")
        lines.append("")
        lines.append(f"{'ROLE':<11} {'NAME':<10} {'PID':>8}  STATE")
        for process in state.processes:
            lines.append(
                f"{process.role:<11} {process.name:<10} {process.pid:>8}  {'running' if process.alive() else 'dead'}"
            )
        lines += _fleet_lines(self.paths.autoscaler_status, state)
        if state.outputs and localstack.healthy(state.endpoint):
            resources = StackResources.from_outputs(state.outputs)
            queue = SqsQueue(AwsTarget(state.region, state.endpoint).client("sqs"))
            lines += ["", f"{'QUEUE':<14} {'VISIBLE':>8} {'IN FLIGHT':>10}"]
            for name, url in resources.queues().items():
                depth = queue.depth(url)
                lines.append(f"{name:<14} {depth.visible:>8} {depth.in_flight:>10}")
        return lines


FLEET_ROLES = ("worker", "autoscaler")


def _autoscaled(options: UpOptions) -> bool:
    return options.max_workers is not None and options.max_workers > options.workers


def _fleet_lines(status_file: Path, state: LocalState) -> list[str]:
    """Render workers, current and desired: the autoscaler's last decision, or the fixed fleet."""
    running = [p for p in state.by_role("autoscaler") if p.alive()]
    if not running:
        fixed = sum(1 for p in state.by_role("worker") if p.alive())
        return ["", f"render workers: {fixed} current, {fixed} desired (fixed)"]
    try:
        record = json.loads(status_file.read_text())
    except (OSError, ValueError):
        return ["", "render workers: autoscaler starting"]
    backlog = record["backlog"]
    lines = [
        "",
        f"render workers: {record['current']} current, {record['desired']} desired "
        f"(autoscaled {record['minimum']}..{record['maximum']}; {backlog['waiting']} waiting, "
        f"{backlog['in_flight']} in flight: {record['reason']})",
    ]
    lines += [f"{'worker':<11} {w['name']:<10} {w['pid']:>8}  running (autoscaled)" for w in record["workers"]]
    lines += [f"{'worker':<11} {name:<10} {'':>8}  stopping" for name in record["stopping"]]
    return lines


def _terminate(processes: list[ManagedProcess], grace_s: float) -> None:
    """SIGTERM (warm stop), wait up to `grace_s`, then SIGKILL what is left."""
    alive = [p for p in processes if p.alive()]
    for process in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if p.alive()]
    for process in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def tenant_page_url(dashboard_url: str, api_url: str, token: str | None = None) -> str:
    """The tenant page of the local stack, pointed at its API (and signed in, given a token)."""
    fragment = urlencode({"api": api_url, **({"token": token} if token else {})})
    return f"{dashboard_url.rstrip('/')}/tenant/#{fragment}"


def _local_url(port: int, path: str = "") -> str:
    return f"http://127.0.0.1:{port}{path}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_answering(url: str, process: ManagedProcess, timeout_s: float, any_status: bool = False) -> None:
    """Until the page is served: the process imports boto3 and reads the stack's outputs first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except urllib.error.HTTPError:
            if any_status:
                return
        except (urllib.error.URLError, OSError):
            pass
        if not process.alive():
            raise RuntimeError(f"the {process.name} exited at start: {_tail(Path(process.log))}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the {process.name} did not answer on {url} within {timeout_s:.0f} s")
        time.sleep(0.3)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
