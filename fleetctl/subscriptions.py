"""Subscribe one tenant to the job notices: an SNS subscription whose filter policy passes only its own.

Every notice carries a `tenant` message attribute (fusionfleet.adapters.notify), so one topic serves every
tenant; a subscription made here receives only the notices of the tenant it names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fusionfleet.adapters.notify import tenant_filter_policy
from fusionfleet.errors import FusionFleetError
from fusionfleet.fleet.tenants import NO_TENANT, check_tenant_name

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient

# How an endpoint is given on the command line → the SNS protocol that delivers to it.
PROTOCOLS = {"email": "email", "queue_arn": "sqs", "url": "https"}


@dataclass(frozen=True)
class Subscription:
    tenant: str
    protocol: str
    endpoint: str
    arn: str  # e-mail and HTTPS subscriptions deliver once their owner confirms them


def check_tenant(tenant: str) -> str:
    """A tenant name, or "-" (the single-tenant jobs/ drops); otherwise an error saying what a name may be."""
    return tenant if tenant == NO_TENANT else check_tenant_name(tenant)


def subscription_request(topic_arn: str, tenant: str, protocol: str, endpoint: str) -> dict[str, object]:
    """The SNS Subscribe call's arguments: the endpoint, filtered to `tenant`'s notices."""
    if protocol not in PROTOCOLS.values():
        raise FusionFleetError(f"unknown protocol {protocol!r}: one of {', '.join(sorted(PROTOCOLS.values()))}")
    if protocol == "https" and not endpoint.startswith("https://"):
        raise FusionFleetError(f"{endpoint!r} is not an https:// URL")
    if protocol == "sqs" and not endpoint.startswith("arn:"):
        raise FusionFleetError(f"{endpoint!r} is not a queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME)")
    return {
        "TopicArn": topic_arn,
        "Protocol": protocol,
        "Endpoint": endpoint,
        "Attributes": {
            "FilterPolicy": json.dumps(tenant_filter_policy(check_tenant(tenant))),
            "FilterPolicyScope": "MessageAttributes",
        },
        "ReturnSubscriptionArn": True,
    }


def subscribe(sns: SNSClient, topic_arn: str, tenant: str, protocol: str, endpoint: str) -> Subscription:
    request = subscription_request(topic_arn, tenant, protocol, endpoint)
    response = sns.subscribe(**request)  # type: ignore[arg-type]
    return Subscription(tenant, protocol, endpoint, str(response.get("SubscriptionArn", "")))
