"""boto3 clients for one explicit endpoint and region: real AWS, or LocalStack on loopback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

LOCAL_ACCESS_KEY = "test"  # LocalStack accepts any credentials; these keep boto3 from searching.


@dataclass(frozen=True)
class AwsTarget:
    region: str
    endpoint_url: str | None = None

    @property
    def is_local(self) -> bool:
        return self.endpoint_url is not None

    def client(self, service: str, **config: Any) -> Any:
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
        return boto3.session.Session().client(service, **options)  # type: ignore[call-overload]
