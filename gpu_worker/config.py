"""Worker configuration: explicit argument > environment variable > default.

The environment is read here and only here (through `resolve`, called by the entry point); the rest
of the worker receives the frozen settings.
"""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from fusionfleet.cost import DEFAULT_GPU_HOURLY_PRICE
from gpu_worker.errors import ConfigError

ENV_ROLE = "FUSIONFLEET_ROLE"
ENV_QUEUE_URLS = "FUSIONFLEET_QUEUE_URLS"
ENV_NAME = "FUSIONFLEET_WORKER_NAME"
ENV_SCRATCH = "FUSIONFLEET_SCRATCH"
ENV_VISIBILITY = "FUSIONFLEET_VISIBILITY_SECONDS"
ENV_IDLE_WAIT = "FUSIONFLEET_IDLE_WAIT_SECONDS"
ENV_REGION = "AWS_REGION"
ENV_ENDPOINT = "AWS_ENDPOINT_URL"
ENV_PRELOAD = "FUSIONFLEET_PRELOAD_ENGINE"
ENV_CPU_THREADS = "FUSIONFLEET_CPU_THREADS"
ENV_ISOLATION = "FUSIONFLEET_ENGINE_ISOLATION"
ENV_ENGINE_MAX_TASKS = "FUSIONFLEET_ENGINE_MAX_TASKS"
ENV_ENGINE_MAX_RSS_MB = "FUSIONFLEET_ENGINE_MAX_RSS_MB"
ENV_ENGINE_MAX_GPU_MB = "FUSIONFLEET_ENGINE_MAX_GPU_MB"
ENV_SECONDS_PER_FRAME = "FUSIONFLEET_SECONDS_PER_FRAME"
ENV_BASE_TIMEOUT = "FUSIONFLEET_ENGINE_BASE_TIMEOUT_SECONDS"
ENV_FAULTS_FILE = "FUSIONFLEET_FAULTS_FILE"
ENV_GPU_HOURLY_PRICE = "FUSIONFLEET_GPU_HOURLY_PRICE"
ENV_WORK_BUCKET = "FUSIONFLEET_WORK_BUCKET"
ENV_BEAT = "FUSIONFLEET_WORKER_BEAT_SECONDS"
ENV_ECS_AGENT_URI = "ECS_AGENT_URI"  # set by ECS in every task's containers
ENV_MIN_FREE_GPU = "FUSIONFLEET_MIN_FREE_GPU_MB"
ENV_BLOCK_AFTER = "FUSIONFLEET_BLOCK_AFTER_FAILURES"
ENV_LOOKAHEAD = "FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG"
# Off by default, as measured on one job at a time (benchmarks/results/fleet-overhead-lookahead-on.json
# and -off.json, same code): it hides the gaps between a worker's segments
# (1 worker, a minute of video: render 71.4 → 66.8 s) but on 6 and 12 workers the early takes left
# others idle (render 12.4 → 13.2 s and 7.0 → 9.2 s), even looking only after an idle poll's time
# (gpu_worker.lookahead, settle_s). Set FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG (e.g. 2) to turn it on.
DEFAULT_LOOKAHEAD_MIN_BACKLOG = 0
ENV_VISIBLE_GPUS = "CUDA_VISIBLE_DEVICES"

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
    gpu_hourly_price: float = DEFAULT_GPU_HOURLY_PRICE  # dollars per GPU-hour: the merge prices each job with it
    # Where the worker's presence record goes (work/_workers/<name>.json); None: no record.
    work_bucket: str | None = None
    beat_s: float = 5.0
    # The ECS agent's endpoint: task scale-in protection while a segment is held; None off ECS.
    ecs_agent_uri: str | None = None
    # A render worker takes a segment only with this much GPU memory free (None: no check), on the
    # GPUs it may see (CUDA_VISIBLE_DEVICES; all when unset).
    min_free_gpu_mb: float | None = None
    visible_gpus: tuple[str, ...] = ()
    # A render worker that fails this many segments of one job stops taking that job's segments
    # (needs the presence records of work_bucket to tell whether anyone else is left); 0: never.
    block_after_failures: int = 2
    # A render worker takes its next task while this one renders when the queues hold at least this
    # many visible messages (gpu_worker.lookahead); 0: never.
    lookahead_min_backlog: int = DEFAULT_LOOKAHEAD_MIN_BACKLOG
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
    role = args.role or env.get(ENV_ROLE, "render")
    urls = tuple(args.queue_urls or [url for url in env.get(ENV_QUEUE_URLS, "").split(",") if url])
    if not urls:
        raise ConfigError(f"no queue: pass --queue-url or set {ENV_QUEUE_URLS}")
    region = args.region or env.get(ENV_REGION) or env.get("AWS_DEFAULT_REGION")
    if not region:
        raise ConfigError(f"no region: pass --region or set {ENV_REGION}")
    return WorkerConfig(
        role=role,
        queue_urls=urls,
        name=args.name or env.get(ENV_NAME) or f"{socket.gethostname()}-{os.getpid()}",
        scratch=args.scratch or Path(env.get(ENV_SCRATCH, "/tmp/fusionfleet")),
        region=region,
        endpoint_url=args.endpoint_url or env.get(ENV_ENDPOINT) or None,
        visibility_s=args.visibility_seconds or int(env.get(ENV_VISIBILITY, "120")),
        idle_wait_s=int(env.get(ENV_IDLE_WAIT, "1")),
        max_tasks=args.max_tasks,
        preload_engine=args.preload_engine or env.get(ENV_PRELOAD) or None,
        cpu_threads=int(env.get(ENV_CPU_THREADS, "0")),
        isolation=env.get(ENV_ISOLATION, "process"),
        engine_max_tasks=int(env.get(ENV_ENGINE_MAX_TASKS, "100")),
        engine_max_rss_mb=int(env.get(ENV_ENGINE_MAX_RSS_MB, "8192")),
        engine_max_gpu_mb=int(env[ENV_ENGINE_MAX_GPU_MB]) if env.get(ENV_ENGINE_MAX_GPU_MB) else None,
        seconds_per_frame=float(env.get(ENV_SECONDS_PER_FRAME, "2.0")),
        base_timeout_s=float(env.get(ENV_BASE_TIMEOUT, "120")),
        faults_file=Path(env[ENV_FAULTS_FILE]) if env.get(ENV_FAULTS_FILE) else None,
        gpu_hourly_price=_price(env.get(ENV_GPU_HOURLY_PRICE)),
        work_bucket=env.get(ENV_WORK_BUCKET) or None,
        beat_s=float(env.get(ENV_BEAT, "5")),
        ecs_agent_uri=env.get(ENV_ECS_AGENT_URI) or None,
        min_free_gpu_mb=float(env[ENV_MIN_FREE_GPU]) if env.get(ENV_MIN_FREE_GPU) else None,
        visible_gpus=tuple(e.strip() for e in env.get(ENV_VISIBLE_GPUS, "").split(",") if e.strip()),
        block_after_failures=int(env.get(ENV_BLOCK_AFTER, "2")),
        lookahead_min_backlog=int(env.get(ENV_LOOKAHEAD, str(DEFAULT_LOOKAHEAD_MIN_BACKLOG))),
        engine_env=tuple(sorted(env.items())),
    )


def _price(text: str | None) -> float:
    if not text:
        return DEFAULT_GPU_HOURLY_PRICE
    try:
        price = float(text)
    except ValueError:
        raise ConfigError(f"{ENV_GPU_HOURLY_PRICE} is not a number: {text!r}") from None
    if not price >= 0:
        raise ConfigError(f"{ENV_GPU_HOURLY_PRICE} must be 0 or more, not {text!r}")
    return price
