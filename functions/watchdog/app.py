"""Watchdog Lambda (scheduled): end every stuck or silently ended job with exactly one notice."""

from __future__ import annotations

import os
from collections.abc import Mapping
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
from fusionfleet.fleet.stragglers import BackupPolicy
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.manifest import PRIORITIES
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.services.backups import BackupSender
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_sweep import TenantSweep
from fusionfleet.services.watchdog import Watchdog, WatchdogConfig, WatchdogPolicy
from fusionfleet.webhooks.outbox import WebhookOutbox

logger = Logger(service="fusionfleet-watchdog")


def settings(env: Mapping[str, str]) -> tuple[AwsTarget, WatchdogConfig]:
    """Everything the watchdog takes from its environment (fusionfleet.environment.watchdog), read here only."""
    read = from_env(WatchdogEnvironment, env)
    policy = WatchdogPolicy(stall_s=read.stall_s, dispatch_grace_s=read.dispatch_grace_s)
    config = WatchdogConfig(
        work_bucket=read.work_bucket, state_machine_arn=read.state_machine_arn, topic_arn=read.topic_arn,
        policy=policy,
    )  # fmt: skip
    return AwsTarget(region=read.region, endpoint_url=read.endpoint_url), config


def backup_settings(env: Mapping[str, str]) -> tuple[dict[str, str], BackupPolicy]:
    """The render queues by priority and the straggler rule (fusionfleet.fleet.stragglers)."""
    read = from_env(WatchdogEnvironment, env)
    urls = read.render_queue_urls
    queues: dict[str, str] = dict(zip(PRIORITIES, urls, strict=True)) if len(urls) == len(PRIORITIES) else {}
    policy = BackupPolicy(
        enabled=read.backups,
        factor=read.backup_factor,
        min_age_s=read.backup_min_age_s,
        done_fraction=read.backup_done_fraction,
        last_segments=read.backup_last_segments,
    )
    return queues, policy


@cache
def tenant_round() -> TenantSweep:
    """Waiting jobs admitted and budgets enforced, after the job round (fusionfleet.services.tenant_sweep)."""
    aws, config = settings(os.environ)
    read = from_env(WatchdogEnvironment, os.environ)
    storage = S3Storage(aws.client("s3"))
    orchestrator = StepFunctions(aws.client("stepfunctions"))
    notifier = SnsNotifier(aws.client("sns"))
    operations = Operations(storage, orchestrator, notifier, config)
    outbox = None
    if read.webhook_queue_url:
        outbox = WebhookOutbox(SqsOrderedQueue(aws.client("sqs")), read.webhook_queue_url, storage, config.work_bucket)
    admission = AdmissionConfig(
        config.work_bucket, config.state_machine_arn, max_running_jobs=read.max_running_jobs,
        stack_limits=TenantLimits(read.tenant_max_running_jobs, read.tenant_max_segments),
    )  # fmt: skip
    admitter = Admitter(storage, orchestrator, admission, outbox, resume=operations.resume)
    return TenantSweep(
        storage, orchestrator, notifier, config.work_bucket, config.state_machine_arn, config.topic_arn, admitter,
        cancel=operations.cancel,
    )  # fmt: skip


@cache
def watchdog() -> Watchdog:
    # Cached: a warm Lambda (or the local runner's process) remembers which executions are settled.
    aws, config = settings(os.environ)
    queues, policy = backup_settings(os.environ)
    storage = S3Storage(aws.client("s3"))
    backups = BackupSender(storage, SqsQueue(aws.client("sqs")), config.work_bucket, queues, policy) if queues else None
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
    return {
        "closed": [item.job_id for item in closed],
        "backups": [f"{item.job_id}:{item.index}" for item in keeper.backups_sent],
        "admitted": tenants.admitted,
        "over_budget": tenants.over_budget,
        "held": tenants.held,
        "cancelled": tenants.cancelled,
    }
