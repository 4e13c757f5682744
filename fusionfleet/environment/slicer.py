"""The slicer's configuration (the Lambda function; the local stack's slicer runner): one class.

Each field is read from the variable it names (`fusionfleet.environment.contract`) and its default is
written once, here or on the domain policy it comes from; the policies the slicer applies are built
from the fields (`timeouts`, `tenants`, `gpu_fleet`, `wake`), and the rules no variable sets (media
limits, key rules, segment and sizing policies) are fields with no variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fusionfleet.environment.aws import ENV_ENDPOINT, ENV_REGION
from fusionfleet.environment.contract import variable
from fusionfleet.fleet.quotas import GpuFleet
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.fleet.wake import WakePolicy
from fusionfleet.jobs.manifest import KeyPolicy
from fusionfleet.jobs.plan import SegmentPolicy
from fusionfleet.jobs.sizing import SizingPolicy
from fusionfleet.jobs.timeouts import TimeoutPolicy
from fusionfleet.media.gpu_media import ENCODER_DEVICES
from fusionfleet.media.limits import MediaLimits
from fusionfleet.webhooks.addresses import AddressPolicy

ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_STATE_MACHINE = "STATE_MACHINE_ARN"
ENV_TOPIC = "NOTIFICATION_TOPIC_ARN"
ENV_DEFAULT_ENGINE = "DEFAULT_ENGINE"
ENV_VISIBILITY = "RENDER_VISIBILITY_SECONDS"
ENV_MAX_ATTEMPTS = "RENDER_MAX_ATTEMPTS"
ENV_BACKLOG = "ACCEPTED_BACKLOG_SECONDS"
ENV_RENDER_CONCURRENCY = "RENDER_CONCURRENCY"
ENV_MAX_RUNNING_JOBS = "MAX_RUNNING_JOBS"
ENV_ENCODER_THREADS = "ENCODER_THREADS"
ENV_VIDEO_ENCODER_DEVICE = "VIDEO_ENCODER_DEVICE"
ENV_TENANT_MAX_RUNNING_JOBS = "TENANT_MAX_RUNNING_JOBS"
ENV_TENANT_MAX_SEGMENTS = "TENANT_MAX_SEGMENTS"
ENV_GPU_INSTANCE_TYPES = "GPU_INSTANCE_TYPES"
ENV_GPU_ON_DEMAND_PERCENTAGE = "GPU_ON_DEMAND_PERCENTAGE"
ENV_GPU_QUOTA_CACHE_SECONDS = "GPU_QUOTA_CACHE_SECONDS"
ENV_FLEET_MAX_WORKERS = "FLEET_MAX_WORKERS"
ENV_BATCH_WINDOW = "BATCH_WINDOW"
# The render service the slicer raises for a new job (AWS stages; unset locally).
ENV_RENDER_CLUSTER = "RENDER_CLUSTER"
ENV_RENDER_SERVICE = "RENDER_SERVICE"
ENV_RENDER_BACKLOG_PER_TASK = "RENDER_BACKLOG_PER_TASK"
# Where a started job's webhook event goes (unset: none), and whether webhooks may go to the loopback
# over http (the local stack's receivers; never on AWS).
ENV_WEBHOOK_QUEUE = "WEBHOOK_QUEUE_URL"
ENV_WEBHOOK_ALLOW_LOOPBACK = "WEBHOOK_ALLOW_LOOPBACK"


@dataclass(frozen=True)
class SlicerEnvironment:
    """What the slicer reads from its environment, and the rules it applies."""

    region: str = variable(ENV_REGION)
    work_bucket: str = variable(ENV_WORK_BUCKET)
    state_machine_arn: str = variable(ENV_STATE_MACHINE)
    topic_arn: str = variable(ENV_TOPIC)
    endpoint_url: str | None = variable(ENV_ENDPOINT, None)
    default_engine: str = variable(ENV_DEFAULT_ENGINE, "classic")
    visibility_s: int = variable(ENV_VISIBILITY, TimeoutPolicy.visibility_s)
    max_attempts: int = variable(ENV_MAX_ATTEMPTS, TimeoutPolicy.max_attempts)
    # The longest a segment may wait in the queues: each job's task heartbeats and timeouts follow
    # from its length and these (fusionfleet.jobs.timeouts).
    accepted_backlog_s: int = variable(ENV_BACKLOG, TimeoutPolicy.accepted_backlog_s)
    # Segments of one job in flight at once. Bounded so one long job cannot hold every waiting
    # task the orchestrator has (LocalStack keeps threads per waiting task); a priority job still
    # overtakes, since its own segments are sent at once.
    render_concurrency: int = variable(ENV_RENDER_CONCURRENCY, 1000)
    # Jobs running at once that the stack accepts; 0: no limit. An emulator has a thread budget
    # (LocalStack holds about three threads per segment in flight): past it a job is refused with a
    # notice saying so, rather than accepted and lost.
    max_running_jobs: int = variable(ENV_MAX_RUNNING_JOBS, 0)
    # Per tenant (`tenants/T/jobs/` drops): jobs at once, and segments in flight shared among them.
    tenant_max_running_jobs: int = variable(ENV_TENANT_MAX_RUNNING_JOBS, TenantLimits.max_running_jobs)
    tenant_max_segments: int = variable(ENV_TENANT_MAX_SEGMENTS, TenantLimits.max_segments)
    encoder_threads: int = variable(ENV_ENCODER_THREADS, 2)
    # The fleet's encoder device: "nvenc" when every render worker carries NVENC (fusionfleet.media.gpu_media);
    # a job that names no encoder is then encoded on the GPU, all its segments alike.
    video_encoder_device: str = variable(ENV_VIDEO_ENCODER_DEVICE, "cpu")
    # On AWS, the GPU hosts' instance types and market: a job is refused while the account's vCPU
    # quota cannot start one of them (fusionfleet.fleet.quotas). None: no check (the local stack).
    gpu_instance_types: tuple[str, ...] = variable(ENV_GPU_INSTANCE_TYPES, ())
    gpu_on_demand_percentage: int = variable(ENV_GPU_ON_DEMAND_PERCENTAGE, GpuFleet.on_demand_percentage)
    gpu_quota_cache_s: int = variable(ENV_GPU_QUOTA_CACHE_SECONDS, 300)
    # The most render workers the fleet may run (RenderMaxTasks, `local up --max-workers`). 0: fixed
    # 2–5 s plans; otherwise plans are sized to that fleet and the engine's cost (fusionfleet.jobs.sizing).
    fleet_max_workers: int = variable(ENV_FLEET_MAX_WORKERS, 0)
    # Items of one batch running at once; 0: two rounds of the fleet (fusionfleet.fleet.fairness.batch_window).
    batch_window: int = variable(ENV_BATCH_WINDOW, 0)
    render_cluster: str = variable(ENV_RENDER_CLUSTER, "")
    render_service: str = variable(ENV_RENDER_SERVICE, "")  # empty: no service to wake (local stack)
    render_backlog_per_task: float = variable(ENV_RENDER_BACKLOG_PER_TASK, WakePolicy.backlog_per_task)
    webhook_queue_url: str | None = variable(ENV_WEBHOOK_QUEUE, None)
    webhook_allow_loopback: bool = variable(ENV_WEBHOOK_ALLOW_LOOPBACK, False)
    # Rules no variable sets.
    limits: MediaLimits = field(default_factory=MediaLimits)
    keys: KeyPolicy = field(default_factory=KeyPolicy)
    segments: SegmentPolicy = field(default_factory=SegmentPolicy)
    sizing: SizingPolicy = field(default_factory=SizingPolicy)

    def __post_init__(self) -> None:
        # Read once, checked once: a limit that cannot hold stops the slicer at start, naming it.
        _ = (self.timeouts, self.tenants, self.wake)
        if self.video_encoder_device not in ENCODER_DEVICES:
            raise ValueError(
                f"the fleet's encoder device {self.video_encoder_device!r} is not one of {', '.join(ENCODER_DEVICES)}"
            )

    @property
    def manifest_keys(self) -> KeyPolicy:
        """The manifest's key rules, with where its webhook may go (https and public addresses on AWS)."""
        loopback = self.webhook_allow_loopback
        return replace(
            self.keys,
            webhooks=AddressPolicy(allow_loopback=loopback, require_https=not loopback),
            encoder_device=self.video_encoder_device,
        )

    @property
    def timeouts(self) -> TimeoutPolicy:
        return TimeoutPolicy(self.visibility_s, self.max_attempts, accepted_backlog_s=self.accepted_backlog_s)

    @property
    def tenants(self) -> TenantLimits:
        return TenantLimits(self.tenant_max_running_jobs, self.tenant_max_segments)

    @property
    def gpu_fleet(self) -> GpuFleet | None:
        return GpuFleet(self.gpu_instance_types, self.gpu_on_demand_percentage) if self.gpu_instance_types else None

    @property
    def wake(self) -> WakePolicy | None:
        """How the render service is raised for a new job; None without a service or a fleet to size."""
        if not self.render_service or self.fleet_max_workers < 1:
            return None
        return WakePolicy(self.fleet_max_workers, self.render_backlog_per_task)
