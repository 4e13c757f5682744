"""Watchdog Lambda (scheduled): end every stuck or silently ended job with exactly one notice."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from fusionfleet.aws import AwsTarget
from fusionfleet.notify import SnsNotifier
from fusionfleet.orchestrator import StepFunctions
from fusionfleet.storage import S3Storage
from fusionfleet.watchdog import Watchdog, WatchdogConfig, WatchdogPolicy

logger = Logger(service="fusionfleet-watchdog")


ENV_REGION = "AWS_REGION"
ENV_ENDPOINT = "AWS_ENDPOINT_URL"
ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_STATE_MACHINE = "STATE_MACHINE_ARN"
ENV_TOPIC = "NOTIFICATION_TOPIC_ARN"
ENV_STALL = "WATCHDOG_STALL_SECONDS"
ENV_DISPATCH_GRACE = "WATCHDOG_DISPATCH_GRACE_SECONDS"


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


@cache
def watchdog() -> Watchdog:
    # Cached: a warm Lambda (or the local runner's process) remembers which executions are settled.
    aws, config = settings(os.environ)
    return Watchdog(
        S3Storage(aws.client("s3")), StepFunctions(aws.client("stepfunctions")), SnsNotifier(aws.client("sns")), config
    )


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    closed = watchdog().sweep()
    for item in closed:
        logger.warning("job closed by the watchdog", job_id=item.job_id, action=item.action, reason=item.reason)
    return {"closed": [item.job_id for item in closed]}
