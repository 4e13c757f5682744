"""The tenant HTTP API's environment (the Lambda behind API Gateway; the local stack's API process)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment.aws import ENV_ENDPOINT, ENV_REGION
from fusionfleet.environment.contract import variable

ENV_MEDIA_BUCKET = "MEDIA_BUCKET"
ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_STATE_MACHINE = "STATE_MACHINE_ARN"
ENV_TOPIC = "NOTIFICATION_TOPIC_ARN"
ENV_TENANT_CLAIM = "TENANT_CLAIM"
ENV_UPLOAD_URL_SECONDS = "UPLOAD_URL_SECONDS"
ENV_DOWNLOAD_URL_SECONDS = "DOWNLOAD_URL_SECONDS"
ENV_MAX_UPLOAD_MIB = "MAX_UPLOAD_MIB"
# Checked again by the handler (functions/api/claims.py): the audience, and Cognito's token_use.
ENV_AUDIENCE = "API_AUDIENCE"
ENV_TOKEN_USE = "API_TOKEN_USE"
ENV_WEBHOOK_ALLOW_LOOPBACK = "WEBHOOK_ALLOW_LOOPBACK"  # the local stack's webhook receivers; never on AWS
# The slicer's DEFAULT_ENGINE: a job that names no engine is validated for the one it will run on.
ENV_DEFAULT_ENGINE = "DEFAULT_ENGINE"


@dataclass(frozen=True)
class ApiEnvironment:
    region: str = variable(ENV_REGION)
    media_bucket: str = variable(ENV_MEDIA_BUCKET)
    work_bucket: str = variable(ENV_WORK_BUCKET)
    state_machine_arn: str = variable(ENV_STATE_MACHINE)
    topic_arn: str = variable(ENV_TOPIC)
    endpoint_url: str | None = variable(ENV_ENDPOINT, None)
    tenant_claim: str = variable(ENV_TENANT_CLAIM, "tenant")  # the JWT claim that names the caller's tenant
    upload_url_s: int = variable(ENV_UPLOAD_URL_SECONDS, 300)
    download_url_s: int = variable(ENV_DOWNLOAD_URL_SECONDS, 900)
    max_upload_mib: int = variable(ENV_MAX_UPLOAD_MIB, 2048)  # per file; signed into each upload's POST policy
    audience: str = variable(ENV_AUDIENCE, "")  # empty: not checked again
    token_use: str = variable(ENV_TOKEN_USE, "")  # empty: not checked
    webhook_allow_loopback: bool = variable(ENV_WEBHOOK_ALLOW_LOOPBACK, False)
    default_engine: str = variable(ENV_DEFAULT_ENGINE, "classic")
