"""Which AWS (or LocalStack) and which stack the client talks to.

Precedence: command-line flag > environment variable > a running local stack's state file > AWS.
The entry point (the CLI, a script) hands in the environment; nothing here reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fleetctl.local.paths import ENV_LOCAL_DIR
from fleetctl.local.state import LocalState
from fleetctl.stack import StackResources, load_stack
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.errors import FusionFleetError

ENV_ENDPOINT = "FUSIONFLEET_ENDPOINT_URL"
ENV_STACK = "FUSIONFLEET_STACK"
ENV_REGION = "AWS_REGION"
ENV_DEFAULT_REGION = "AWS_DEFAULT_REGION"
DEFAULT_STACK = "fusionfleet"


class ConnectionUnresolved(FusionFleetError):
    """Not enough is known to reach a stack (no region); the reason says what to pass or set."""


@dataclass(frozen=True)
class Connection:
    aws: AwsTarget
    stack_name: str

    def resources(self) -> StackResources:
        return load_stack(self.aws.client("cloudformation"), self.stack_name)


def _local_state(state_dir: Path | None, env: Mapping[str, str]) -> LocalState | None:
    candidates = [state_dir] if state_dir else []
    if env.get(ENV_LOCAL_DIR):
        candidates.append(Path(env[ENV_LOCAL_DIR]))
    try:
        from fleetctl.local.paths import LocalPaths

        candidates.append(LocalPaths.discover(env=env).state_dir)
    except FileNotFoundError:
        pass
    for directory in candidates:
        state = LocalState.load(directory / "state.json")
        if state is not None:
            return state
    return None


def local_stack(endpoint_url: str | None, env: Mapping[str, str]) -> LocalState | None:
    """The running local stack's state when the client talks to it (no other endpoint named); else None."""
    local = _local_state(None, env)
    endpoint = endpoint_url or env.get(ENV_ENDPOINT)
    return local if local is not None and endpoint in (None, local.endpoint) else None


def resolve(
    endpoint_url: str | None = None,
    region: str | None = None,
    stack: str | None = None,
    state_dir: Path | None = None,
    *,
    env: Mapping[str, str],
) -> Connection:
    endpoint = endpoint_url or env.get(ENV_ENDPOINT)
    stack_name = stack or env.get(ENV_STACK)
    chosen_region = region or env.get(ENV_REGION) or env.get(ENV_DEFAULT_REGION)
    if endpoint is None:
        local = _local_state(state_dir, env)
        if local is not None:
            endpoint = local.endpoint
            stack_name = stack_name or local.stack
            chosen_region = chosen_region or local.region
    if not chosen_region:
        raise ConnectionUnresolved(f"no AWS region: pass --region or set {ENV_REGION}")
    return Connection(AwsTarget(region=chosen_region, endpoint_url=endpoint), stack_name or DEFAULT_STACK)
