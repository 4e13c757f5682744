"""Watchdog Lambda (scheduled): end every stuck or silently ended job with exactly one notice."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from fusionfleet.aws import AwsTarget
from fusionfleet.notify import SnsNotifier
from fusionfleet.orchestrator import StepFunctions
from fusionfleet.storage import S3Storage
from fusionfleet.watchdog import Watchdog, WatchdogConfig, WatchdogPolicy

logger = Logger(service="fusionfleet-watchdog")


@cache
def watchdog() -> Watchdog:
    # Cached: a warm Lambda (or the local runner's process) remembers which executions are settled.
    aws = AwsTarget(region=os.environ["AWS_REGION"], endpoint_url=os.environ.get("AWS_ENDPOINT_URL"))
    defaults = WatchdogPolicy()
    policy = WatchdogPolicy(
        stall_s=int(os.environ.get("WATCHDOG_STALL_SECONDS", defaults.stall_s)),
        dispatch_grace_s=int(os.environ.get("WATCHDOG_DISPATCH_GRACE_SECONDS", defaults.dispatch_grace_s)),
    )
    config = WatchdogConfig(
        work_bucket=os.environ["WORK_BUCKET"],
        state_machine_arn=os.environ["STATE_MACHINE_ARN"],
        topic_arn=os.environ["NOTIFICATION_TOPIC_ARN"],
        policy=policy,
    )
    return Watchdog(
        S3Storage(aws.client("s3")), StepFunctions(aws.client("stepfunctions")), SnsNotifier(aws.client("sns")), config
    )


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    closed = watchdog().sweep()
    for item in closed:
        logger.warning("job closed by the watchdog", job_id=item.job_id, action=item.action, reason=item.reason)
    return {"closed": [item.job_id for item in closed]}
