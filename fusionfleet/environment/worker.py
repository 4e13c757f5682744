"""The render and merge workers' configuration (`python -m gpu_worker`; the ECS task definitions).

One class: each field is read from the variable it names (or set by a flag, `gpu_worker.config.resolve`),
and each default is written here once (or on the domain policy it comes from).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fusionfleet.environment import settings
from fusionfleet.jobs.cost import CapacityType, GpuPrices

read = settings.reader(settings.WORKER)


@dataclass(frozen=True)
class WorkerEnvironment:
    """What a worker reads from its environment; its flags override some (gpu_worker.config.resolve)."""

    role: str = read(settings.FUSIONFLEET_ROLE)
    queue_urls: tuple[str, ...] = read(settings.FUSIONFLEET_QUEUE_URLS)  # highest priority first
    name: str = read(settings.FUSIONFLEET_WORKER_NAME)  # "": host-pid, filled in by resolve
    scratch: Path = read(settings.FUSIONFLEET_SCRATCH)  # noqa: RUF009  (a Path is immutable)
    region: str = read(settings.AWS_REGION)  # "": the SDK's older name's, filled in by resolve
    default_region: str = read(settings.AWS_DEFAULT_REGION)
    endpoint_url: str | None = read(settings.AWS_ENDPOINT_URL)
    visibility_s: int = read(settings.FUSIONFLEET_VISIBILITY_SECONDS)
    idle_wait_s: int = read(settings.FUSIONFLEET_IDLE_WAIT_SECONDS)
    preload_engine: str | None = read(settings.FUSIONFLEET_PRELOAD_ENGINE)
    cpu_threads: int = read(settings.FUSIONFLEET_CPU_THREADS)
    isolation: str = read(settings.FUSIONFLEET_ENGINE_ISOLATION)
    engine_max_tasks: int = read(settings.FUSIONFLEET_ENGINE_MAX_TASKS)
    engine_max_rss_mb: int = read(settings.FUSIONFLEET_ENGINE_MAX_RSS_MB)
    engine_max_gpu_mb: int | None = read(settings.FUSIONFLEET_ENGINE_MAX_GPU_MB)
    seconds_per_frame: float = read(settings.FUSIONFLEET_SECONDS_PER_FRAME)
    base_timeout_s: float = read(settings.FUSIONFLEET_ENGINE_BASE_TIMEOUT_SECONDS)
    faults_file: Path | None = read(settings.FUSIONFLEET_FAULTS_FILE)  # noqa: RUF009  (None)
    # The render loop's liveness record, which the container's health check reads
    # (gpu_worker.lifecycle.liveness); None: none written.
    liveness_file: Path | None = read(settings.FUSIONFLEET_LIVENESS_FILE)  # noqa: RUF009  (None)
    # Dollars per GPU-hour by capacity type: a render worker stamps each attempt record with its own, and
    # the merge prices attempts without one (fusionfleet.jobs.cost).
    gpu_hourly_price: float = read(settings.FUSIONFLEET_GPU_HOURLY_PRICE)
    gpu_spot_hourly_price: float = read(settings.FUSIONFLEET_GPU_SPOT_HOURLY_PRICE)  # 0: Spot priced as On-Demand
    capacity_type: str = read(settings.FUSIONFLEET_CAPACITY_TYPE)  # resolve() reads the file's over it
    capacity_file: Path | None = read(settings.FUSIONFLEET_CAPACITY_FILE)  # noqa: RUF009  (None)
    # The webhook queue (fusionfleet.webhooks.outbox): a finished segment's progress and preview events.
    webhook_queue_url: str | None = read(settings.FUSIONFLEET_WEBHOOK_QUEUE_URL)
    # Where the worker's presence record goes (work/_workers/<name>.json); None: no record (and no blocklist).
    work_bucket: str | None = read(settings.WORK_BUCKET)
    beat_s: float = read(settings.FUSIONFLEET_WORKER_BEAT_SECONDS)
    # The ECS agent's endpoint: task scale-in protection while a segment is held; None off ECS.
    ecs_agent_uri: str | None = read(settings.ECS_AGENT_URI)
    # The task metadata endpoint: whether its deployment is being replaced (lifecycle/retirement.py).
    ecs_metadata_uri: str | None = read(settings.ECS_CONTAINER_METADATA_URI_V4)
    # A render worker takes a segment only with this much GPU memory free (None: no check), on the
    # GPUs it may see (CUDA_VISIBLE_DEVICES; all when unset).
    min_free_gpu_mb: float | None = read(settings.FUSIONFLEET_MIN_FREE_GPU_MB)
    visible_gpus: tuple[str, ...] = read(settings.CUDA_VISIBLE_DEVICES)
    # A render worker that fails this many distinct segments of one job (by its own doing) stops taking
    # that job's segments (needs the presence records of work_bucket to tell whether anyone else is
    # left); 0: never.
    block_after_failures: int = read(settings.FUSIONFLEET_BLOCK_AFTER_FAILURES)
    # How long every live render worker must have been listed for a job before it fails for want of one.
    block_grace_s: float = read(settings.FUSIONFLEET_BLOCK_GRACE_SECONDS)
    # A render worker takes its next task while this one renders when the queues hold at least this
    # many visible messages (gpu_worker.delivery.lookahead); 0: never. Off by default, as measured one job at a
    # time (benchmarks/results/fleet-overhead-lookahead-on.json and -off.json): it hides the gaps between
    # one worker's segments but on 6 and 12 workers the early takes left others idle.
    lookahead_min_backlog: int = read(settings.FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG)
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
