"""HTTP API Lambda: API Gateway (HTTP API, payload 2.0, JWT authorizer) → functions.api.routes.

API Gateway verified the token before the call and passes its claims in
`requestContext.authorizer.jwt.claims`; locally `infra/emulators/api_gateway.py` does the same.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from functions.api.claims import TokenRules, token_problem
from functions.api.routes import ApiRequest, ApiResponse, handle
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.contract import from_env
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_jobs import MIB, TenantJobs

logger = Logger(service="fusionfleet-api")
NO_RULES = TokenRules()


@dataclass(frozen=True)
class ApiSettings:
    media_bucket: str
    work_bucket: str
    state_machine_arn: str
    topic_arn: str
    tenant_claim: str = ApiEnvironment.tenant_claim
    upload_url_s: int = ApiEnvironment.upload_url_s
    download_url_s: int = ApiEnvironment.download_url_s
    max_upload_mib: int = ApiEnvironment.max_upload_mib
    token_rules: TokenRules = NO_RULES
    default_engine: str = ApiEnvironment.default_engine


def settings(env: Mapping[str, str]) -> tuple[AwsTarget, ApiSettings]:
    """Everything the API takes from its environment (fusionfleet.environment.api), read here and nowhere else."""
    read = from_env(ApiEnvironment, env)
    aws = AwsTarget(region=read.region, endpoint_url=read.endpoint_url)
    return aws, ApiSettings(
        media_bucket=read.media_bucket,
        work_bucket=read.work_bucket,
        state_machine_arn=read.state_machine_arn,
        topic_arn=read.topic_arn,
        tenant_claim=read.tenant_claim,
        upload_url_s=read.upload_url_s,
        download_url_s=read.download_url_s,
        max_upload_mib=read.max_upload_mib,
        token_rules=TokenRules(read.audience, read.token_use),
        default_engine=read.default_engine,
    )


def tenant_jobs(aws: AwsTarget, config: ApiSettings) -> TenantJobs:
    # SigV4 presigned URLs: bound to bucket, key and method, with a lifetime the URL states.
    storage = S3Storage(aws.client("s3", signature_version="s3v4"))
    operations = Operations(storage, StepFunctions(aws.client("stepfunctions")), SnsNotifier(aws.client("sns")), config)
    return TenantJobs(storage, operations, config.media_bucket, config.work_bucket, config.upload_url_s,
                      config.download_url_s, config.max_upload_mib * MIB,
                      default_engine=config.default_engine)  # fmt: skip


@cache
def _configured() -> tuple[TenantJobs, ApiSettings]:
    aws, config = settings(os.environ)
    return tenant_jobs(aws, config), config


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


def respond(
    event: Mapping[str, Any], jobs: TenantJobs, tenant_claim: str = "tenant", rules: TokenRules = NO_RULES
) -> dict[str, Any]:
    request = to_request(event)
    problem = token_problem(request.claims, rules)
    if problem is not None:
        return to_result(ApiResponse(401, {"error": problem}, {"WWW-Authenticate": 'Bearer error="invalid_token"'}))
    return to_result(handle(request, jobs, tenant_claim))


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    jobs, config = _configured()
    return respond(event, jobs, config.tenant_claim, config.token_rules)
