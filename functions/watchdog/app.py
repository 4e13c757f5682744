"""Watchdog Lambda (scheduled): end every stuck or silently ended job with exactly one notice; tick open batches."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.watchdog import WatchdogEnvironment
from fusionfleet.services.backups import BackupSender
from fusionfleet.services.batch_ticks import tick_open_batches
from fusionfleet.services.watchdog import Watchdog

logger = Logger(service="fusionfleet-watchdog")


@cache
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
    config = settings()
    ticked = []
    if config.ingest_queue_url:
        queue = SqsQueue(AwsTarget(region=config.region, endpoint_url=config.endpoint_url).client("sqs"))
        ticked = tick_open_batches(keeper.storage, config.work_bucket, queue, config.ingest_queue_url)
    return {
        "closed": [item.job_id for item in closed],
        "backups": [f"{item.job_id}:{item.index}" for item in keeper.backups_sent],
        "batches_ticked": ticked,
    }
