"""The dead-letter handler's environment: only where AWS is (the Lambda; the local stack's runners)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment.contract import variable

ENV_REGION = "AWS_REGION"
ENV_ENDPOINT = "AWS_ENDPOINT_URL"


@dataclass(frozen=True)
class DeadLetterEnvironment:
    region: str = variable(ENV_REGION)
    endpoint_url: str | None = variable(ENV_ENDPOINT, None)
