"""The render and merge workers' environment (`python -m gpu_worker`; the ECS task definitions)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fusionfleet.environment.aws import ENV_ENDPOINT, ENV_REGION
from fusionfleet.environment.contract import variable
from fusionfleet.fleet.blocklist import BlockPolicy
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE
from fusionfleet.jobs.timeouts import DEFAULT_VISIBILITY_S, TimeoutPolicy

ENV_ROLE = "FUSIONFLEET_ROLE"
ENV_QUEUE_URLS = "FUSIONFLEET_QUEUE_URLS"
ENV_NAME = "FUSIONFLEET_WORKER_NAME"
ENV_SCRATCH = "FUSIONFLEET_SCRATCH"
ENV_VISIBILITY = "FUSIONFLEET_VISIBILITY_SECONDS"
ENV_IDLE_WAIT = "FUSIONFLEET_IDLE_WAIT_SECONDS"
ENV_DEFAULT_REGION = "AWS_DEFAULT_REGION"  # the SDK's older name, read when AWS_REGION is unset
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
ENV_GPU_SPOT_HOURLY_PRICE = "FUSIONFLEET_GPU_SPOT_HOURLY_PRICE"
# The worker's capacity type (on-demand | spot), or a file holding it: the GPU host's user data writes
# the instance's `instance-life-cycle` there from its metadata, which the task itself cannot reach.
ENV_CAPACITY_TYPE = "FUSIONFLEET_CAPACITY_TYPE"
ENV_CAPACITY_FILE = "FUSIONFLEET_CAPACITY_FILE"
ENV_WEBHOOK_QUEUE = "FUSIONFLEET_WEBHOOK_QUEUE_URL"  # where segments' webhook events go; unset: none
ENV_WORK_BUCKET = "FUSIONFLEET_WORK_BUCKET"
ENV_BEAT = "FUSIONFLEET_WORKER_BEAT_SECONDS"
ENV_ECS_AGENT_URI = "ECS_AGENT_URI"  # set by ECS in every task's containers
ENV_MIN_FREE_GPU = "FUSIONFLEET_MIN_FREE_GPU_MB"
ENV_BLOCK_AFTER = "FUSIONFLEET_BLOCK_AFTER_FAILURES"
ENV_BLOCK_GRACE = "FUSIONFLEET_BLOCK_GRACE_SECONDS"
ENV_LOOKAHEAD = "FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG"
ENV_VISIBLE_GPUS = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class WorkerEnvironment:
    """What a worker reads from its environment; its arguments override some (gpu_worker.config)."""

    role: str = variable(ENV_ROLE, "render")
    queue_urls: tuple[str, ...] = variable(ENV_QUEUE_URLS, ())
    name: str | None = variable(ENV_NAME, None)  # None: host-pid
    scratch: Path = variable(ENV_SCRATCH, Path("/tmp/fusionfleet"))  # noqa: RUF009  (a Path is immutable)
    region: str | None = variable(ENV_REGION, None)
    default_region: str | None = variable(ENV_DEFAULT_REGION, None)
    endpoint_url: str | None = variable(ENV_ENDPOINT, None)
    visibility_s: int = variable(ENV_VISIBILITY, DEFAULT_VISIBILITY_S)
    idle_wait_s: int = variable(ENV_IDLE_WAIT, 1)
    preload_engine: str | None = variable(ENV_PRELOAD, None)
    cpu_threads: int = variable(ENV_CPU_THREADS, 0)
    isolation: str = variable(ENV_ISOLATION, "process")
    engine_max_tasks: int = variable(ENV_ENGINE_MAX_TASKS, 100)
    engine_max_rss_mb: int = variable(ENV_ENGINE_MAX_RSS_MB, 8192)
    engine_max_gpu_mb: int | None = variable(ENV_ENGINE_MAX_GPU_MB, None)
    seconds_per_frame: float = variable(ENV_SECONDS_PER_FRAME, TimeoutPolicy.engine_seconds_per_frame)
    base_timeout_s: float = variable(ENV_BASE_TIMEOUT, TimeoutPolicy.engine_base_s)
    faults_file: Path | None = variable(ENV_FAULTS_FILE, None)  # noqa: RUF009  (None)
    gpu_hourly_price: float = variable(ENV_GPU_HOURLY_PRICE, DEFAULT_GPU_HOURLY_PRICE)
    gpu_spot_hourly_price: float = variable(ENV_GPU_SPOT_HOURLY_PRICE, 0.0)  # 0: Spot priced as On-Demand
    capacity_type: str = variable(ENV_CAPACITY_TYPE, "on-demand")
    capacity_file: Path | None = variable(ENV_CAPACITY_FILE, None)  # noqa: RUF009  (None)
    webhook_queue_url: str | None = variable(ENV_WEBHOOK_QUEUE, None)
    work_bucket: str | None = variable(ENV_WORK_BUCKET, None)
    beat_s: float = variable(ENV_BEAT, 5.0)
    ecs_agent_uri: str | None = variable(ENV_ECS_AGENT_URI, None)
    min_free_gpu_mb: float | None = variable(ENV_MIN_FREE_GPU, None)
    visible_gpus: tuple[str, ...] = variable(ENV_VISIBLE_GPUS, ())
    block_after_failures: int = variable(ENV_BLOCK_AFTER, 2)
    block_grace_s: float = variable(ENV_BLOCK_GRACE, BlockPolicy.stranded_grace_s)
    # Off by default, as measured one job at a time (benchmarks/results/fleet-overhead-lookahead-on.json
    # and -off.json): it hides the gaps between one worker's segments (render 71.4 → 66.8 s) but on 6 and
    # 12 workers the early takes left others idle (12.4 → 13.2 s, 7.0 → 9.2 s). Set it (e.g. 2) to turn it on.
    lookahead_min_backlog: int = variable(ENV_LOOKAHEAD, 0)
