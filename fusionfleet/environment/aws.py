"""Where AWS is: the region and, for LocalStack, the endpoint. Every process reads these two; this class
is the dead-letter handler's whole environment (the table's `dead_letters` component)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment import settings

read = settings.reader(settings.DEAD_LETTERS)


@dataclass(frozen=True)
class AwsEnvironment:
    region: str = read(settings.AWS_REGION)
    endpoint_url: str | None = read(settings.AWS_ENDPOINT_URL)
