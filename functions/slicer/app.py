"""Slicer Lambda: S3 manifest events from the ingest queue → fusionfleet.slicing → one execution per job."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from functions.slicer.models import IngestRecord, S3TestEvent
from fusionfleet.aws import AwsTarget
from fusionfleet.notify import SnsNotifier
from fusionfleet.orchestrator import StepFunctions
from fusionfleet.slicing import Slicer, SlicerConfig
from fusionfleet.storage import S3Storage
from fusionfleet.timeouts import TimeoutPolicy

logger = Logger(service="fusionfleet-slicer")
processor = BatchProcessor(event_type=EventType.SQS, model=IngestRecord)


@cache
def slicer() -> Slicer:
    aws = AwsTarget(region=os.environ["AWS_REGION"], endpoint_url=os.environ.get("AWS_ENDPOINT_URL"))
    config = SlicerConfig(
        work_bucket=os.environ["WORK_BUCKET"],
        state_machine_arn=os.environ["STATE_MACHINE_ARN"],
        topic_arn=os.environ["NOTIFICATION_TOPIC_ARN"],
        default_engine=os.environ.get("DEFAULT_ENGINE", "classic"),
        timeouts=TimeoutPolicy(
            visibility_s=int(os.environ.get("RENDER_VISIBILITY_SECONDS", "120")),
            max_attempts=int(os.environ.get("RENDER_MAX_ATTEMPTS", "3")),
            accepted_backlog_s=int(os.environ.get("ACCEPTED_BACKLOG_SECONDS", "21600")),
        ),
        render_concurrency=int(os.environ.get("RENDER_CONCURRENCY", "1000")),
        encoder_threads=int(os.environ.get("ENCODER_THREADS", "2")),
    )
    return Slicer(
        S3Storage(aws.client("s3")),
        StepFunctions(aws.client("stepfunctions")),
        SnsNotifier(aws.client("sns")),
        config,
    )


def record_handler(record: IngestRecord) -> None:
    if isinstance(record.body, S3TestEvent):
        logger.info("ignoring the S3 test event")
        return
    for event in record.body.Records:
        outcome = slicer().handle(event.s3.bucket.name, event.s3.object.decoded_key)
        logger.append_keys(job_id=outcome.job_id)
        logger.info("manifest handled", status=outcome.status, reason=outcome.reason, execution=outcome.execution_arn)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return dict(
        process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    )
