"""The SNS adapter and `fusionfleet subscribe` against moto: a tenant's subscriber gets its notices only."""

from __future__ import annotations

import json

from fleetctl.subscriptions import subscribe
from fusionfleet.adapters.notify import SnsNotifier
from tests.integration.conftest import Aws


def inbox(aws: Aws, name: str) -> tuple[str, str]:
    url = aws.sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def job_ids(aws: Aws, url: str) -> list[str]:
    messages = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return sorted(json.loads(json.loads(m["Body"])["Message"])["job_id"] for m in messages)


def test_each_subscriber_gets_only_its_tenants_notices(aws: Aws) -> None:
    # GIVEN subscribers for acme, globex and the single-tenant drops ("-")
    urls = {}
    for tenant in ("acme", "globex", "-"):
        url, arn = inbox(aws, f"inbox-{tenant.strip('-') or 'plain'}")
        subscribe(aws.sns, aws.topic_arn, tenant, "sqs", arn)
        urls[tenant] = url
    notifier = SnsNotifier(aws.sns)
    # WHEN notices of each kind are published: tenant named in the body, only in the job id, and none
    notifier.publish(aws.topic_arn, "s", {"status": "failed", "job_id": "acme_a-1", "tenant": "acme"})
    notifier.publish(aws.topic_arn, "s", {"status": "cancelled", "job_id": "globex_b-2"})
    notifier.publish(aws.topic_arn, "s", {"status": "succeeded", "job_id": "plain-3"})
    # THEN each subscriber received its own and nothing else, and the unfiltered inbox all three
    assert job_ids(aws, urls["acme"]) == ["acme_a-1"]
    assert job_ids(aws, urls["globex"]) == ["globex_b-2"]
    assert job_ids(aws, urls["-"]) == ["plain-3"]
    assert sorted(notice["job_id"] for notice in aws.notifications()) == ["acme_a-1", "globex_b-2", "plain-3"]
