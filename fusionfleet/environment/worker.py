"""The render and merge workers' configuration (`python -m gpu_worker`; the ECS task definitions).

One class: each field is read from the variable it names (or set by a flag, `gpu_worker.config.resolve`),
and each default is written here once (or on the domain policy it comes from).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fusionfleet.environment.aws import ENV_ENDPOINT, ENV_REGION
from fusionfleet.environment.contract import variable
from fusionfleet.fleet.blocklist import BlockPolicy
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE, CapacityType, GpuPrices
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
ENV_LIVENESS_FILE = "FUSIONFLEET_LIVENESS_FILE"
ENV_GPU_HOURLY_PRICE = "FUSIONFLEET_GPU_HOURLY_PRICE"
ENV_GPU_SPOT_HOURLY_PRICE = "FUSIONFLEET_GPU_SPOT_HOURLY_PRICE"
# The worker's capacity type (on-demand | spot), or a file holding it: the GPU host's user data writes
# the instance's `instance-life-cycle` there from its metadata, which the task itself cannot reach.
ENV_CAPACITY_TYPE = "FUSIONFLEET_CAPACITY_TYPE"
ENV_CAPACITY_FILE = "FUSIONFLEET_CAPACITY_FILE"
ENV_WEBHOOK_QUEUE = "FUSIONFLEET_WEBHOOK_QUEUE_URL"  # where segments' webhook events go; unset: none
ENV_WORK_BUCKET = "WORK_BUCKET"  # the same variable as every other component's
ENV_BEAT = "FUSIONFLEET_WORKER_BEAT_SECONDS"
ENV_ECS_AGENT_URI = "ECS_AGENT_URI"  # set by ECS in every task's containers
ENV_ECS_METADATA_URI = "ECS_CONTAINER_METADATA_URI_V4"  # likewise: the task's own metadata
ENV_MIN_FREE_GPU = "FUSIONFLEET_MIN_FREE_GPU_MB"
ENV_BLOCK_AFTER = "FUSIONFLEET_BLOCK_AFTER_FAILURES"
ENV_BLOCK_GRACE = "FUSIONFLEET_BLOCK_GRACE_SECONDS"
ENV_LOOKAHEAD = "FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG"
ENV_VISIBLE_GPUS = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class WorkerEnvironment:
    """What a worker reads from its environment; its flags override some (gpu_worker.config.resolve)."""

    role: str = variable(ENV_ROLE, "render")
    queue_urls: tuple[str, ...] = variable(ENV_QUEUE_URLS, ())  # highest priority first
    name: str = variable(ENV_NAME, "")  # "": host-pid, filled in by resolve
    scratch: Path = variable(ENV_SCRATCH, Path("/tmp/fusionfleet"))  # noqa: RUF009  (a Path is immutable)
    region: str = variable(ENV_REGION, "")  # "": the SDK's older name's, filled in by resolve
    default_region: str = variable(ENV_DEFAULT_REGION, "")
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
    # The render loop's liveness record, which the container's health check reads
    # (gpu_worker.lifecycle.liveness); None: none written.
    liveness_file: Path | None = variable(ENV_LIVENESS_FILE, None)  # noqa: RUF009  (None)
    # Dollars per GPU-hour by capacity type: a render worker stamps each attempt record with its own, and
    # the merge prices attempts without one (fusionfleet.jobs.cost).
    gpu_hourly_price: float = variable(ENV_GPU_HOURLY_PRICE, DEFAULT_GPU_HOURLY_PRICE)
    gpu_spot_hourly_price: float = variable(ENV_GPU_SPOT_HOURLY_PRICE, 0.0)  # 0: Spot priced as On-Demand
    capacity_type: str = variable(ENV_CAPACITY_TYPE, "on-demand")  # resolve() reads the file's over it
    capacity_file: Path | None = variable(ENV_CAPACITY_FILE, None)  # noqa: RUF009  (None)
    # The webhook queue (fusionfleet.webhooks.outbox): a finished segment's progress and preview events.
    webhook_queue_url: str | None = variable(ENV_WEBHOOK_QUEUE, None)
    # Where the worker's presence record goes (work/_workers/<name>.json); None: no record (and no blocklist).
    work_bucket: str | None = variable(ENV_WORK_BUCKET, None)
    beat_s: float = variable(ENV_BEAT, 5.0)
    # The ECS agent's endpoint: task scale-in protection while a segment is held; None off ECS.
    ecs_agent_uri: str | None = variable(ENV_ECS_AGENT_URI, None)
    # The task metadata endpoint: whether its deployment is being replaced (lifecycle/retirement.py).
    ecs_metadata_uri: str | None = variable(ENV_ECS_METADATA_URI, None)
    # A render worker takes a segment only with this much GPU memory free (None: no check), on the
    # GPUs it may see (CUDA_VISIBLE_DEVICES; all when unset).
    min_free_gpu_mb: float | None = variable(ENV_MIN_FREE_GPU, None)
    visible_gpus: tuple[str, ...] = variable(ENV_VISIBLE_GPUS, ())
    # A render worker that fails this many distinct segments of one job (by its own doing) stops taking
    # that job's segments (needs the presence records of work_bucket to tell whether anyone else is
    # left); 0: never.
    block_after_failures: int = variable(ENV_BLOCK_AFTER, 2)
    # How long every live render worker must have been listed for a job before it fails for want of one.
    block_grace_s: float = variable(ENV_BLOCK_GRACE, BlockPolicy.stranded_grace_s)
    # A render worker takes its next task while this one renders when the queues hold at least this
    # many visible messages (gpu_worker.delivery.lookahead); 0: never. Off by default, as measured one job at a
    # time (benchmarks/results/fleet-overhead-lookahead-on.json and -off.json): it hides the gaps between
    # one worker's segments but on 6 and 12 workers the early takes left others idle.
    lookahead_min_backlog: int = variable(ENV_LOOKAHEAD, 0)
    # Flags only (no variable): exit after this many tasks (None: never).
    max_tasks: int | None = None
    # The environment the worker started with, frozen: what an engine may read (FaceFusion's settings,
    # PATH, CUDA_VISIBLE_DEVICES), handed down instead of read from os.environ deep inside.
    engine_env: tuple[tuple[str, str], ...] = ()

    @property
    def prices(self) -> GpuPrices:
        """Dollars per GPU-hour by capacity type (fusionfleet.jobs.cost)."""
        return GpuPrices(self.gpu_hourly_price, self.gpu_spot_hourly_price or None)

    @property
    def capacity(self) -> CapacityType:
        """Anything but `spot` (`on-demand`, `scheduled`) is priced On-Demand."""
        return "spot" if self.capacity_type == "spot" else "on-demand"
