"""Watchdog Lambda (scheduled): end every stuck or silently ended job with exactly one notice; tick open batches."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.ordered_queue import SqsOrderedQueue
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.watchdog import WatchdogEnvironment
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.services.backups import BackupSender
from fusionfleet.services.batch_ticks import tick_open_batches
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_sweep import TenantSweep
from fusionfleet.services.watchdog import Watchdog
from fusionfleet.webhooks.outbox import WebhookOutbox

logger = Logger(service="fusionfleet-watchdog")


@cache
def tenant_round() -> TenantSweep:
    """Waiting jobs admitted and budgets enforced, after the job round (fusionfleet.services.tenant_sweep)."""
    config = from_env(WatchdogEnvironment, os.environ)
    aws = AwsTarget(region=config.region, endpoint_url=config.endpoint_url)
    storage = S3Storage(aws.client("s3"))
    orchestrator = StepFunctions(aws.client("stepfunctions"))
    notifier = SnsNotifier(aws.client("sns"))
    operations = Operations(storage, orchestrator, notifier, config)
    outbox = None
    if config.webhook_queue_url:
        outbox = WebhookOutbox(
            SqsOrderedQueue(aws.client("sqs")), config.webhook_queue_url, storage, config.work_bucket
        )
    admission = AdmissionConfig(
        config.work_bucket, config.state_machine_arn, max_running_jobs=config.max_running_jobs,
        stack_limits=TenantLimits(config.tenant_max_running_jobs, config.tenant_max_segments),
    )  # fmt: skip
    admitter = Admitter(storage, orchestrator, admission, outbox, resume=operations.resume)
    return TenantSweep(
        storage, orchestrator, notifier, config.work_bucket, config.state_machine_arn, config.topic_arn, admitter,
        cancel=operations.cancel,
    )  # fmt: skip


def settings() -> WatchdogEnvironment:
    return from_env(WatchdogEnvironment, os.environ)


@cache
def watchdog() -> Watchdog:
    # Cached: a warm Lambda (or the local runner's process) remembers which executions are settled. Its
    # environment is its configuration (fusionfleet.environment.watchdog), read here and nowhere else.
    config = settings()
    aws = AwsTarget(region=config.region, endpoint_url=config.endpoint_url)
    storage = S3Storage(aws.client("s3"))
    queues = config.render_queues
    backups = (
        BackupSender(storage, SqsQueue(aws.client("sqs")), config.work_bucket, queues, config.backup_policy)
        if queues
        else None
    )
    return Watchdog(
        storage, StepFunctions(aws.client("stepfunctions")), SnsNotifier(aws.client("sns")), config, backups
    )


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    keeper = watchdog()
    closed = keeper.sweep()
    for item in closed:
        logger.warning("job closed by the watchdog", job_id=item.job_id, action=item.action, reason=item.reason)
    tenants = tenant_round().sweep()
    for tenant, started in tenants.admitted.items():
        logger.info("waiting jobs started", tenant=tenant, jobs=started)
    config = settings()
    ticked = []
    if config.ingest_queue_url:
        queue = SqsQueue(AwsTarget(region=config.region, endpoint_url=config.endpoint_url).client("sqs"))
        ticked = tick_open_batches(keeper.storage, config.work_bucket, queue, config.ingest_queue_url)
    return {
        "closed": [item.job_id for item in closed],
        "backups": [f"{item.job_id}:{item.index}" for item in keeper.backups_sent],
        "batches_ticked": ticked,
        "admitted": tenants.admitted,
        "over_budget": tenants.over_budget,
        "held": tenants.held,
        "cancelled": tenants.cancelled,
    }
