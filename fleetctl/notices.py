"""A client's own inbox for one job's final notice: an SQS queue subscribed to the stack's topic.

`submit --wait` learns that a job ended from its notice, long-polled, rather than by asking S3 and
Step Functions every second: the end is seen as soon as it is published, and the wait costs the
stack a request every few seconds (for the progress line) instead of several a second. The queue
takes only this job's notices (a filter policy on the notice's `job_id` attribute, see
fusionfleet.adapters.notify) and is removed when the wait ends.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

logger = logging.getLogger(__name__)

# A client that dies mid-wait leaves its queue behind: its messages expire within minutes.
RETENTION_S = 900
LONG_POLL_MAX_S = 20  # SQS's longest receive wait


class NoticeInbox(Protocol):
    def next_notice(self, wait_s: float) -> dict[str, Any] | None:
        """The next notice, waiting at most `wait_s` (None: none came)."""
        ...

    def close(self) -> None: ...


def inbox_policy(queue_arn: str, topic_arn: str) -> dict[str, Any]:
    """The queue policy that lets the topic, and only it, deliver to the queue. Pure."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sns.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
            }
        ],
    }


def job_filter_policy(job_id: str) -> dict[str, list[str]]:
    """Only this job's notices reach the inbox. Pure."""
    return {"job_id": [job_id]}


def notice_of(body: str) -> dict[str, Any]:
    """The notice inside an SNS → SQS delivery (the SNS envelope's `Message`). Pure."""
    envelope = json.loads(body)
    notice = json.loads(envelope["Message"]) if isinstance(envelope, dict) and "Message" in envelope else envelope
    if not isinstance(notice, dict):
        raise ValueError("a notice is a JSON object")
    return notice


class SqsNoticeInbox:
    """A queue of its own, subscribed to the topic for one job's notices; `close` removes both."""

    def __init__(self, sqs: SQSClient, sns: SNSClient, queue_url: str, subscription_arn: str) -> None:
        self._sqs = sqs
        self._sns = sns
        self._queue_url = queue_url
        self._subscription_arn = subscription_arn

    @classmethod
    def open(cls, sqs: SQSClient, sns: SNSClient, topic_arn: str, job_id: str) -> SqsNoticeInbox:
        url = sqs.create_queue(
            QueueName=f"fusionfleet-wait-{secrets.token_hex(8)}",
            Attributes={"MessageRetentionPeriod": str(RETENTION_S)},
        )["QueueUrl"]
        try:
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(inbox_policy(arn, topic_arn))})
            subscription = sns.subscribe(
                TopicArn=topic_arn,
                Protocol="sqs",
                Endpoint=arn,
                Attributes={
                    "FilterPolicy": json.dumps(job_filter_policy(job_id)),
                    "FilterPolicyScope": "MessageAttributes",
                },
                ReturnSubscriptionArn=True,
            )["SubscriptionArn"]
        except BaseException:
            sqs.delete_queue(QueueUrl=url)
            raise
        return cls(sqs, sns, url, subscription)

    def next_notice(self, wait_s: float) -> dict[str, Any] | None:
        wait = max(0, min(LONG_POLL_MAX_S, round(wait_s)))
        messages = self._sqs.receive_message(QueueUrl=self._queue_url, WaitTimeSeconds=wait).get("Messages", [])
        for message in messages:
            self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"])
            try:
                return notice_of(message["Body"])
            except (ValueError, KeyError, TypeError):
                logger.warning("ignoring a message that is not a notice in the wait queue")
        return None

    def close(self) -> None:
        # Best effort: the wait's answer is already known, and a queue left behind expires its messages.
        try:
            self._sns.unsubscribe(SubscriptionArn=self._subscription_arn)
        except (BotoCoreError, ClientError) as error:
            logger.warning("could not remove the wait queue's subscription: %s", error)
        try:
            self._sqs.delete_queue(QueueUrl=self._queue_url)
        except (BotoCoreError, ClientError) as error:
            logger.warning("could not remove the wait queue %s: %s", self._queue_url, error)
