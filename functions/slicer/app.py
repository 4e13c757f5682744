"""Slicer Lambda: S3 manifest events from the ingest queue → fusionfleet.services.slicing → one execution per job."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from functions.slicer.models import IngestRecord, S3TestEvent
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.ordered_queue import SqsOrderedQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.fleet.quotas import GpuCapacity, GpuFleet, ServiceQuotasCapacity
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.fleet.wake import EcsServiceWaker, FleetWaker, WakePolicy
from fusionfleet.jobs.manifest import KeyPolicy
from fusionfleet.jobs.timeouts import TimeoutPolicy
from fusionfleet.services.slicing import Slicer, SlicerConfig
from fusionfleet.webhooks.addresses import AddressPolicy
from fusionfleet.webhooks.outbox import WebhookOutbox

logger = Logger(service="fusionfleet-slicer")
processor = BatchProcessor(event_type=EventType.SQS, model=IngestRecord)


def settings(env: Mapping[str, str]) -> tuple[AwsTarget, SlicerConfig]:
    """Everything the slicer takes from its environment (fusionfleet.environment.slicer), read here and nowhere else."""
    read = from_env(SlicerEnvironment, env)
    aws = AwsTarget(region=read.region, endpoint_url=read.endpoint_url)
    config = SlicerConfig(
        work_bucket=read.work_bucket,
        state_machine_arn=read.state_machine_arn,
        topic_arn=read.topic_arn,
        default_engine=read.default_engine,
        timeouts=TimeoutPolicy(
            visibility_s=read.visibility_s,
            max_attempts=read.max_attempts,
            accepted_backlog_s=read.accepted_backlog_s,
        ),
        render_concurrency=read.render_concurrency,
        max_running_jobs=read.max_running_jobs,
        tenants=TenantLimits(max_running_jobs=read.tenant_max_running_jobs, max_segments=read.tenant_max_segments),
        encoder_threads=read.encoder_threads,
        gpu_fleet=GpuFleet(read.gpu_instance_types, read.gpu_on_demand_percentage) if read.gpu_instance_types else None,
        gpu_quota_cache_s=read.gpu_quota_cache_s,
        fleet_max_workers=read.fleet_max_workers,
        keys=KeyPolicy(webhooks=AddressPolicy(read.webhook_allow_loopback, not read.webhook_allow_loopback)),
    )
    return aws, config


@cache
def slicer() -> Slicer:
    aws, config = settings(os.environ)
    capacity: GpuCapacity | None = None
    if config.gpu_fleet is not None:
        capacity = ServiceQuotasCapacity(
            aws.client("service-quotas"), aws.client("ec2"), config.gpu_fleet, aws.region, config.gpu_quota_cache_s
        )
    storage = S3Storage(aws.client("s3"))
    queue_url = from_env(SlicerEnvironment, os.environ).webhook_queue_url
    outbox = None
    if queue_url:
        outbox = WebhookOutbox(SqsOrderedQueue(aws.client("sqs")), queue_url, storage, config.work_bucket)
    return Slicer(
        storage,
        StepFunctions(aws.client("stepfunctions")),
        SnsNotifier(aws.client("sns")),
        config,
        capacity,
        _waker(aws, os.environ, config.fleet_max_workers),
        outbox,
    )


def _waker(aws: AwsTarget, env: Mapping[str, str], max_tasks: int) -> FleetWaker | None:
    read = from_env(SlicerEnvironment, env)
    if not read.render_service or max_tasks < 1:
        return None
    policy = WakePolicy(max_tasks, read.render_backlog_per_task)
    return EcsServiceWaker(aws.client("ecs"), read.render_cluster, read.render_service, policy)


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
