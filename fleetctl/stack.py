"""The deployed stack's resources, found through its CloudFormation outputs (same on AWS and LocalStack)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from fusionfleet.errors import FusionFleetError
from fusionfleet.jobs.manifest import PRIORITIES

PRIORITY_ORDER = PRIORITIES


@dataclass(frozen=True)
class StackResources:
    stage: str
    media_bucket: str
    work_bucket: str
    ingest_queue_url: str
    ingest_dlq_url: str
    render_queue_urls: tuple[str, str, str]
    render_dlq_url: str
    merge_queue_url: str
    merge_dlq_url: str
    topic_arn: str
    state_machine_arn: str
    # The job events' queues (webhooks FIFO, the topic's notices); "" for a stack deployed before them.
    webhook_queue_url: str = ""
    webhook_dlq_url: str = ""
    notice_follow_queue_url: str = ""

    @classmethod
    def from_outputs(cls, outputs: dict[str, str]) -> StackResources:
        try:
            return cls(
                stage=outputs["Stage"],
                media_bucket=outputs["MediaBucketName"],
                work_bucket=outputs["WorkBucketName"],
                ingest_queue_url=outputs["IngestQueueUrl"],
                ingest_dlq_url=outputs["IngestDeadLetterQueueUrl"],
                render_queue_urls=(
                    outputs["RenderQueueHighUrl"],
                    outputs["RenderQueueNormalUrl"],
                    outputs["RenderQueueLowUrl"],
                ),
                render_dlq_url=outputs["RenderDeadLetterQueueUrl"],
                merge_queue_url=outputs["MergeQueueUrl"],
                merge_dlq_url=outputs["MergeDeadLetterQueueUrl"],
                topic_arn=outputs["NotificationTopicArn"],
                state_machine_arn=outputs["StateMachineArn"],
                webhook_queue_url=outputs.get("WebhookQueueUrl", ""),
                webhook_dlq_url=outputs.get("WebhookDeadLetterQueueUrl", ""),
                notice_follow_queue_url=outputs.get("NoticeFollowQueueUrl", ""),
            )
        except KeyError as missing:
            raise FusionFleetError(f"the stack has no output {missing}: is it a FusionFleet stack?") from None

    def queues(self) -> dict[str, str]:
        """Every queue by a short name, for status displays."""
        return {
            "ingest": self.ingest_queue_url,
            **{f"render-{name}": url for name, url in zip(PRIORITY_ORDER, self.render_queue_urls, strict=True)},
            "merge": self.merge_queue_url,
            "ingest-dlq": self.ingest_dlq_url,
            "render-dlq": self.render_dlq_url,
            "merge-dlq": self.merge_dlq_url,
            **({"webhooks": self.webhook_queue_url} if self.webhook_queue_url else {}),
            **({"notices": self.notice_follow_queue_url} if self.notice_follow_queue_url else {}),
            **({"webhooks-dlq": self.webhook_dlq_url} if self.webhook_dlq_url else {}),
        }


def stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        raise FusionFleetError(f"stack {stack_name!r} not found: {error}") from error
    return {item["OutputKey"]: item["OutputValue"] for item in stacks[0].get("Outputs", [])}


def load_stack(cloudformation: Any, stack_name: str) -> StackResources:
    return StackResources.from_outputs(stack_outputs(cloudformation, stack_name))
