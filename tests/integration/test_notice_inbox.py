"""A client's wait queue against moto: it receives its own job's notice only, and leaves nothing behind."""

from __future__ import annotations

from fleetctl.notices import SqsNoticeInbox
from fusionfleet.adapters.notify import SnsNotifier
from tests.integration.conftest import Aws


def test_the_inbox_gets_its_jobs_notice_only_and_close_removes_queue_and_subscription(aws: Aws) -> None:
    # GIVEN an inbox for job clip-1, opened on the stack's topic
    queues_before = set(aws.sqs.list_queues().get("QueueUrls", []))
    inbox = SqsNoticeInbox.open(aws.sqs, aws.sns, aws.topic_arn, "clip-1")
    notifier = SnsNotifier(aws.sns)
    # WHEN another job's notice and then its own are published
    notifier.publish(aws.topic_arn, "s", {"status": "succeeded", "job_id": "clip-2"})
    notifier.publish(aws.topic_arn, "s", {"status": "succeeded", "job_id": "clip-1", "stage": "done"})
    # THEN it receives its own notice, parsed, and nothing more
    notice = inbox.next_notice(1)
    assert notice is not None and notice["job_id"] == "clip-1" and notice["stage"] == "done"
    assert inbox.next_notice(0) is None
    # AND closing it removes its queue and its subscription
    inbox.close()
    assert set(aws.sqs.list_queues().get("QueueUrls", [])) == queues_before
    endpoints = [s["Endpoint"] for s in aws.sns.list_subscriptions_by_topic(TopicArn=aws.topic_arn)["Subscriptions"]]
    assert not any("fusionfleet-wait-" in endpoint for endpoint in endpoints)
