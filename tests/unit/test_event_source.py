from __future__ import annotations

from infra.emulators.event_source import failed_ids, to_event


def test_messages_take_lambdas_sqs_event_shape() -> None:
    event = to_event(
        [{"MessageId": "m1", "ReceiptHandle": "r1", "Body": "{}", "Attributes": {"ApproximateReceiveCount": "2"}}],
        "arn:aws:sqs:us-east-1:000000000000:ingest",
        "us-east-1",
    )
    (record,) = event["Records"]
    assert record["messageId"] == "m1" and record["receiptHandle"] == "r1" and record["body"] == "{}"
    assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"].endswith(":ingest")
    assert record["attributes"]["ApproximateReceiveCount"] == "2"
    assert record["md5OfBody"] == "99914b932bd37a50b983c5e7c90ae93b"


def test_partial_batch_failures_are_honoured() -> None:
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "m2"}]}) == {"m2"}
    assert failed_ids({"batchItemFailures": []}) == set()
    assert failed_ids(None) == set()
