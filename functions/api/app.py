"""HTTP API Lambda: API Gateway (HTTP API, payload 2.0, JWT authorizer) → functions.api.routes.

API Gateway verified the token before the call and passes its claims in
`requestContext.authorizer.jwt.claims`; locally `infra/local/api_gateway.py` does the same.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from functions.api.jobs import TenantJobs
from functions.api.routes import ApiRequest, ApiResponse, handle
from fusionfleet.aws import AwsTarget
from fusionfleet.notify import SnsNotifier
from fusionfleet.operations import Operations
from fusionfleet.orchestrator import StepFunctions
from fusionfleet.storage import S3Storage

logger = Logger(service="fusionfleet-api")

ENV_REGION = "AWS_REGION"
ENV_ENDPOINT = "AWS_ENDPOINT_URL"
ENV_MEDIA_BUCKET = "MEDIA_BUCKET"
ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_STATE_MACHINE = "STATE_MACHINE_ARN"
ENV_TOPIC = "NOTIFICATION_TOPIC_ARN"
ENV_TENANT_CLAIM = "TENANT_CLAIM"
ENV_UPLOAD_URL_SECONDS = "UPLOAD_URL_SECONDS"
ENV_DOWNLOAD_URL_SECONDS = "DOWNLOAD_URL_SECONDS"


@dataclass(frozen=True)
class ApiSettings:
    media_bucket: str
    work_bucket: str
    state_machine_arn: str
    topic_arn: str
    tenant_claim: str = "tenant"
    upload_url_s: int = 300
    download_url_s: int = 900


def settings(env: Mapping[str, str]) -> tuple[AwsTarget, ApiSettings]:
    """Everything the API takes from its environment, read here and nowhere else."""
    aws = AwsTarget(region=env[ENV_REGION], endpoint_url=env.get(ENV_ENDPOINT))
    return aws, ApiSettings(
        media_bucket=env[ENV_MEDIA_BUCKET],
        work_bucket=env[ENV_WORK_BUCKET],
        state_machine_arn=env[ENV_STATE_MACHINE],
        topic_arn=env[ENV_TOPIC],
        tenant_claim=env.get(ENV_TENANT_CLAIM) or "tenant",
        upload_url_s=int(env.get(ENV_UPLOAD_URL_SECONDS, "300")),
        download_url_s=int(env.get(ENV_DOWNLOAD_URL_SECONDS, "900")),
    )


def tenant_jobs(aws: AwsTarget, config: ApiSettings) -> TenantJobs:
    # SigV4 presigned URLs: bound to bucket, key and method, with a lifetime the URL states.
    storage = S3Storage(aws.client("s3", signature_version="s3v4"))
    operations = Operations(storage, StepFunctions(aws.client("stepfunctions")), SnsNotifier(aws.client("sns")), config)
    return TenantJobs(storage, operations, config.media_bucket, config.work_bucket, config.upload_url_s,
                      config.download_url_s)  # fmt: skip


@cache
def _configured() -> tuple[TenantJobs, str]:
    aws, config = settings(os.environ)
    return tenant_jobs(aws, config), config.tenant_claim


def to_request(event: Mapping[str, Any]) -> ApiRequest:
    """An HTTP API (payload 2.0) event as the routes read it."""
    http = event.get("requestContext", {}).get("http", {})
    claims = event.get("requestContext", {}).get("authorizer", {}).get("jwt", {}).get("claims") or {}
    body = event.get("body") or ""
    raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    return ApiRequest(
        method=str(http.get("method", "GET")).upper(),
        path=str(event.get("rawPath") or http.get("path") or "/"),
        claims=dict(claims),
        body=raw,
        query=str(event.get("rawQueryString") or ""),
    )


def to_result(response: ApiResponse) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "Cache-Control": "no-store", **response.headers}
    return {"statusCode": response.status, "headers": headers, "body": response.encoded().decode(),
            "isBase64Encoded": False}  # fmt: skip


def respond(event: Mapping[str, Any], jobs: TenantJobs, tenant_claim: str = "tenant") -> dict[str, Any]:
    return to_result(handle(to_request(event), jobs, tenant_claim))


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    jobs, claim = _configured()
    return respond(event, jobs, claim)
