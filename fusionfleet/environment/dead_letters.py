"""The dead-letter handler's environment: only where AWS is (the Lambda; the local stack's runners)."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment.aws import AwsEnvironment


@dataclass(frozen=True)
class DeadLetterEnvironment(AwsEnvironment):
    pass
