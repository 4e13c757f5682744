"""Where AWS is: the region and, for LocalStack, the endpoint. Every process reads these two."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment.contract import variable

ENV_REGION = "AWS_REGION"
ENV_ENDPOINT = "AWS_ENDPOINT_URL"


@dataclass(frozen=True)
class AwsEnvironment:
    region: str = variable(ENV_REGION)
    endpoint_url: str | None = variable(ENV_ENDPOINT, None)
