"""Slicer Lambda: S3 manifest events from the ingest queue → fusionfleet.services.slicing → one execution per job;
a batch's events (an item ended, the watchdog's tick) advance the batch."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from functions.slicer.models import BatchMessage, IngestRecord, S3TestEvent
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.ordered_queue import SqsOrderedQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.fleet.quotas import GpuCapacity, ServiceQuotasCapacity
from fusionfleet.fleet.wake import EcsServiceWaker
from fusionfleet.services.slicing import Slicer
from fusionfleet.webhooks.outbox import WebhookOutbox

logger = Logger(service="fusionfleet-slicer")
processor = BatchProcessor(event_type=EventType.SQS, model=IngestRecord)


@cache
def slicer() -> Slicer:
    # Its environment is its configuration (fusionfleet.environment.slicer), read here and nowhere else.
    config = from_env(SlicerEnvironment, os.environ)
    aws = AwsTarget(region=config.region, endpoint_url=config.endpoint_url)
    capacity: GpuCapacity | None = None
    if config.gpu_fleet is not None:
        capacity = ServiceQuotasCapacity(
            aws.client("service-quotas"), aws.client("ec2"), config.gpu_fleet, aws.region, config.gpu_quota_cache_s
        )
    waker = None
    if config.wake is not None:
        waker = EcsServiceWaker(aws.client("ecs"), config.render_cluster, config.render_service, config.wake)
    storage = S3Storage(aws.client("s3"))
    outbox = None
    if config.webhook_queue_url:
        outbox = WebhookOutbox(
            SqsOrderedQueue(aws.client("sqs")), config.webhook_queue_url, storage, config.work_bucket
        )
    return Slicer(
        storage,
        StepFunctions(aws.client("stepfunctions")),
        SnsNotifier(aws.client("sns")),
        config,
        capacity,
        waker,
        outbox,
    )


def record_handler(record: IngestRecord) -> None:
    if isinstance(record.body, S3TestEvent):
        logger.info("ignoring the S3 test event")
        return
    if isinstance(record.body, BatchMessage):
        told = record.body.batch_event
        logger.append_keys(job_id=told.batch_id)
        advanced = slicer().advance(told.batch_id, told.job_id if told.event == "ended" else "")
        logger.info("batch advanced", event=told.event, item=told.job_id, started=list(advanced.started),
                    rejected=list(advanced.rejected), retried=list(advanced.retried), waiting=advanced.waiting,
                    why=advanced.why_waiting, summary=advanced.summary)  # fmt: skip
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
