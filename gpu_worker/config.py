"""Worker configuration: explicit argument > environment variable > default.

The environment is read here and only here (through `resolve`, called by the entry point) into the
worker's one configuration class, `WorkerEnvironment`; flags override its fields, and the rest of the
worker receives it frozen.
"""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path

from fusionfleet.environment.contract import EnvironmentInvalid, from_env
from fusionfleet.environment.settings import (  # the variables' names (the table)
    AWS_ENDPOINT_URL,
    AWS_REGION,
    FUSIONFLEET_CAPACITY_FILE,
    FUSIONFLEET_CAPACITY_TYPE,
    FUSIONFLEET_GPU_HOURLY_PRICE,
    FUSIONFLEET_GPU_SPOT_HOURLY_PRICE,
    FUSIONFLEET_PRELOAD_ENGINE,
    FUSIONFLEET_QUEUE_URLS,
    FUSIONFLEET_ROLE,
    FUSIONFLEET_SCRATCH,
    FUSIONFLEET_VISIBILITY_SECONDS,
    FUSIONFLEET_WORKER_NAME,
)
from fusionfleet.environment.worker import WorkerEnvironment  # the contract itself
from fusionfleet.jobs.cost import CAPACITY_TYPES

__all__ = ["ROLES", "HostConfig", "WorkerEnvironment", "add_arguments", "host_config", "resolve"]
from gpu_worker.errors import ConfigError

ROLES = ("render", "merge")


@dataclass(frozen=True)
class HostConfig:
    """What a render process needs to build its own clients (the engine child shares no sockets with the parent)."""

    region: str
    endpoint_url: str | None
    scratch: Path
    worker_name: str
    cpu_threads: int = 0
    preload_engine: str | None = None
    faults_file: Path | None = None  # fault injection rules, read again for every task; None: off
    liveness_file: Path | None = None  # the render loop's liveness record (lifecycle/liveness.py); None: off
    engine_env: tuple[tuple[str, str], ...] = ()


def host_config(settings: WorkerEnvironment) -> HostConfig:
    """What the render process (the engine child, or the worker itself when inline) is given."""
    return HostConfig(
        region=settings.region,
        endpoint_url=settings.endpoint_url,
        scratch=settings.scratch,
        worker_name=settings.name,
        cpu_threads=settings.cpu_threads,
        preload_engine=settings.preload_engine,
        faults_file=settings.faults_file,
        liveness_file=settings.liveness_file,
        engine_env=settings.engine_env,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--role", choices=ROLES, help=f"render segments or merge jobs (env {FUSIONFLEET_ROLE})")
    parser.add_argument(
        "--queue-url",
        action="append",
        dest="queue_urls",
        help=f"a queue to take work from, highest priority first; repeat for several (env {FUSIONFLEET_QUEUE_URLS})",
    )
    parser.add_argument(
        "--name", help=f"worker name in logs and records (env {FUSIONFLEET_WORKER_NAME}; default host-pid)"
    )
    parser.add_argument("--scratch", type=Path, help=f"directory for temporary files (env {FUSIONFLEET_SCRATCH})")
    parser.add_argument("--region", help=f"AWS region (env {AWS_REGION})")
    parser.add_argument("--endpoint-url", help=f"AWS endpoint, e.g. LocalStack (env {AWS_ENDPOINT_URL})")
    parser.add_argument(
        "--visibility-seconds",
        type=int,
        help=f"message hold, extended while working (env {FUSIONFLEET_VISIBILITY_SECONDS})",
    )
    parser.add_argument("--max-tasks", type=int, help="exit after this many tasks")
    parser.add_argument(
        "--per-gpu",
        action="store_true",
        help="on a host with several GPUs, run one worker per GPU, each seeing only its own "
        "(gpu_worker/lifecycle/per_gpu.py)",
    )
    parser.add_argument(
        "--preload-engine",
        help=f"load this engine at start rather than on first use (env {FUSIONFLEET_PRELOAD_ENGINE})",
    )


def resolve(args: argparse.Namespace, env: dict[str, str] | None = None) -> WorkerEnvironment:
    """The worker's settings from its environment, its flags winning; ConfigError when one is missing."""
    env = dict(os.environ) if env is None else env
    try:
        read = from_env(WorkerEnvironment, env)
    except EnvironmentInvalid as problem:
        raise ConfigError(problem.reason) from None
    urls = tuple(args.queue_urls or read.queue_urls)
    if not urls:
        raise ConfigError(f"no queue: pass --queue-url or set {FUSIONFLEET_QUEUE_URLS}")
    region = args.region or read.region or read.default_region
    if not region:
        raise ConfigError(f"no region: pass --region or set {AWS_REGION}")
    prices = (
        (FUSIONFLEET_GPU_HOURLY_PRICE, read.gpu_hourly_price),
        (FUSIONFLEET_GPU_SPOT_HOURLY_PRICE, read.gpu_spot_hourly_price),
    )
    for name, price in prices:
        if not price >= 0:
            raise ConfigError(f"{name} must be 0 or more, not {env.get(name)!r}")
    return replace(
        read,
        role=args.role or read.role,
        queue_urls=urls,
        name=args.name or read.name or f"{socket.gethostname()}-{os.getpid()}",
        scratch=args.scratch or read.scratch,
        region=region,
        endpoint_url=args.endpoint_url or read.endpoint_url,
        visibility_s=args.visibility_seconds or read.visibility_s,
        preload_engine=args.preload_engine or read.preload_engine,
        max_tasks=args.max_tasks,
        engine_env=tuple(sorted(env.items())),
        capacity_type=capacity_type(read.capacity_type, read.capacity_file),
    )


def capacity_type(named: str, file: Path | None) -> str:
    """The worker's capacity type: from the host's file when there is one (its instance metadata's
    `instance-life-cycle`), else as named."""
    text = named
    if file is not None:
        try:
            text = file.read_text().strip() or named
        except OSError as error:
            raise ConfigError(f"{FUSIONFLEET_CAPACITY_FILE}: {file} cannot be read: {error}") from None
    if text not in (*CAPACITY_TYPES, "scheduled"):
        raise ConfigError(f"{FUSIONFLEET_CAPACITY_TYPE} must be one of {', '.join(CAPACITY_TYPES)}, not {text!r}")
    return text
