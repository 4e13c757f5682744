"""An SQS FIFO queue as an ordered, de-duplicated outbox: messages of one group are handed out one at
a time, in the order they were sent, and the same deduplication id within five minutes is one message."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_ID_CHARS = 128  # SQS's limit for group and deduplication ids


class OrderedQueue(Protocol):
    def send_ordered(self, queue_url: str, body: str, group: str, dedup: str) -> None: ...


def fifo_id(text: str) -> str:
    """`text` when SQS takes it as a group or deduplication id, else a digest of it (same text, same id)."""
    if len(text) <= MAX_ID_CHARS and all(33 <= ord(ch) < 127 for ch in text):
        return text
    return hashlib.sha256(text.encode()).hexdigest()


class SqsOrderedQueue:
    def __init__(self, client: SQSClient) -> None:
        self._sqs = client

    def send_ordered(self, queue_url: str, body: str, group: str, dedup: str) -> None:
        self._sqs.send_message(
            QueueUrl=queue_url, MessageBody=body, MessageGroupId=fifo_id(group), MessageDeduplicationId=fifo_id(dedup)
        )
