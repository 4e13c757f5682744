"""Worker configuration: explicit argument > environment variable > default.

The environment is read here and only here (through `resolve`, called by the entry point); the rest
of the worker receives the frozen settings.
"""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

# The variables' names and defaults are the worker's environment contract, re-exported as `config.ENV_…`.
from fusionfleet.environment.aws import ENV_ENDPOINT, ENV_REGION
from fusionfleet.environment.contract import EnvironmentInvalid, from_env
from fusionfleet.environment.worker import (  # the contract itself
    ENV_CAPACITY_FILE,
    ENV_CAPACITY_TYPE,
    ENV_FAULTS_FILE,
    ENV_GPU_HOURLY_PRICE,
    ENV_GPU_SPOT_HOURLY_PRICE,
    ENV_LOOKAHEAD,
    ENV_NAME,
    ENV_PRELOAD,
    ENV_QUEUE_URLS,
    ENV_ROLE,
    ENV_SCRATCH,
    ENV_VISIBILITY,
    ENV_VISIBLE_GPUS,
    WorkerEnvironment,
)
from fusionfleet.jobs.cost import CAPACITY_TYPES, CapacityType, GpuPrices

__all__ = [
    "ENV_CAPACITY_FILE",
    "ENV_CAPACITY_TYPE",
    "ENV_FAULTS_FILE",
    "ENV_GPU_HOURLY_PRICE",
    "ENV_GPU_SPOT_HOURLY_PRICE",
    "ENV_LOOKAHEAD",
    "ENV_QUEUE_URLS",
    "ENV_REGION",
    "ENV_VISIBLE_GPUS",
    "ROLES",
    "HostConfig",
    "WorkerConfig",
    "add_arguments",
    "resolve",
]
from gpu_worker.errors import ConfigError

ROLES = ("render", "merge")


@dataclass(frozen=True)
class WorkerConfig:
    role: str
    queue_urls: tuple[str, ...]
    name: str
    scratch: Path
    region: str
    endpoint_url: str | None
    visibility_s: int
    idle_wait_s: int
    max_tasks: int | None
    preload_engine: str | None
    cpu_threads: int
    isolation: str
    engine_max_tasks: int
    engine_max_rss_mb: int
    engine_max_gpu_mb: int | None
    seconds_per_frame: float
    base_timeout_s: float
    faults_file: Path | None = None
    # Dollars per GPU-hour by capacity type: each attempt record carries its worker's (fusionfleet.jobs.cost).
    prices: GpuPrices = field(default_factory=GpuPrices)
    capacity: CapacityType = "on-demand"  # what this worker's instance is bought as
    # The webhook queue (fusionfleet.webhooks.outbox): a finished segment's progress and preview events.
    webhook_queue_url: str | None = None
    # Where the worker's presence record goes (work/_workers/<name>.json); None: no record.
    work_bucket: str | None = None
    beat_s: float = WorkerEnvironment.beat_s
    # The ECS agent's endpoint: task scale-in protection while a segment is held; None off ECS.
    ecs_agent_uri: str | None = None
    # A render worker takes a segment only with this much GPU memory free (None: no check), on the
    # GPUs it may see (CUDA_VISIBLE_DEVICES; all when unset).
    min_free_gpu_mb: float | None = None
    visible_gpus: tuple[str, ...] = ()
    # A render worker that fails this many distinct segments of one job (by its own doing) stops taking
    # that job's segments (needs the presence records of work_bucket to tell whether anyone else is
    # left); 0: never.
    block_after_failures: int = WorkerEnvironment.block_after_failures
    # How long every live render worker must have been listed for a job before it fails for want of one.
    block_grace_s: float = WorkerEnvironment.block_grace_s
    # A render worker takes its next task while this one renders when the queues hold at least this
    # many visible messages (gpu_worker.lookahead); 0: never.
    lookahead_min_backlog: int = WorkerEnvironment.lookahead_min_backlog
    # The environment the worker started with, frozen: what an engine may read (FaceFusion's settings,
    # PATH, CUDA_VISIBLE_DEVICES), handed down instead of read from os.environ deep inside.
    engine_env: tuple[tuple[str, str], ...] = ()

    def host(self) -> HostConfig:
        """What the render process (the engine child, or the worker itself when inline) is given."""
        return HostConfig(
            region=self.region,
            endpoint_url=self.endpoint_url,
            scratch=self.scratch,
            worker_name=self.name,
            cpu_threads=self.cpu_threads,
            preload_engine=self.preload_engine,
            faults_file=self.faults_file,
            engine_env=self.engine_env,
        )


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
    engine_env: tuple[tuple[str, str], ...] = ()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--role", choices=ROLES, help=f"render segments or merge jobs (env {ENV_ROLE})")
    parser.add_argument(
        "--queue-url",
        action="append",
        dest="queue_urls",
        help=f"a queue to take work from, highest priority first; repeat for several (env {ENV_QUEUE_URLS})",
    )
    parser.add_argument("--name", help=f"worker name in logs and records (env {ENV_NAME}; default host-pid)")
    parser.add_argument("--scratch", type=Path, help=f"directory for temporary files (env {ENV_SCRATCH})")
    parser.add_argument("--region", help=f"AWS region (env {ENV_REGION})")
    parser.add_argument("--endpoint-url", help=f"AWS endpoint, e.g. LocalStack (env {ENV_ENDPOINT})")
    parser.add_argument(
        "--visibility-seconds", type=int, help=f"message hold, extended while working (env {ENV_VISIBILITY})"
    )
    parser.add_argument("--max-tasks", type=int, help="exit after this many tasks")
    parser.add_argument(
        "--per-gpu",
        action="store_true",
        help="on a host with several GPUs, run one worker per GPU, each seeing only its own (gpu_worker/per_gpu.py)",
    )
    parser.add_argument(
        "--preload-engine", help=f"load this engine at start rather than on first use (env {ENV_PRELOAD})"
    )


def resolve(args: argparse.Namespace, env: dict[str, str] | None = None) -> WorkerConfig:
    """The worker's settings from its arguments and environment; ConfigError when one is missing."""
    env = dict(os.environ) if env is None else env
    try:
        read = from_env(WorkerEnvironment, env)
    except EnvironmentInvalid as problem:
        raise ConfigError(problem.reason) from None
    urls = tuple(args.queue_urls or read.queue_urls)
    if not urls:
        raise ConfigError(f"no queue: pass --queue-url or set {ENV_QUEUE_URLS}")
    region = args.region or read.region or read.default_region
    if not region:
        raise ConfigError(f"no region: pass --region or set {ENV_REGION}")
    for name, price in (
        (ENV_GPU_HOURLY_PRICE, read.gpu_hourly_price),
        (ENV_GPU_SPOT_HOURLY_PRICE, read.gpu_spot_hourly_price),
    ):
        if not price >= 0:
            raise ConfigError(f"{name} must be 0 or more, not {env.get(name)!r}")
    return WorkerConfig(
        role=args.role or read.role,
        queue_urls=urls,
        name=args.name or read.name or f"{socket.gethostname()}-{os.getpid()}",
        scratch=args.scratch or read.scratch,
        region=region,
        endpoint_url=args.endpoint_url or read.endpoint_url,
        visibility_s=args.visibility_seconds or read.visibility_s,
        idle_wait_s=read.idle_wait_s,
        max_tasks=args.max_tasks,
        preload_engine=args.preload_engine or read.preload_engine,
        cpu_threads=read.cpu_threads,
        isolation=read.isolation,
        engine_max_tasks=read.engine_max_tasks,
        engine_max_rss_mb=read.engine_max_rss_mb,
        engine_max_gpu_mb=read.engine_max_gpu_mb,
        seconds_per_frame=read.seconds_per_frame,
        base_timeout_s=read.base_timeout_s,
        faults_file=read.faults_file,
        prices=GpuPrices(read.gpu_hourly_price, read.gpu_spot_hourly_price or None),
        capacity=capacity_type(read.capacity_type, read.capacity_file),
        webhook_queue_url=read.webhook_queue_url,
        work_bucket=read.work_bucket,
        beat_s=read.beat_s,
        ecs_agent_uri=read.ecs_agent_uri,
        min_free_gpu_mb=read.min_free_gpu_mb,
        visible_gpus=read.visible_gpus,
        block_after_failures=read.block_after_failures,
        block_grace_s=read.block_grace_s,
        lookahead_min_backlog=read.lookahead_min_backlog,
        engine_env=tuple(sorted(env.items())),
    )


def capacity_type(named: str, file: Path | None) -> CapacityType:
    """The worker's capacity type: from the host's file when there is one (its instance metadata's
    `instance-life-cycle`), else as named. Anything but `spot` is priced On-Demand."""
    text = named
    if file is not None:
        try:
            text = file.read_text().strip() or named
        except OSError as error:
            raise ConfigError(f"{ENV_CAPACITY_FILE}: {file} cannot be read: {error}") from None
    if text not in (*CAPACITY_TYPES, "scheduled"):
        raise ConfigError(f"{ENV_CAPACITY_TYPE} must be one of {', '.join(CAPACITY_TYPES)}, not {text!r}")
    return "spot" if text == "spot" else "on-demand"
