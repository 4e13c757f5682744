"""Job-events Lambda: two SQS sources, one function.

- the webhook queue (FIFO, one message group per job) → fusionfleet.services.webhooks: one signed POST
  per event; a failed attempt keeps its message invisible for the retry's pause, and the job's later
  events in the batch go back at once (their group stays blocked behind the failed one, so order holds);
- the notices queue (the notification topic's subscription) → fusionfleet.services.job_end: a job's
  final webhook event, its tenant's bill settled, the tenant's next waiting job started.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, SqsFifoPartialProcessor
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.ordered_queue import SqsOrderedQueue
from fusionfleet.adapters.queues import QueueMessage, SqsQueue, WorkQueue
from fusionfleet.adapters.secrets import SecretsManagerStore
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.adapters.webhook_http import PinnedSender, resolve_host
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.job_events import JobEventsEnvironment
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.cost import GpuPrices
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.services.job_end import JobEnded
from fusionfleet.services.webhooks import WebhookConfig, WebhookDeliverer
from fusionfleet.webhooks.addresses import AddressPolicy
from fusionfleet.webhooks.events import WebhookEvent
from fusionfleet.webhooks.outbox import WebhookOutbox
from fusionfleet.webhooks.retry import DEFAULT_DELAYS_S, WebhookRetryPolicy
from fusionfleet.webhooks.secrets import TenantSecrets

logger = Logger(service="fusionfleet-job-events")
FIFO_SUFFIX = ".fifo"
MAX_SETTLE_ROUNDS = 3  # a notice is followed again at most this often for attempts still stopping
# A webhook batch stops this long before the function's own timeout (its records, S3 writes and the
# answer to Lambda), and starts no attempt with less than MIN_ATTEMPT_S left: the rest go back to the queue.
# A batch that timed out came back whole, and receivers got its delivered events again.
DEADLINE_MARGIN_S = 10.0
MIN_ATTEMPT_S = 2.0


def settings(env: Mapping[str, str]) -> tuple[AwsTarget, JobEventsEnvironment, WebhookConfig]:
    """Everything the function takes from its environment (fusionfleet.environment.job_events), read here only."""
    read = from_env(JobEventsEnvironment, env)
    delays = tuple(int(delay) for delay in read.retry_delays_s) if read.retry_delays_s else DEFAULT_DELAYS_S
    config = WebhookConfig(
        work_bucket=read.work_bucket,
        addresses=AddressPolicy(allow_loopback=read.allow_loopback, require_https=not read.allow_loopback),
        retry=WebhookRetryPolicy(delays_s=delays, timeout_s=read.timeout_s),
        progress_every_s=read.progress_every_s,
    )
    return AwsTarget(region=read.region, endpoint_url=read.endpoint_url), read, config


@cache
def parts() -> tuple[WebhookDeliverer, JobEnded, SqsQueue, str]:
    aws, read, config = settings(os.environ)
    storage = S3Storage(aws.client("s3"))
    queue = SqsQueue(aws.client("sqs"))
    secrets = TenantSecrets(SecretsManagerStore(aws.client("secretsmanager")), read.secret_prefix)
    deliverer = WebhookDeliverer(storage, secrets, PinnedSender(), resolve_host, config)
    outbox = WebhookOutbox(SqsOrderedQueue(aws.client("sqs")), read.webhook_queue_url, storage, read.work_bucket)
    admission = AdmissionConfig(
        read.work_bucket, read.state_machine_arn, max_running_jobs=read.max_running_jobs,
        stack_limits=TenantLimits(read.tenant_max_running_jobs, read.tenant_max_segments),
    )  # fmt: skip
    admitter = Admitter(storage, StepFunctions(aws.client("stepfunctions")), admission, outbox)
    prices = GpuPrices(read.gpu_hourly_price, read.gpu_spot_hourly_price or None)
    return deliverer, JobEnded(storage, read.work_bucket, outbox, admitter, prices), queue, read.webhook_queue_url


class HandBack(Exception):
    """The record stays on the queue (a batch item failure), its visibility already set by the handler."""


def _processed(
    processor: BatchProcessor, records: list[dict[str, Any]], handle: Callable[[SQSRecord], None]
) -> list[str]:
    """Powertools' partial batch processing of `records`; the message ids to leave on the queue. A batch
    whose every record stays is an answer too, not an error of the function (a webhook receiver down)."""
    processor.raise_on_entire_batch_failure = False
    with processor(records=records, handler=handle):
        processor.process()
    return [str(item["itemIdentifier"]) for item in processor.response()["batchItemFailures"]]


def deliver(
    records: list[dict[str, Any]], deliverer: WebhookDeliverer, queue: WorkQueue, queue_url: str,
    time_left_s: Callable[[], float] | None = None,
) -> list[str]:  # fmt: skip
    """One attempt per event, in order, each bounded by what the invocation has left (`time_left_s`);
    the message ids to leave on the queue. Powertools' FIFO processor skips the rest of a job's events
    (its message group) once one stays; they go back at once, behind it, where the group's order holds them."""
    placed: set[str] = set()  # message ids whose visibility the handler set
    out_of_time: list[str] = []

    def handle(record: SQSRecord) -> None:
        budget = None if time_left_s is None else time_left_s() - DEADLINE_MARGIN_S
        if budget is not None and budget < MIN_ATTEMPT_S:
            # Out of time: this and the rest go back now, unsent (FIFO: their groups' order holds).
            out_of_time.append(record.message_id)
            raise HandBack("out of time")
        try:
            event = WebhookEvent.model_validate_json(record.body)
        except ValidationError:
            logger.error("not a webhook event: dropped", body=record.body[:500])
            return
        logger.append_keys(job_id=event.job_id)
        handled = deliverer.handle(event, timeout_s=budget)
        logger.info("webhook event handled", event_id=event.event_id, outcome=handled.outcome, reason=handled.reason)
        if handled.outcome in ("retry", "deferred"):
            queue.change_visibility(_message(record.raw_event, queue_url), handled.delay_s)
            placed.add(record.message_id)
            raise HandBack(handled.outcome)

    kept = _processed(SqsFifoPartialProcessor(skip_group_on_error=True), records, handle)
    if out_of_time:
        logger.warning("webhook batch out of time: events handed back", events=len(out_of_time))
    by_id = {str(record["messageId"]): record for record in records}
    for message_id in kept:
        if message_id not in placed:
            queue.change_visibility(_message(by_id[message_id], queue_url), 0)
    return kept


def _message(record: dict[str, Any], queue_url: str) -> QueueMessage:
    receives = int(record.get("attributes", {}).get("ApproximateReceiveCount", 1))
    return QueueMessage(queue_url, record["messageId"], record["receiptHandle"], record["body"], receives)


def follow(records: list[dict[str, Any]], follower: JobEnded) -> list[str]:
    """Each job's final notice followed; the message ids to retry (a follower that raised, or a notice to
    follow again once the attempts still stopping had time to end)."""

    def handle(record: SQSRecord) -> None:
        try:
            notice = json.loads(record.body)
        except ValueError:
            logger.error("not a notice: dropped", body=record.body[:500])
            return
        try:
            followed = follower.handle(notice if isinstance(notice, dict) else {})
        except Exception:
            logger.exception("following a notice failed; it is retried", job_id=str(notice.get("job_id")))
            raise
        receives = int(record.attributes.approximate_receive_count)
        if followed is not None and followed.unsettled and receives < MAX_SETTLE_ROUNDS:
            # A copy still stopping: followed again once it had time to end (the final event goes once).
            raise HandBack("unsettled")

    return _processed(BatchProcessor(event_type=EventType.SQS), records, handle)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = list(event.get("Records", []))
    by_fifo = [r for r in records if str(r.get("eventSourceARN", "")).endswith(FIFO_SUFFIX)]
    others = [r for r in records if not str(r.get("eventSourceARN", "")).endswith(FIFO_SUFFIX)]
    deliverer, follower, queue, queue_url = parts() if records else (None, None, None, "")
    failures = []
    if by_fifo:
        assert deliverer is not None and queue is not None
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        time_left = (lambda: remaining() / 1000.0) if callable(remaining) else None
        failures += deliver(by_fifo, deliverer, queue, queue_url, time_left)
    if others:
        assert follower is not None
        failures += follow(others, follower)
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}
