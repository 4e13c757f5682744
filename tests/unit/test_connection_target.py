"""Where a command goes (fleetctl.connection): flag > environment > a running local stack > AWS, said outright
with --local/--aws/FUSIONFLEET_TARGET or --profile, and said on stderr where both could be meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl import connection
from fleetctl.cli import build_parser
from fleetctl.connection import ConnectionUnresolved, resolve
from fleetctl.local.paths import LocalPaths
from fleetctl.local.state import LocalState


@pytest.fixture
def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A local stack running from this checkout's default folder, and an environment without AWS."""
    state = tmp_path / "local"
    LocalState(4599, "eu-west-1", "mine").save(state / "state.json")
    monkeypatch.setattr(LocalPaths, "discover", classmethod(lambda cls, *_a, **_k: FoundPaths(state)))
    return {"HOME": str(tmp_path / "home")}


class FoundPaths:  # the one attribute `_local_state` reads of LocalPaths
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir


def test_a_running_local_stack_is_meant_by_default_and_silently_without_aws_credentials(
    running: dict[str, str],
) -> None:
    conn = resolve(env=running)
    assert (conn.aws.endpoint_url, conn.stack_name, conn.aws.region) == ("http://127.0.0.1:4599", "mine", "eu-west-1")
    assert conn.note == ""


def test_with_aws_credentials_too_the_local_stack_is_named_on_one_line(running: dict[str, str]) -> None:
    conn = resolve(env={**running, "AWS_ACCESS_KEY_ID": "AKIA"})
    assert conn.aws.endpoint_url == "http://127.0.0.1:4599"
    assert conn.note.startswith("talking to the local stack at http://127.0.0.1:4599 (stack mine)")
    assert "--aws or FUSIONFLEET_TARGET=aws" in conn.note and "\n" not in conn.note


@pytest.mark.parametrize(
    ("target", "env"), [("aws", {}), (None, {"FUSIONFLEET_TARGET": "aws"})], ids=["flag", "environment"]
)
def test_aws_said_outright_passes_the_local_stack_by(
    running: dict[str, str], target: str | None, env: dict[str, str]
) -> None:
    conn = resolve(region="us-east-1", env={**running, **env, "AWS_ACCESS_KEY_ID": "AKIA"}, target=target)
    assert (conn.aws.endpoint_url, conn.stack_name, conn.note) == (None, "fusionfleet", "")


def test_a_profile_means_aws_and_reaches_boto3(running: dict[str, str]) -> None:
    conn = resolve(region="us-east-1", env=running, profile="prod")
    assert (conn.aws.endpoint_url, conn.aws.profile) == (None, "prod")
    assert conn.note == "talking to AWS with profile prod; a local stack is running too: --local for it"
    with pytest.raises(Exception, match="prod"):  # botocore: the profile is looked up, and not found here
        conn.aws.client("s3")


def test_local_said_outright_needs_a_running_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LocalPaths, "discover", classmethod(lambda cls, *_a, **_k: FoundPaths(tmp_path)))
    with pytest.raises(ConnectionUnresolved, match="no local stack is running"):
        resolve(region="us-east-1", env={}, target="local")


def test_a_target_that_is_neither_is_refused_naming_both(running: dict[str, str]) -> None:
    with pytest.raises(ConnectionUnresolved, match="local or aws"):
        resolve(env={**running, "FUSIONFLEET_TARGET": "cloud"})


def test_an_endpoint_and_a_target_together_are_refused(running: dict[str, str]) -> None:
    with pytest.raises(ConnectionUnresolved, match="leave out --local"):
        resolve("http://127.0.0.1:1", env=running, target="local")


def test_every_stack_command_takes_the_flags_and_says_its_note_once(
    running: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["list", "--aws", "--profile", "p", "--region", "us-east-1"])
    assert (args.where, args.profile) == ("aws", "p")
    args = build_parser().parse_args(["workers"])
    env = {**running, "AWS_PROFILE": "dev"}
    connection.of_args(args, env)
    connection.of_args(args, env)
    assert capsys.readouterr().err.count("talking to the local stack") == 1
