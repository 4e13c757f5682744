"""The job-events function's environment: the webhook deliverer and the notice follower (the Lambda on
AWS; the local stack's two event-source runners)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment.aws import ENV_ENDPOINT, ENV_REGION
from fusionfleet.environment.contract import variable
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE
from fusionfleet.services.webhooks import WebhookConfig

ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_STATE_MACHINE = "STATE_MACHINE_ARN"
ENV_WEBHOOK_QUEUE = "WEBHOOK_QUEUE_URL"
ENV_SECRET_PREFIX = "WEBHOOK_SECRET_PREFIX"
ENV_ALLOW_LOOPBACK = "WEBHOOK_ALLOW_LOOPBACK"  # the local stack's receivers listen on 127.0.0.1
ENV_RETRY_DELAYS = "WEBHOOK_RETRY_DELAYS_SECONDS"  # comma-separated; unset: the default schedule
ENV_TIMEOUT = "WEBHOOK_TIMEOUT_SECONDS"
ENV_PROGRESS_EVERY = "WEBHOOK_PROGRESS_EVERY_SECONDS"
ENV_TENANT_MAX_RUNNING_JOBS = "TENANT_MAX_RUNNING_JOBS"
ENV_TENANT_MAX_SEGMENTS = "TENANT_MAX_SEGMENTS"
ENV_MAX_RUNNING_JOBS = "MAX_RUNNING_JOBS"
ENV_GPU_HOURLY_PRICE = "GPU_HOURLY_PRICE"
ENV_GPU_SPOT_HOURLY_PRICE = "GPU_SPOT_HOURLY_PRICE"


@dataclass(frozen=True)
class JobEventsEnvironment:
    region: str = variable(ENV_REGION)
    work_bucket: str = variable(ENV_WORK_BUCKET)
    state_machine_arn: str = variable(ENV_STATE_MACHINE)
    webhook_queue_url: str = variable(ENV_WEBHOOK_QUEUE)
    secret_prefix: str = variable(ENV_SECRET_PREFIX)
    endpoint_url: str | None = variable(ENV_ENDPOINT, None)
    allow_loopback: bool = variable(ENV_ALLOW_LOOPBACK, False)
    retry_delays_s: tuple[str, ...] = variable(ENV_RETRY_DELAYS, ())
    timeout_s: float = variable(ENV_TIMEOUT, 10.0)
    progress_every_s: float = variable(ENV_PROGRESS_EVERY, WebhookConfig.progress_every_s)
    tenant_max_running_jobs: int = variable(ENV_TENANT_MAX_RUNNING_JOBS, TenantLimits.max_running_jobs)
    tenant_max_segments: int = variable(ENV_TENANT_MAX_SEGMENTS, TenantLimits.max_segments)
    max_running_jobs: int = variable(ENV_MAX_RUNNING_JOBS, 0)
    gpu_hourly_price: float = variable(ENV_GPU_HOURLY_PRICE, DEFAULT_GPU_HOURLY_PRICE)
    gpu_spot_hourly_price: float = variable(ENV_GPU_SPOT_HOURLY_PRICE, 0.0)
