"""The slicer's configuration (the Lambda function; the local stack's slicer runner): one class.

Each field is read from the variable it names (`fusionfleet.environment.contract`) and its default is
written once, here or on the domain policy it comes from; the policies the slicer applies are built
from the fields (`timeouts`, `tenants`, `gpu_fleet`, `wake`), and the rules no variable sets (media
limits, key rules, segment and sizing policies) are fields with no variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fusionfleet.environment import settings
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

read = settings.reader(settings.SLICER)


@dataclass(frozen=True)
class SlicerEnvironment:
    """What the slicer reads from its environment, and the rules it applies."""

    region: str = read(settings.AWS_REGION)
    work_bucket: str = read(settings.WORK_BUCKET)
    state_machine_arn: str = read(settings.STATE_MACHINE_ARN)
    topic_arn: str = read(settings.NOTIFICATION_TOPIC_ARN)
    endpoint_url: str | None = read(settings.AWS_ENDPOINT_URL)
    default_engine: str = read(settings.DEFAULT_ENGINE)
    visibility_s: int = read(settings.RENDER_VISIBILITY_SECONDS)
    max_attempts: int = read(settings.RENDER_MAX_ATTEMPTS)
    # The longest a segment may wait in the queues: each job's task heartbeats and timeouts follow
    # from its length and these (fusionfleet.jobs.timeouts).
    accepted_backlog_s: int = read(settings.ACCEPTED_BACKLOG_SECONDS)
    # Segments of one job in flight at once. Bounded so one long job cannot hold every waiting
    # task the orchestrator has (LocalStack keeps threads per waiting task); a priority job still
    # overtakes, since its own segments are sent at once.
    render_concurrency: int = read(settings.RENDER_CONCURRENCY)
    # Jobs running at once that the stack accepts; 0: no limit. An emulator has a thread budget
    # (LocalStack holds about three threads per segment in flight): past it a job is refused with a
    # notice saying so, rather than accepted and lost.
    max_running_jobs: int = read(settings.MAX_RUNNING_JOBS)
    # Per tenant (`tenants/T/jobs/` drops): jobs at once, and segments in flight shared among them.
    tenant_max_running_jobs: int = read(settings.TENANT_MAX_RUNNING_JOBS)
    tenant_max_segments: int = read(settings.TENANT_MAX_SEGMENTS)
    encoder_threads: int = read(settings.ENCODER_THREADS)
    # The fleet's encoder device: "nvenc" when every render worker carries NVENC (fusionfleet.media.gpu_media);
    # a job that names no encoder is then encoded on the GPU, all its segments alike.
    video_encoder_device: str = read(settings.VIDEO_ENCODER_DEVICE)
    # On AWS, the GPU hosts' instance types and market: a job is refused while the account's vCPU
    # quota cannot start one of them (fusionfleet.fleet.quotas). None: no check (the local stack).
    gpu_instance_types: tuple[str, ...] = read(settings.GPU_INSTANCE_TYPES)
    gpu_on_demand_percentage: int = read(settings.GPU_ON_DEMAND_PERCENTAGE)
    gpu_quota_cache_s: int = read(settings.GPU_QUOTA_CACHE_SECONDS)
    # The most render workers the fleet may run (RenderMaxTasks, `local up --max-workers`). 0: fixed
    # 2–5 s plans; otherwise plans are sized to that fleet and the engine's cost (fusionfleet.jobs.sizing).
    fleet_max_workers: int = read(settings.FLEET_MAX_WORKERS)
    # Items of one batch running at once; 0: two rounds of the fleet (fusionfleet.fleet.fairness.batch_window).
    batch_window: int = read(settings.BATCH_WINDOW)
    render_cluster: str = read(settings.RENDER_CLUSTER)
    render_service: str = read(settings.RENDER_SERVICE)  # empty: no service to wake (local stack)
    render_backlog_per_task: float = read(settings.RENDER_BACKLOG_PER_TASK)
    webhook_queue_url: str | None = read(settings.WEBHOOK_QUEUE_URL)
    webhook_allow_loopback: bool = read(settings.WEBHOOK_ALLOW_LOOPBACK)
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
