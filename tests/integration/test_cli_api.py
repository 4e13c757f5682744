"""The CLI's job commands through the tenant HTTP API (`--api`, `--token`): the real API handler behind the
local gateway's JWT checks, served over HTTP on loopback, over moto.

The browser-style form uploads go to S3 directly (a presigned POST moto cannot receive over HTTP): they
are put with boto3 here; the end-to-end tests post them for real (tests/e2e/test_http_api.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fleetctl import api_client, api_commands
from fleetctl.cli import main
from fleetctl.exits import Exit
from functions.api.app import tenant_jobs
from functions.api.routes import respond
from fusionfleet.environment.settings import FUSIONFLEET_API_URL, FUSIONFLEET_TOKEN
from infra.emulators.api_gateway import ApiServer, LocalApi
from infra.emulators.jwt_authorizer import JwtAuthorizer
from tests.integration.conftest import Aws
from tests.support.jobs import api_config

ISSUER = "https://issuer.example/"
AUDIENCE = "fusionfleet-api"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


class Served:
    def __init__(self, url: str, key: Any) -> None:
        self.url = url
        self._key = key

    def token(self, tenant: str = "acme") -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, "tenant": tenant}
        pem = self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return jwt.encode(claims, pem, algorithm="ES256")


@pytest.fixture
def served(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    jobs = tenant_jobs(api_config(aws.media_bucket, aws.work_bucket, aws.state_machine_arn, aws.topic_arn))
    server = ApiServer(LocalApi(JwtAuthorizer(public, ISSUER, AUDIENCE), lambda event, _c: respond(event, jobs)))
    server.start_in_thread()

    def put(_url: str, fields: dict[str, str], path: Path, _max: int, _timeout: float) -> None:
        aws.s3.put_object(Bucket=aws.media_bucket, Key=fields["key"], Body=path.read_bytes())

    monkeypatch.setattr(api_client, "post_form", put)
    for name in (FUSIONFLEET_API_URL, FUSIONFLEET_TOKEN):
        monkeypatch.delenv(name, raising=False)
    try:
        yield Served(server.url, key)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def media(tmp_path: Path) -> tuple[Path, Path]:
    face, target = tmp_path / "face.png", tmp_path / "still.png"
    face.write_bytes(PNG)
    target.write_bytes(PNG)
    return face, target


def _cli(served: Served, *argv: str, token: str | None = None) -> int:
    return main([*argv, "--api", served.url, "--token", token or served.token()])


def _submitted(served: Served, media: tuple[Path, Path], capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    face, target = media
    assert _cli(served, "submit", "-s", str(face), "-t", str(target), "--engine", "copy", *extra) == Exit.DONE
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_status_list_and_logs_follow_a_tenants_job_through_the_api(
    served: Served, media: tuple[Path, Path], aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a job a tenant submitted through the API (not yet taken by the slicer)
    job_id = _submitted(served, media, capsys, "--name", "talk")
    # WHEN it asks for its status THEN the API's view is rendered: PENDING, exit 0
    assert _cli(served, "status", job_id) == Exit.DONE
    shown = capsys.readouterr().out
    assert f"job       {job_id}" in shown and "state     PENDING" in shown
    # AND --json prints the API's own answer, one document
    assert _cli(served, "status", job_id, "--json") == Exit.DONE
    answer = json.loads(capsys.readouterr().out)
    assert (answer["job_id"], answer["state"], answer["ended"]) == (job_id, "PENDING", False)
    # AND list shows it, as a table and as GET /jobs's shape
    assert _cli(served, "list") == Exit.DONE
    assert job_id in capsys.readouterr().out
    assert _cli(served, "list", "--json", "--state", "PENDING") == Exit.DONE
    assert [job["job_id"] for job in json.loads(capsys.readouterr().out)["jobs"]] == [job_id]
    # AND logs answers with no attempts yet; --json as GET /jobs/{id}/logs
    assert _cli(served, "logs", job_id, "--json") == Exit.DONE
    assert json.loads(capsys.readouterr().out)["attempts"] == []
    # AND the output is named as the bucket path names it (--name, the target's kind)
    manifest = json.loads(
        aws.s3.get_object(Bucket=aws.media_bucket, Key=f"tenants/acme/jobs/{job_id}.json")["Body"].read()
    )
    assert manifest["output"] == f"tenants/acme/outputs/{job_id}/talk.png"


def test_wait_download_and_cancel_through_the_api_say_what_they_can(
    served: Served, media: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _submitted(served, media, capsys)
    # WHEN it waits no time THEN it gives up (4) and the job goes on
    assert _cli(served, "wait", job_id, "--timeout", "0") == Exit.GAVE_UP
    assert "gave up waiting: still PENDING" in capsys.readouterr().err
    # WHEN it asks for the result of a job under way THEN there is nothing to download (1)
    assert _cli(served, "download", job_id) == Exit.FAILED
    assert "nothing to download yet" in capsys.readouterr().err
    # WHEN it cancels a job the slicer has not taken THEN the API's refusal is said (1)
    assert _cli(served, "cancel", job_id) == Exit.FAILED
    assert "has not started running yet" in capsys.readouterr().err


def test_another_tenants_job_is_unknown_and_tenant_must_match_the_token(
    served: Served, media: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _submitted(served, media, capsys)
    # WHEN another tenant's token asks for it THEN it is not found (1)
    assert _cli(served, "status", job_id, token=served.token("globex")) == Exit.FAILED
    assert "no job" in capsys.readouterr().err
    # WHEN --tenant names another tenant than the token THEN it is refused with the reason (2)
    assert _cli(served, "status", job_id, "--tenant", "globex") == Exit.USAGE
    assert "this token is tenant acme's" in capsys.readouterr().err
    # AND naming the token's own tenant is fine
    assert _cli(served, "status", job_id, "--tenant", "acme") == Exit.DONE


def test_a_batch_goes_through_the_api(
    served: Served, media: tuple[Path, Path], tmp_path: Path, aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    face, first = media
    second = tmp_path / "other.png"
    second.write_bytes(PNG)
    # WHEN a tenant submits two targets through the API THEN it is one batch of the API
    code = _cli(served, "submit", "-s", str(face), "-t", str(first), "-t", str(second), "--engine", "copy")
    assert code == Exit.DONE
    batch = capsys.readouterr().out.strip().splitlines()[-1]
    manifest = json.loads(
        aws.s3.get_object(Bucket=aws.media_bucket, Key=f"tenants/acme/jobs/{batch}.json")["Body"].read()
    )
    assert [key.rsplit("/", 1)[-1] for key in manifest["targets"]] == ["still.png", "other.png"]
    # AND its status reads as a batch of two items
    assert _cli(served, "status", batch, "--json") == Exit.DONE
    answer = json.loads(capsys.readouterr().out)
    assert (answer["kind"], answer["state"], answer["targets"]) == ("batch", "PENDING", ["still.png", "other.png"])


def test_a_download_through_the_api_takes_the_outputs_own_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a succeeded job whose link names its output (as the bucket path's key does)
    fetched: list[Path] = []

    def fetch(_url: str, path: Path) -> Path:
        fetched.append(path)
        return path

    monkeypatch.setattr(api_commands, "download", fetch)
    job = {"job_id": "j", "state": "SUCCEEDED", "ended": True,
           "download_url": "http://s3.example/media/tenants/acme/outputs/j/talk-1.mp4?X-Amz-Signature=abc"}  # fmt: skip
    # WHEN it is downloaded with no -o THEN it lands under that name in --output-dir
    assert api_commands.fetch(None, job, None, tmp_path, None) == Exit.DONE
    assert fetched == [tmp_path / "talk-1.mp4"]


def test_a_token_names_its_tenant() -> None:
    token = jwt.encode({"tenant": "acme"}, "k" * 32, algorithm="HS256")
    assert api_commands.token_tenant(token) == "acme"
    assert api_commands.token_tenant("not-a-jwt") is None
