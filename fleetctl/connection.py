"""Which AWS (or LocalStack) and which stack the client talks to.

Precedence: command-line flag > environment variable > a running local stack's state file > AWS. The
target can be said outright: `--local` / `--aws` (or FUSIONFLEET_TARGET=local|aws); `--profile` names
AWS credentials and so means AWS. Where the choice was left to the defaults and the other target was
there too (a running local stack and AWS credentials), `Connection.note` says in one line which one is
meant and how to pick the other; the CLI prints it once.
The entry point (the CLI, a script) hands in the environment; nothing here reads it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fleetctl.local.state import LocalState
from fleetctl.stack import StackResources, load_stack
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.environment.settings import (
    AWS_CONFIG_FILE,
    AWS_DEFAULT_REGION,
    AWS_REGION,
    AWS_SHARED_CREDENTIALS_FILE,
    FUSIONFLEET_ENDPOINT_URL,
    FUSIONFLEET_LOCAL_DIR,
    FUSIONFLEET_STACK,
    FUSIONFLEET_TARGET,
)
from fusionfleet.errors import FusionFleetError

LOCAL, AWS = "local", "aws"
TARGETS = (LOCAL, AWS)
# What says AWS credentials are at hand without asking for them (which may mean a metadata lookup).
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE")
DEFAULT_STACK = "fusionfleet"


class ConnectionUnresolved(FusionFleetError):
    """Not enough is known to reach a stack (no region); the reason says what to pass or set."""


@dataclass(frozen=True)
class Connection:
    aws: AwsTarget
    stack_name: str
    # One line saying which target was meant where both were possible and none was named ("": none).
    note: str = ""

    def resources(self) -> StackResources:
        return load_stack(self.aws.client("cloudformation"), self.stack_name)


def _local_state(state_dir: Path | None, env: Mapping[str, str]) -> LocalState | None:
    candidates = [state_dir] if state_dir else []
    if env.get(FUSIONFLEET_LOCAL_DIR):
        candidates.append(Path(env[FUSIONFLEET_LOCAL_DIR]))
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


def local_stack(
    endpoint_url: str | None, env: Mapping[str, str], target: str | None = None, profile: str | None = None
) -> LocalState | None:
    """The running local stack's state when the client talks to it (no other endpoint, nor AWS, named)."""
    if (_target(target, env) or (AWS if profile else None)) == AWS:
        return None
    local = _local_state(None, env)
    endpoint = endpoint_url or env.get(FUSIONFLEET_ENDPOINT_URL)
    return local if local is not None and endpoint in (None, local.endpoint) else None


def _credentials_at_hand(env: Mapping[str, str]) -> bool:
    if any(env.get(name) for name in CREDENTIAL_VARIABLES):
        return True
    home = Path(env.get("HOME") or Path.home())
    files = (env.get(AWS_SHARED_CREDENTIALS_FILE) or home / ".aws" / "credentials",
             env.get(AWS_CONFIG_FILE) or home / ".aws" / "config")  # fmt: skip
    return any(Path(name).is_file() for name in files)


def _target(target: str | None, env: Mapping[str, str]) -> str | None:
    chosen = target or env.get(FUSIONFLEET_TARGET) or None
    if chosen is not None and chosen not in TARGETS:
        raise ConnectionUnresolved(f"{FUSIONFLEET_TARGET}={chosen!r}: it must be {' or '.join(TARGETS)}")
    return chosen


def resolve(
    endpoint_url: str | None = None,
    region: str | None = None,
    stack: str | None = None,
    state_dir: Path | None = None,
    *,
    env: Mapping[str, str],
    profile: str | None = None,
    target: str | None = None,
) -> Connection:
    named = _target(target, env)
    target = named or (AWS if profile else None)
    if target is not None and endpoint_url:
        raise ConnectionUnresolved(f"--endpoint-url names the endpoint itself: leave out --{target}")
    endpoint = endpoint_url or (env.get(FUSIONFLEET_ENDPOINT_URL) if target is None else None)
    stack_name = stack or env.get(FUSIONFLEET_STACK)
    chosen_region = region or env.get(AWS_REGION) or env.get(AWS_DEFAULT_REGION)
    note = ""
    local = _local_state(state_dir, env) if endpoint is None and target != AWS else None
    if target == LOCAL and local is None:
        raise ConnectionUnresolved("--local: no local stack is running here (`fusionfleet local up` starts one)")
    # The local stack's folder named (flag or environment) is a choice as plain as --local.
    implicit = target is None and state_dir is None and not env.get(FUSIONFLEET_LOCAL_DIR)
    if local is not None:
        endpoint = local.endpoint
        stack_name = stack_name or local.stack
        chosen_region = chosen_region or local.region
        if implicit and _credentials_at_hand(env):
            note = (f"talking to the local stack at {endpoint} (stack {stack_name}); AWS credentials are set too: "
                    f"--aws or {FUSIONFLEET_TARGET}={AWS} for AWS")  # fmt: skip
    elif endpoint is None and named is None and target == AWS and _local_state(state_dir, env) is not None:
        note = f"talking to AWS with profile {profile}; a local stack is running too: --local for it"
    if not chosen_region:
        raise ConnectionUnresolved(f"no AWS region: pass --region or set {AWS_REGION}")
    aws = AwsTarget(region=chosen_region, endpoint_url=endpoint, profile=None if endpoint else profile)
    return Connection(aws, stack_name or DEFAULT_STACK, note)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a command goes: the flags every command that reaches a stack takes."""
    parser.add_argument("--endpoint-url", help=f"AWS endpoint (LocalStack); env {FUSIONFLEET_ENDPOINT_URL}")
    parser.add_argument("--region", help=f"AWS region; env {AWS_REGION}")
    parser.add_argument("--stack", help=f"stack name (default {DEFAULT_STACK}); env {FUSIONFLEET_STACK}")
    parser.add_argument("--profile", help="AWS profile (of ~/.aws/config) for the AWS calls; it means --aws")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--local", dest="where", action="store_const", const=LOCAL,
        help=f"the running local stack (`fusionfleet local up`); env {FUSIONFLEET_TARGET}={LOCAL}",
    )  # fmt: skip
    where.add_argument(
        "--aws", dest="where", action="store_const", const=AWS,
        help=f"AWS, even with a local stack running; env {FUSIONFLEET_TARGET}={AWS}",
    )  # fmt: skip


_told: set[str] = set()


def of_args(args: argparse.Namespace, env: Mapping[str, str]) -> Connection:
    """The connection a command's flags name (with `add_arguments`'), its note said once on stderr."""
    conn = resolve(
        args.endpoint_url, args.region, args.stack, env=env,
        profile=getattr(args, "profile", None), target=getattr(args, "where", None),
    )  # fmt: skip
    if conn.note and conn.note not in _told:
        _told.add(conn.note)
        print(conn.note, file=sys.stderr, flush=True)
    return conn
