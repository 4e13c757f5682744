"""The tenant HTTP API's environment (the Lambda behind API Gateway; the local stack's API process)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment import settings

read = settings.reader(settings.API)


@dataclass(frozen=True)
class ApiEnvironment:
    region: str = read(settings.AWS_REGION)
    media_bucket: str = read(settings.MEDIA_BUCKET)
    work_bucket: str = read(settings.WORK_BUCKET)
    state_machine_arn: str = read(settings.STATE_MACHINE_ARN)
    topic_arn: str = read(settings.NOTIFICATION_TOPIC_ARN)
    endpoint_url: str | None = read(settings.AWS_ENDPOINT_URL)
    tenant_claim: str = read(settings.TENANT_CLAIM)  # the JWT claim that names the caller's tenant
    upload_url_s: int = read(settings.UPLOAD_URL_SECONDS)
    download_url_s: int = read(settings.DOWNLOAD_URL_SECONDS)
    max_upload_mib: int = read(settings.MAX_UPLOAD_MIB)  # per file; signed into each upload's POST policy
    audience: str = read(settings.API_AUDIENCE)  # empty: not checked again
    token_use: str = read(settings.API_TOKEN_USE)  # empty: not checked
    webhook_allow_loopback: bool = read(settings.WEBHOOK_ALLOW_LOOPBACK)
    default_engine: str = read(settings.DEFAULT_ENGINE)
    # The stack's admission limits: a tenant's retried job is admitted with them at once.
    tenant_max_running_jobs: int = read(settings.TENANT_MAX_RUNNING_JOBS)
    tenant_max_segments: int = read(settings.TENANT_MAX_SEGMENTS)
    max_running_jobs: int = read(settings.MAX_RUNNING_JOBS)
    webhook_queue_url: str | None = read(settings.WEBHOOK_QUEUE_URL)
