"""Which AWS (or LocalStack) and which stack the client talks to.

Precedence: command-line flag > environment variable > a running local stack's state file > AWS.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fleetctl.local.paths import ENV_LOCAL_DIR
from fleetctl.local.state import LocalState
from fleetctl.stack import StackResources, load_stack
from fusionfleet.aws import AwsTarget

ENV_ENDPOINT = "FUSIONFLEET_ENDPOINT_URL"
ENV_STACK = "FUSIONFLEET_STACK"
ENV_REGION = "AWS_REGION"
DEFAULT_STACK = "fusionfleet"


@dataclass(frozen=True)
class Connection:
    aws: AwsTarget
    stack_name: str

    def resources(self) -> StackResources:
        return load_stack(self.aws.client("cloudformation"), self.stack_name)


def _local_state(state_dir: Path | None) -> LocalState | None:
    candidates = [state_dir] if state_dir else []
    if os.environ.get(ENV_LOCAL_DIR):
        candidates.append(Path(os.environ[ENV_LOCAL_DIR]))
    try:
        from fleetctl.local.paths import LocalPaths

        candidates.append(LocalPaths.discover().state_dir)
    except FileNotFoundError:
        pass
    for directory in candidates:
        state = LocalState.load(directory / "state.json")
        if state is not None:
            return state
    return None


def resolve(
    endpoint_url: str | None = None,
    region: str | None = None,
    stack: str | None = None,
    state_dir: Path | None = None,
) -> Connection:
    endpoint = endpoint_url or os.environ.get(ENV_ENDPOINT)
    stack_name = stack or os.environ.get(ENV_STACK)
    chosen_region = region or os.environ.get(ENV_REGION) or os.environ.get("AWS_DEFAULT_REGION")
    if endpoint is None:
        local = _local_state(state_dir)
        if local is not None:
            endpoint = local.endpoint
            stack_name = stack_name or local.stack
            chosen_region = chosen_region or local.region
    if not chosen_region:
        raise SystemExit(f"no AWS region: pass --region or set {ENV_REGION}")
    return Connection(AwsTarget(region=chosen_region, endpoint_url=endpoint), stack_name or DEFAULT_STACK)
