"""The slicer's environment (the Lambda function; the local stack's slicer runner)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment.aws import ENV_ENDPOINT, ENV_REGION
from fusionfleet.environment.contract import variable
from fusionfleet.fleet.quotas import GpuFleet
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.fleet.wake import WakePolicy
from fusionfleet.jobs.timeouts import TimeoutPolicy
from fusionfleet.services.slicing import SlicerConfig

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
ENV_TENANT_MAX_RUNNING_JOBS = "TENANT_MAX_RUNNING_JOBS"
ENV_TENANT_MAX_SEGMENTS = "TENANT_MAX_SEGMENTS"
ENV_GPU_INSTANCE_TYPES = "GPU_INSTANCE_TYPES"
ENV_GPU_ON_DEMAND_PERCENTAGE = "GPU_ON_DEMAND_PERCENTAGE"
ENV_GPU_QUOTA_CACHE_SECONDS = "GPU_QUOTA_CACHE_SECONDS"
ENV_FLEET_MAX_WORKERS = "FLEET_MAX_WORKERS"
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
    """What the slicer reads from its environment; defaults are the domain's (SlicerConfig, TimeoutPolicy)."""

    region: str = variable(ENV_REGION)
    work_bucket: str = variable(ENV_WORK_BUCKET)
    state_machine_arn: str = variable(ENV_STATE_MACHINE)
    topic_arn: str = variable(ENV_TOPIC)
    endpoint_url: str | None = variable(ENV_ENDPOINT, None)
    default_engine: str = variable(ENV_DEFAULT_ENGINE, SlicerConfig.default_engine)
    visibility_s: int = variable(ENV_VISIBILITY, TimeoutPolicy.visibility_s)
    max_attempts: int = variable(ENV_MAX_ATTEMPTS, TimeoutPolicy.max_attempts)
    accepted_backlog_s: int = variable(ENV_BACKLOG, TimeoutPolicy.accepted_backlog_s)
    render_concurrency: int = variable(ENV_RENDER_CONCURRENCY, SlicerConfig.render_concurrency)
    max_running_jobs: int = variable(ENV_MAX_RUNNING_JOBS, SlicerConfig.max_running_jobs)
    tenant_max_running_jobs: int = variable(ENV_TENANT_MAX_RUNNING_JOBS, TenantLimits.max_running_jobs)
    tenant_max_segments: int = variable(ENV_TENANT_MAX_SEGMENTS, TenantLimits.max_segments)
    encoder_threads: int = variable(ENV_ENCODER_THREADS, SlicerConfig.encoder_threads)
    gpu_instance_types: tuple[str, ...] = variable(ENV_GPU_INSTANCE_TYPES, ())  # none: no quota check
    gpu_on_demand_percentage: int = variable(ENV_GPU_ON_DEMAND_PERCENTAGE, GpuFleet.on_demand_percentage)
    gpu_quota_cache_s: int = variable(ENV_GPU_QUOTA_CACHE_SECONDS, SlicerConfig.gpu_quota_cache_s)
    fleet_max_workers: int = variable(ENV_FLEET_MAX_WORKERS, SlicerConfig.fleet_max_workers)
    render_cluster: str = variable(ENV_RENDER_CLUSTER, "")
    render_service: str = variable(ENV_RENDER_SERVICE, "")  # empty: no service to wake (local stack)
    render_backlog_per_task: float = variable(ENV_RENDER_BACKLOG_PER_TASK, WakePolicy.backlog_per_task)
    webhook_queue_url: str | None = variable(ENV_WEBHOOK_QUEUE, None)
    webhook_allow_loopback: bool = variable(ENV_WEBHOOK_ALLOW_LOOPBACK, False)
