"""Slicer Lambda: S3 manifest events from the ingest queue → fusionfleet.slicing → one execution per job."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from functions.slicer.models import IngestRecord, S3TestEvent
from fusionfleet.aws import AwsTarget
from fusionfleet.capacity import GpuCapacity, GpuFleet, ServiceQuotasCapacity
from fusionfleet.notify import SnsNotifier
from fusionfleet.orchestrator import StepFunctions
from fusionfleet.slicing import Slicer, SlicerConfig
from fusionfleet.storage import S3Storage
from fusionfleet.tenants import TenantLimits
from fusionfleet.timeouts import TimeoutPolicy
from fusionfleet.wake import EcsServiceWaker, FleetWaker, WakePolicy

logger = Logger(service="fusionfleet-slicer")
processor = BatchProcessor(event_type=EventType.SQS, model=IngestRecord)


ENV_REGION = "AWS_REGION"
ENV_ENDPOINT = "AWS_ENDPOINT_URL"
ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_STATE_MACHINE = "STATE_MACHINE_ARN"
ENV_TOPIC = "NOTIFICATION_TOPIC_ARN"
ENV_DEFAULT_ENGINE = "DEFAULT_ENGINE"
ENV_VISIBILITY = "RENDER_VISIBILITY_SECONDS"
ENV_MAX_ATTEMPTS = "RENDER_MAX_ATTEMPTS"
ENV_BACKLOG = "ACCEPTED_BACKLOG_SECONDS"
ENV_RENDER_CONCURRENCY = "RENDER_CONCURRENCY"
ENV_MAX_RUNNING_JOBS = "MAX_RUNNING_JOBS"
ENV_ENCODER_THREADS = "ENCODER_THREADS"
ENV_TENANT_MAX_RUNNING_JOBS = "TENANT_MAX_RUNNING_JOBS"
ENV_TENANT_MAX_SEGMENTS = "TENANT_MAX_SEGMENTS"
ENV_GPU_INSTANCE_TYPES = "GPU_INSTANCE_TYPES"
ENV_GPU_ON_DEMAND_PERCENTAGE = "GPU_ON_DEMAND_PERCENTAGE"
ENV_GPU_QUOTA_CACHE_SECONDS = "GPU_QUOTA_CACHE_SECONDS"
ENV_FLEET_MAX_WORKERS = "FLEET_MAX_WORKERS"
# The render service the slicer raises for a new job (AWS stages; unset locally).
ENV_RENDER_CLUSTER = "RENDER_CLUSTER"
ENV_RENDER_SERVICE = "RENDER_SERVICE"
ENV_RENDER_BACKLOG_PER_TASK = "RENDER_BACKLOG_PER_TASK"


def settings(env: Mapping[str, str]) -> tuple[AwsTarget, SlicerConfig]:
    """Everything the slicer takes from its environment, read here and nowhere else."""
    aws = AwsTarget(region=env[ENV_REGION], endpoint_url=env.get(ENV_ENDPOINT))
    config = SlicerConfig(
        work_bucket=env[ENV_WORK_BUCKET],
        state_machine_arn=env[ENV_STATE_MACHINE],
        topic_arn=env[ENV_TOPIC],
        default_engine=env.get(ENV_DEFAULT_ENGINE, "classic"),
        timeouts=TimeoutPolicy(
            visibility_s=int(env.get(ENV_VISIBILITY, "120")),
            max_attempts=int(env.get(ENV_MAX_ATTEMPTS, "3")),
            accepted_backlog_s=int(env.get(ENV_BACKLOG, "21600")),
        ),
        render_concurrency=int(env.get(ENV_RENDER_CONCURRENCY, "1000")),
        max_running_jobs=int(env.get(ENV_MAX_RUNNING_JOBS, "0")),
        tenants=TenantLimits(
            max_running_jobs=int(env.get(ENV_TENANT_MAX_RUNNING_JOBS, "0")),
            max_segments=int(env.get(ENV_TENANT_MAX_SEGMENTS, "0")),
        ),
        encoder_threads=int(env.get(ENV_ENCODER_THREADS, "2")),
        gpu_fleet=_gpu_fleet(env),
        gpu_quota_cache_s=int(env.get(ENV_GPU_QUOTA_CACHE_SECONDS, "300")),
        fleet_max_workers=int(env.get(ENV_FLEET_MAX_WORKERS, "0")),
    )
    return aws, config


def _gpu_fleet(env: Mapping[str, str]) -> GpuFleet | None:
    types = tuple(name.strip() for name in env.get(ENV_GPU_INSTANCE_TYPES, "").split(",") if name.strip())
    if not types:
        return None
    return GpuFleet(types, int(env.get(ENV_GPU_ON_DEMAND_PERCENTAGE, "100")))


@cache
def slicer() -> Slicer:
    aws, config = settings(os.environ)
    capacity: GpuCapacity | None = None
    if config.gpu_fleet is not None:
        capacity = ServiceQuotasCapacity(
            aws.client("service-quotas"), aws.client("ec2"), config.gpu_fleet, aws.region, config.gpu_quota_cache_s
        )
    return Slicer(
        S3Storage(aws.client("s3")),
        StepFunctions(aws.client("stepfunctions")),
        SnsNotifier(aws.client("sns")),
        config,
        capacity,
        _waker(aws, os.environ, config.fleet_max_workers),
    )


def _waker(aws: AwsTarget, env: Mapping[str, str], max_tasks: int) -> FleetWaker | None:
    if not env.get(ENV_RENDER_SERVICE) or max_tasks < 1:
        return None
    policy = WakePolicy(max_tasks, float(env.get(ENV_RENDER_BACKLOG_PER_TASK, "2")))
    return EcsServiceWaker(aws.client("ecs"), env[ENV_RENDER_CLUSTER], env[ENV_RENDER_SERVICE], policy)


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
