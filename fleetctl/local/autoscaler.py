"""The local stack's autoscaler (`python -m fleetctl.local.autoscaler`): the fleet's scaling rule
(`fusionfleet.fleet.autoscale`) applied to render worker processes, as ECS applies it to tasks on AWS.

Every few seconds: read the render queues (waiting and in-flight segments) and the workers'
presence records, decide, start workers up to the desired count, and on scale-in stop only idle
ones by warm stop (SIGTERM: an idle worker exits at once; one that took a segment in between puts it
back). It owns its workers: on SIGTERM (`local down`) it warm-stops them all and exits. What it
decided is written to a status file for `fusionfleet local status`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.queues import SqsQueue, WorkQueue
from fusionfleet.adapters.storage import S3Storage, Storage
from fusionfleet.errors import ObjectMissing
from fusionfleet.fleet.autoscale import Backlog, Decision, ScalingPolicy, ScalingState, decide, workers_to_stop
from fusionfleet.messages import WorkerBeat

logger = logging.getLogger("fleetctl.autoscaler")

STOP_GRACE_S = 20.0  # below the supervisor's 30 s, so `local down` never has to kill the autoscaler


@dataclass(frozen=True)
class AutoscalerSettings:
    policy: ScalingPolicy
    queue_urls: tuple[str, ...]
    work_bucket: str
    status_file: Path
    log_dir: Path
    every_s: float = 2.0
    name_prefix: str = "worker"


class Pool(Protocol):
    """What the loop needs of the workers it owns: names of running and stopping ones, start, stop."""

    @property
    def running(self) -> list[str]: ...
    @property
    def stopping_names(self) -> list[str]: ...
    def reap(self) -> list[str]: ...
    def start(self) -> str: ...
    def stop(self, name: str) -> None: ...
    def stop_all(self, grace_s: float) -> None: ...


class WorkerPool:
    """Render worker processes, each in a process group of its own (a warm stop reaches only it)."""

    def __init__(self, argv_head: Sequence[str], env: Mapping[str, str], log_dir: Path, prefix: str) -> None:
        self._argv_head = list(argv_head)
        self._env = dict(env)
        self._log_dir = log_dir
        self._prefix = prefix
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.stopping: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def running(self) -> list[str]:
        return sorted(self.processes)

    @property
    def stopping_names(self) -> list[str]:
        return sorted(self.stopping)

    def pid(self, name: str) -> int:
        return self.processes[name].pid

    def reap(self) -> list[str]:
        """Forget workers that exited; returns those that died without being asked to."""
        died = [name for name, p in self.processes.items() if p.poll() is not None]
        for name in died:
            del self.processes[name]
        for name in [name for name, p in self.stopping.items() if p.poll() is not None]:
            del self.stopping[name]
        return died

    def start(self) -> str:
        taken = set(self.processes) | set(self.stopping)
        number = next(n for n in range(1, len(taken) + 2) if f"{self._prefix}-{n}" not in taken)
        name = f"{self._prefix}-{number}"
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with (self._log_dir / f"{name}.log").open("ab") as out:
            self.processes[name] = subprocess.Popen(
                [*self._argv_head, "--name", name],
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return name

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        self.stopping[name] = process

    def stop_all(self, grace_s: float) -> None:
        for name in list(self.processes):
            self.stop(name)
        deadline = time.monotonic() + grace_s
        while any(p.poll() is None for p in self.stopping.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        for process in self.stopping.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)


def idle_workers(storage: Storage, bucket: str, names: Sequence[str]) -> list[str]:
    """Those of `names` whose presence record says they hold no task (no record yet: still starting)."""
    idle = []
    for name in names:
        try:
            beat = WorkerBeat.model_validate_json(storage.get_bytes(bucket, layout.worker_key(name)))
        except (ObjectMissing, ValueError):
            continue
        if beat.current is None:
            idle.append(name)
    return idle


def render_backlog(queue: WorkQueue, urls: Sequence[str]) -> Backlog:
    depths = [queue.depth(url) for url in urls]
    return Backlog(waiting=sum(d.visible + d.delayed for d in depths), in_flight=sum(d.in_flight for d in depths))


def status_record(decision: Decision, backlog: Backlog, pool: Pool, policy: ScalingPolicy) -> dict[str, Any]:
    return {
        "at": time.time(),
        "current": len(pool.running),
        "desired": decision.desired,
        "wanted": decision.wanted,
        "reason": decision.reason,
        "minimum": policy.minimum,
        "maximum": policy.maximum,
        "backlog": {"waiting": backlog.waiting, "in_flight": backlog.in_flight},
        "workers": [{"name": name, "pid": _pid(pool, name)} for name in pool.running],
        "stopping": pool.stopping_names,
    }


def _pid(pool: Pool, name: str) -> int | None:
    return pool.pid(name) if isinstance(pool, WorkerPool) else None


def write_status(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(record))
    partial.replace(path)  # a reader never sees half a file


def run(settings: AutoscalerSettings, queue: WorkQueue, storage: Storage, pool: Pool, stop: threading.Event) -> None:
    policy = settings.policy
    state = ScalingState(desired=policy.minimum)
    for _ in range(policy.minimum):
        logger.info("started %s (the minimum)", pool.start())
    while not stop.is_set():
        for name in pool.reap():
            logger.warning("%s exited unasked; the rule replaces it", name)
        try:
            backlog = render_backlog(queue, settings.queue_urls)
        except Exception:
            logger.warning("queues unreadable; holding the fleet", exc_info=True)
            stop.wait(settings.every_s)
            continue
        now = time.monotonic()
        decision = decide(backlog, state, policy, now)
        state = decision.state_after(state, now)
        while len(pool.running) < decision.desired:
            logger.info("started %s: %s", pool.start(), decision.reason)
        if len(pool.running) > decision.desired:
            idle = idle_workers(storage, settings.work_bucket, pool.running)
            for name in workers_to_stop(decision.desired, len(pool.running), idle):
                logger.info("stopping idle %s: %s", name, decision.reason)
                pool.stop(name)
        write_status(settings.status_file, status_record(decision, backlog, pool, policy))
        stop.wait(settings.every_s)
    logger.info("stopping: warm stop of %s workers", len(pool.running))
    pool.stop_all(STOP_GRACE_S)
    settings.status_file.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleetctl.local.autoscaler")
    parser.add_argument("--name", default="autoscaler", help="its name in the local stack's state")
    parser.add_argument("--min", type=int, required=True)
    parser.add_argument("--max", type=int, required=True)
    parser.add_argument("--backlog-per-worker", type=float, default=1.0)
    parser.add_argument("--scale-out-cooldown", type=float, default=5.0)
    parser.add_argument("--scale-in-cooldown", type=float, default=30.0)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--queue-urls", required=True, help="render queues, comma-separated")
    parser.add_argument("--work-bucket", required=True)
    parser.add_argument("--status-file", type=Path, required=True)
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--region", required=True)
    parser.add_argument("--endpoint-url", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = AutoscalerSettings(
        policy=ScalingPolicy(
            args.min, args.max, args.backlog_per_worker, args.scale_out_cooldown, args.scale_in_cooldown
        ),
        queue_urls=tuple(args.queue_urls.split(",")),
        work_bucket=args.work_bucket,
        status_file=args.status_file,
        log_dir=args.log_dir,
        every_s=args.every,
    )
    # On AWS, Application Auto Scaling and CloudWatch read the queues as services, not as a role of the
    # stack: nothing of this process's own is held to IAM (its workers record as the render role).
    aws = AwsTarget(region=args.region, endpoint_url=args.endpoint_url, record_calls=False)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # The workers inherit this process's environment (the supervisor's worker settings).
    pool = WorkerPool([sys.executable, "-m", "gpu_worker", "--role", "render"], os.environ, args.log_dir, "worker")
    run(settings, SqsQueue(aws.client("sqs")), S3Storage(aws.client("s3")), pool, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
