"""Notifications: a small protocol and its SNS adapter."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient


class Notifier(Protocol):
    def publish(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None: ...


def subject_line(text: str) -> str:
    """SNS subjects: printable ASCII, at most 100 characters."""
    clean = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)
    return clean[:100]


class SnsNotifier:
    def __init__(self, client: SNSClient) -> None:
        self._sns = client

    def publish(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None:
        # Attributes let subscribers filter (e.g. only failures, only one job) without parsing.
        attributes = {
            name: {"DataType": "String", "StringValue": str(message[name])}
            for name in ("status", "job_id", "stage")
            if message.get(name)
        }
        self._sns.publish(
            TopicArn=topic_arn,
            Subject=subject_line(subject),
            Message=json.dumps(message, sort_keys=True, default=str),
            MessageAttributes=attributes,  # type: ignore[arg-type]
        )
