"""Dead-letter Lambda: render and merge DLQ messages → fail their task tokens with the reason."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.parser.models import SqsRecordModel

from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.dead_letters import DeadLetterEnvironment
from fusionfleet.services.deadletter import fail_dead_letter

logger = Logger(service="fusionfleet-dead-letters")
processor = BatchProcessor(event_type=EventType.SQS, model=SqsRecordModel)


def settings(env: Mapping[str, str]) -> AwsTarget:
    """Everything the dead-letter handler takes from its environment, read here and nowhere else."""
    read = from_env(DeadLetterEnvironment, env)
    return AwsTarget(region=read.region, endpoint_url=read.endpoint_url)


@cache
def clients() -> tuple[S3Storage, StepFunctions]:
    aws = settings(os.environ)
    return S3Storage(aws.client("s3")), StepFunctions(aws.client("stepfunctions"))


def record_handler(record: SqsRecordModel) -> None:
    storage, orchestrator = clients()
    attempts = int(record.attributes.ApproximateReceiveCount)
    outcome = fail_dead_letter(str(record.body), attempts, storage, orchestrator)
    if outcome is not None:
        logger.append_keys(job_id=outcome.job_id)
        logger.warning("dead letter handled", what=outcome.what, reason=outcome.reason, closed=outcome.already_closed)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return dict(
        process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    )
