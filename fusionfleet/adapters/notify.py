"""Notifications: a small protocol and its SNS adapter."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs.ids import tenant_of_job
from fusionfleet.jobs.states import NOTICE_SUBJECT_WORDS, NoticeStatus

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient


class Notifier(Protocol):
    def publish(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None: ...


SUBJECT_LIMIT = 100  # SNS refuses longer subjects (LocalStack does not; AWS does)
SUBJECT_PREFIX = "FusionFleet"
# One short word per notice status (fusionfleet.jobs.states), so "FusionFleet <job id> <word>" fits
# with the longest job id (80).
SUBJECT_WORDS = NOTICE_SUBJECT_WORDS


def notice_subject(job_id: str, status: str) -> str:
    """`FusionFleet <job id> done|failed|cancelled`, within SNS's limit whatever the job id.

    The state machine's own subjects (render.asl.json) are written the same way; the job id is also a
    message attribute, so a subject shortened here loses nothing a subscriber filters on.
    """
    word = SUBJECT_WORDS[NoticeStatus(status)] if status in SUBJECT_WORDS else status
    room = SUBJECT_LIMIT - len(SUBJECT_PREFIX) - len(word) - 2
    name = job_id if len(job_id) <= room else job_id[: max(0, room - 3)] + "..."
    return subject_line(f"{SUBJECT_PREFIX} {name} {word}")


def subject_line(text: str) -> str:
    """SNS subjects: printable ASCII, at most 100 characters."""
    clean = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)
    return clean[:SUBJECT_LIMIT]


TENANT_ATTRIBUTE = "tenant"


def notice_attributes(message: dict[str, Any]) -> dict[str, str]:
    """The SNS message attributes of a notice, which subscribers filter on without parsing the body.

    Every notice carries `tenant` (its tenant, or "-" for a single-tenant job): a tenant's subscription
    filters on it, so a notice reaches only its own tenant. Taken from the notice, else from the job id.
    """
    attributes = {name: str(message[name]) for name in ("status", "job_id", "stage") if message.get(name)}
    tenant = message.get(TENANT_ATTRIBUTE) or notice_tenant(tenant_of_job(str(message.get("job_id", ""))))
    attributes[TENANT_ATTRIBUTE] = str(tenant)
    return attributes


def tenant_filter_policy(tenant: str) -> dict[str, list[str]]:
    """The subscription filter policy that lets through only `tenant`'s notices."""
    return {TENANT_ATTRIBUTE: [tenant]}


class SnsNotifier:
    def __init__(self, client: SNSClient) -> None:
        self._sns = client

    def publish(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None:
        # Attributes let subscribers filter (e.g. only failures, only one job) without parsing.
        attributes = {
            name: {"DataType": "String", "StringValue": value} for name, value in notice_attributes(message).items()
        }
        self._sns.publish(
            TopicArn=topic_arn,
            Subject=subject_line(subject),
            Message=json.dumps(message, sort_keys=True, default=str),
            MessageAttributes=attributes,  # type: ignore[arg-type]
        )
