"""HTTP API Lambda: API Gateway (HTTP API, payload 2.0, JWT authorizer) → functions.api.routes.

API Gateway verified the token before the call and passes its claims in
`requestContext.authorizer.jwt.claims`; locally `infra/emulators/api_gateway.py` does the same.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from functions.api.claims import TokenRules
from functions.api.routes import respond
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.ordered_queue import SqsOrderedQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.contract import from_env
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.reader import JobReader
from fusionfleet.services.admission import AdmissionConfig
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_jobs import MIB, TenantJobs
from fusionfleet.webhooks.addresses import AddressPolicy
from fusionfleet.webhooks.outbox import WebhookOutbox

logger = Logger(service="fusionfleet-api")


def tenant_jobs(config: ApiEnvironment) -> TenantJobs:
    aws = AwsTarget(region=config.region, endpoint_url=config.endpoint_url)
    # SigV4 presigned URLs: bound to bucket, key and method, with a lifetime the URL states.
    storage = S3Storage(aws.client("s3", signature_version="s3v4"))
    orchestrator = StepFunctions(aws.client("stepfunctions"))
    reader = JobReader(storage, orchestrator, config.work_bucket, config.state_machine_arn)
    operations = Operations(
        storage, orchestrator, SnsNotifier(aws.client("sns")), config, admission=admission(config),
        outbox=WebhookOutbox(SqsOrderedQueue(aws.client("sqs")), config.webhook_queue_url, storage, config.work_bucket)
        if config.webhook_queue_url else None,
    )  # fmt: skip
    loopback = config.webhook_allow_loopback
    return TenantJobs(storage, reader, operations, config.media_bucket, config.work_bucket, config.upload_url_s,
                      config.download_url_s, config.max_upload_mib * MIB,
                      webhooks=AddressPolicy(allow_loopback=loopback, require_https=not loopback),
                      default_engine=config.default_engine)  # fmt: skip


def admission(config: ApiEnvironment) -> AdmissionConfig:
    """The stack's limits, as its slicer and watchdog admit with: a tenant's retried job starts at once below them."""
    return AdmissionConfig(
        config.work_bucket, config.state_machine_arn, max_running_jobs=config.max_running_jobs,
        stack_limits=TenantLimits(config.tenant_max_running_jobs, config.tenant_max_segments),
    )  # fmt: skip


@cache
def _configured() -> tuple[TenantJobs, ApiEnvironment]:
    # Its environment is its configuration (fusionfleet.environment.api), read here and nowhere else.
    config = from_env(ApiEnvironment, os.environ)
    return tenant_jobs(config), config


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    jobs, config = _configured()
    return respond(event, jobs, config.tenant_claim, TokenRules(config.audience, config.token_use))
