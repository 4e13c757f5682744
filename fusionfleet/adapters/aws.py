"""boto3 clients for one explicit endpoint and region: real AWS, or LocalStack on loopback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from fusionfleet.adapters.call_recording import process_recorder

LOCAL_ACCESS_KEY = "test"  # LocalStack accepts any credentials; these keep boto3 from searching.


@dataclass(frozen=True)
class AwsTarget:
    region: str
    endpoint_url: str | None = None
    # False for the local stand-ins of AWS services (the autoscaler, the event source's retry delay):
    # on AWS a service makes those calls, not a role of the stack, so the IAM judge has none to hold
    # them to. Recording happens only where the process's environment asks for it (call_recording.py).
    record_calls: bool = True
    # A named profile of the AWS config files (the CLI's --profile); None: boto3's own search.
    profile: str | None = None

    @property
    def is_local(self) -> bool:
        return self.endpoint_url is not None

    def client(self, service: str, session: boto3.session.Session | None = None, **config: Any) -> Any:
        """A client with the project's settings; `session` supplies other credentials (tests)."""
        if service == "s3":
            # botocore presigns S3 URLs with SigV2 unless told otherwise (seen with this pin); AWS
            # refuses SigV2 on buckets created since mid-2020, so a notice's link would not open.
            config.setdefault("signature_version", "s3v4")
        options: dict[str, Any] = {
            "region_name": self.region,
            "config": Config(
                retries={"max_attempts": 5, "mode": "standard"},
                s3={"addressing_style": "path"} if self.is_local else {},
                **config,
            ),
        }
        if self.endpoint_url:
            options["endpoint_url"] = self.endpoint_url
            options["aws_access_key_id"] = LOCAL_ACCESS_KEY
            options["aws_secret_access_key"] = LOCAL_ACCESS_KEY
        client = (session or boto3.session.Session(profile_name=self.profile)).client(service, **options)  # type: ignore[call-overload]
        recorder = process_recorder() if self.record_calls else None
        if recorder is not None:
            recorder.attach(client)
        return client
