"""Watchdog Lambda (scheduled): end every stuck or silently ended job with exactly one notice."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from fusionfleet.aws import AwsTarget
from fusionfleet.backups import BackupSender
from fusionfleet.manifest import PRIORITIES
from fusionfleet.notify import SnsNotifier
from fusionfleet.orchestrator import StepFunctions
from fusionfleet.queues import SqsQueue
from fusionfleet.storage import S3Storage
from fusionfleet.stragglers import BackupPolicy
from fusionfleet.watchdog import Watchdog, WatchdogConfig, WatchdogPolicy

logger = Logger(service="fusionfleet-watchdog")


ENV_REGION = "AWS_REGION"
ENV_ENDPOINT = "AWS_ENDPOINT_URL"
ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_STATE_MACHINE = "STATE_MACHINE_ARN"
ENV_TOPIC = "NOTIFICATION_TOPIC_ARN"
ENV_STALL = "WATCHDOG_STALL_SECONDS"
ENV_DISPATCH_GRACE = "WATCHDOG_DISPATCH_GRACE_SECONDS"
ENV_RENDER_QUEUES = "RENDER_QUEUE_URLS"  # high, normal, low; unset: no backup copies
ENV_BACKUPS = "WATCHDOG_BACKUPS"
ENV_BACKUP_FACTOR = "WATCHDOG_BACKUP_FACTOR"
ENV_BACKUP_MIN_AGE = "WATCHDOG_BACKUP_MIN_AGE_SECONDS"
ENV_BACKUP_DONE_FRACTION = "WATCHDOG_BACKUP_DONE_FRACTION"
ENV_BACKUP_LAST_SEGMENTS = "WATCHDOG_BACKUP_LAST_SEGMENTS"


def settings(env: Mapping[str, str]) -> tuple[AwsTarget, WatchdogConfig]:
    """Everything the watchdog takes from its environment, read here and nowhere else."""
    defaults = WatchdogPolicy()
    policy = WatchdogPolicy(
        stall_s=int(env.get(ENV_STALL, defaults.stall_s)),
        dispatch_grace_s=int(env.get(ENV_DISPATCH_GRACE, defaults.dispatch_grace_s)),
    )
    config = WatchdogConfig(
        work_bucket=env[ENV_WORK_BUCKET], state_machine_arn=env[ENV_STATE_MACHINE], topic_arn=env[ENV_TOPIC],
        policy=policy,
    )  # fmt: skip
    return AwsTarget(region=env[ENV_REGION], endpoint_url=env.get(ENV_ENDPOINT)), config


def backup_settings(env: Mapping[str, str]) -> tuple[dict[str, str], BackupPolicy]:
    """The render queues by priority and the straggler rule (fusionfleet.stragglers)."""
    urls = [url.strip() for url in env.get(ENV_RENDER_QUEUES, "").split(",") if url.strip()]
    queues: dict[str, str] = dict(zip(PRIORITIES, urls, strict=True)) if len(urls) == len(PRIORITIES) else {}
    defaults = BackupPolicy()
    policy = BackupPolicy(
        enabled=env.get(ENV_BACKUPS, "1").lower() not in ("0", "false", "off", "no"),
        factor=float(env.get(ENV_BACKUP_FACTOR, defaults.factor)),
        min_age_s=float(env.get(ENV_BACKUP_MIN_AGE, defaults.min_age_s)),
        done_fraction=float(env.get(ENV_BACKUP_DONE_FRACTION, defaults.done_fraction)),
        last_segments=int(env.get(ENV_BACKUP_LAST_SEGMENTS, defaults.last_segments)),
    )
    return queues, policy


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
    return {
        "closed": [item.job_id for item in closed],
        "backups": [f"{item.job_id}:{item.index}" for item in keeper.backups_sent],
    }
