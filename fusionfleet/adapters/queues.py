"""Work queues: a small protocol and its SQS adapter."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class QueueMessage:
    queue_url: str
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    sent_at: float = 0.0  # epoch seconds, from SQS
    received_at: float = 0.0


@dataclass(frozen=True)
class QueueDepth:
    visible: int
    in_flight: int
    delayed: int = 0

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed


class ReceiptExpired(Exception):
    """The message's receipt handle no longer works (it was redelivered or deleted)."""


class WorkQueue(Protocol):
    def receive(
        self, queue_url: str, wait_s: int, visibility_s: int, max_messages: int = ...
    ) -> list[QueueMessage]: ...
    def delete(self, message: QueueMessage) -> None: ...
    def change_visibility(self, message: QueueMessage, seconds: int) -> None: ...
    def send(self, queue_url: str, body: str) -> str: ...
    def depth(self, queue_url: str) -> QueueDepth: ...
    def max_receive_count(self, queue_url: str) -> int | None: ...


class SqsQueue:
    def __init__(self, client: SQSClient) -> None:
        self._sqs = client

    def receive(self, queue_url: str, wait_s: int, visibility_s: int, max_messages: int = 1) -> list[QueueMessage]:
        response = self._sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=max_messages,
            WaitTimeSeconds=wait_s,
            VisibilityTimeout=visibility_s,
            MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
        )
        now = time.time()
        return [
            QueueMessage(
                queue_url=queue_url,
                message_id=item["MessageId"],
                receipt_handle=item["ReceiptHandle"],
                body=item["Body"],
                receive_count=int(item.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
                sent_at=int(item.get("Attributes", {}).get("SentTimestamp", "0")) / 1000,
                received_at=now,
            )
            for item in response.get("Messages", [])
        ]

    def delete(self, message: QueueMessage) -> None:
        try:
            self._sqs.delete_message(QueueUrl=message.queue_url, ReceiptHandle=message.receipt_handle)
        except ClientError as error:
            if _receipt_gone(error):
                raise ReceiptExpired(message.message_id) from error
            raise

    def change_visibility(self, message: QueueMessage, seconds: int) -> None:
        try:
            self._sqs.change_message_visibility(
                QueueUrl=message.queue_url, ReceiptHandle=message.receipt_handle, VisibilityTimeout=seconds
            )
        except ClientError as error:
            if _receipt_gone(error):
                raise ReceiptExpired(message.message_id) from error
            raise

    def send(self, queue_url: str, body: str) -> str:
        return self._sqs.send_message(QueueUrl=queue_url, MessageBody=body)["MessageId"]

    def depth(self, queue_url: str) -> QueueDepth:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return QueueDepth(
            visible=int(attributes.get("ApproximateNumberOfMessages", 0)),
            in_flight=int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
            delayed=int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
        )

    def max_receive_count(self, queue_url: str) -> int | None:
        """The queue's redrive maxReceiveCount: the attempts a message gets before its DLQ."""
        attributes = self._sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"])
        return _redrive_max(attributes.get("Attributes", {}).get("RedrivePolicy"))


def _redrive_max(policy: str | None) -> int | None:
    return int(json.loads(policy)["maxReceiveCount"]) if policy else None


def _receipt_gone(error: ClientError) -> bool:
    code = str(error.response.get("Error", {}).get("Code", ""))
    return code in {
        "ReceiptHandleIsInvalid",
        "InvalidParameterValue",
        "AWS.SimpleQueueService.NonExistentQueue",
    } or ("receipt" in code.lower())
