"""Parser models for the ingest queue: SQS records whose body is an S3 event notification or a batch's event."""

from __future__ import annotations

from typing import Literal
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from pydantic import BaseModel, Json

from fusionfleet.messages import BatchEvent


class S3ObjectRef(BaseModel):
    key: str
    eTag: str | None = None

    @property
    def decoded_key(self) -> str:
        # Keys arrive URL-encoded in S3 events ("a b+c" comes as "a+b%2Bc").
        return unquote_plus(self.key)


class S3BucketRef(BaseModel):
    name: str


class S3Entity(BaseModel):
    bucket: S3BucketRef
    object: S3ObjectRef


class S3EventRecord(BaseModel):
    eventName: str
    s3: S3Entity


class S3Notification(BaseModel):
    Records: list[S3EventRecord]


class S3TestEvent(BaseModel):
    """Sent once when a bucket's notification configuration is created; carries no object."""

    Event: Literal["s3:TestEvent"]


class BatchMessage(BaseModel):
    """A batch's event (an item ended, the watchdog's tick): fusionfleet.messages.BatchEvent."""

    batch_event: BatchEvent


class IngestRecord(SqsRecordModel):
    body: Json[S3Notification | S3TestEvent | BatchMessage]
