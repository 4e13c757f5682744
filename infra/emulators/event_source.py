"""Stand-in for Lambda's SQS event source mapping, for LocalStack without Docker.

Polls a queue, hands batches to a handler in the exact event shape Lambda uses, and honours the
handler's partial batch response: reported failures stay on the queue (made visible again after
`--retry-delay`), everything else is deleted. Run: python infra/emulators/event_source.py --queue-url URL
--handler functions.slicer.app.handler
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger("event-source")


@dataclass
class LambdaContext:
    """The attributes powertools and handlers read from Lambda's context object."""

    function_name: str
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = ""
    aws_request_id: str = ""
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    deadline_ms: float = 0.0

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int(self.deadline_ms - time.time() * 1000))


def to_event(messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """SQS messages as Lambda receives them from an event source mapping."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {
                    "ApproximateReceiveCount": m.get("Attributes", {}).get("ApproximateReceiveCount", "1"),
                    "SentTimestamp": m.get("Attributes", {}).get("SentTimestamp", "0"),
                    "SenderId": m.get("Attributes", {}).get("SenderId", "local"),
                    "ApproximateFirstReceiveTimestamp": m.get("Attributes", {}).get(
                        "ApproximateFirstReceiveTimestamp", "0"
                    ),
                },
                "messageAttributes": {},
                "md5OfBody": m.get("MD5OfBody") or hashlib.md5(m["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


def failed_ids(response: Any) -> set[str]:
    if not isinstance(response, dict):
        return set()
    return {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queue-url", required=True)
    parser.add_argument("--handler", required=True, help="module.function, e.g. functions.slicer.app.handler")
    parser.add_argument("--name", default="event-source", help="this runner's name in logs and process lists")
    parser.add_argument("--batch-size", type=int, default=5)
    parser.add_argument("--timeout", type=int, default=120, help="the function's timeout in seconds")
    parser.add_argument("--retry-delay", type=int, default=5, help="seconds before a failed record is retried")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    module_name, _, function_name = args.handler.rpartition(".")
    handler = getattr(importlib.import_module(module_name), function_name)
    # After the path is set: run as a script, the project is importable only from here on.
    from fusionfleet.adapters.aws import AwsTarget
    from fusionfleet.environment.aws import AwsEnvironment
    from fusionfleet.environment.contract import from_env

    aws = from_env(AwsEnvironment, os.environ)
    # Lambda's event source polls with the function's role: these calls are recorded as that role.
    sqs = AwsTarget(aws.region, aws.endpoint_url).client("sqs")
    # The quick retry of a failed record is this stand-in's own (Lambda waits out the visibility
    # timeout instead): not a call the function's role makes on AWS, so not recorded.
    retry = AwsTarget(aws.region, aws.endpoint_url, record_calls=False).client("sqs")
    queue_arn = sqs.get_queue_attributes(QueueUrl=args.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    stopping = False

    def stop(number: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        logger.info("%s received, stopping after this batch", signal.Signals(number).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    logger.info("%s polling %s for %s", args.name, args.queue_url, args.handler)
    while not stopping:
        messages = sqs.receive_message(
            QueueUrl=args.queue_url,
            MaxNumberOfMessages=args.batch_size,
            WaitTimeSeconds=2,
            VisibilityTimeout=args.timeout,
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            continue
        context = LambdaContext(
            function_name="slicer",
            invoked_function_arn=queue_arn.replace(":sqs:", ":lambda:"),
            aws_request_id=str(uuid.uuid4()),
            deadline_ms=time.time() * 1000 + args.timeout * 1000,
        )
        try:
            failures = failed_ids(handler(to_event(messages, queue_arn, aws.region), context))
        except Exception:
            # A handler that raises fails the whole batch, as in Lambda.
            logger.exception("handler raised; the whole batch will be retried")
            failures = {m["MessageId"] for m in messages}
        for message in messages:
            if message["MessageId"] in failures:
                retry.change_message_visibility(
                    QueueUrl=args.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=args.retry_delay
                )
            else:
                sqs.delete_message(QueueUrl=args.queue_url, ReceiptHandle=message["ReceiptHandle"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
