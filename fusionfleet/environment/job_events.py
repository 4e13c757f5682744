"""The job-events function's environment: the webhook deliverer and the notice follower (the Lambda on
AWS; the local stack's two event-source runners)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment import settings

read = settings.reader(settings.JOB_EVENTS)


@dataclass(frozen=True)
class JobEventsEnvironment:
    region: str = read(settings.AWS_REGION)
    work_bucket: str = read(settings.WORK_BUCKET)
    state_machine_arn: str = read(settings.STATE_MACHINE_ARN)
    webhook_queue_url: str = read(settings.WEBHOOK_QUEUE_URL)
    secret_prefix: str = read(settings.WEBHOOK_SECRET_PREFIX)
    endpoint_url: str | None = read(settings.AWS_ENDPOINT_URL)
    allow_loopback: bool = read(settings.WEBHOOK_ALLOW_LOOPBACK)
    retry_delays_s: tuple[str, ...] = read(settings.WEBHOOK_RETRY_DELAYS_SECONDS)
    timeout_s: float = read(settings.WEBHOOK_TIMEOUT_SECONDS)
    progress_every_s: float = read(settings.WEBHOOK_PROGRESS_EVERY_SECONDS)
    tenant_max_running_jobs: int = read(settings.TENANT_MAX_RUNNING_JOBS)
    tenant_max_segments: int = read(settings.TENANT_MAX_SEGMENTS)
    max_running_jobs: int = read(settings.MAX_RUNNING_JOBS)
    gpu_hourly_price: float = read(settings.GPU_HOURLY_PRICE)
    gpu_spot_hourly_price: float = read(settings.GPU_SPOT_HOURLY_PRICE)
