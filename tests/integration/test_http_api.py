"""The HTTP API with real tokens: the local gateway's JWT checks in front of the API handler, over moto.

Keys are generated here (RSA and EC); tokens are signed with PyJWT exactly as an identity provider
signs them. Each request goes through `LocalApi.respond`: the authorizer, the payload 2.0 event, the
handler's routes and `TenantJobs`, with S3 and Step Functions from moto.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from xml.etree import ElementTree

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from fleetctl.local.tokens import mint
from functions.api.app import tenant_jobs
from functions.api.routes import respond
from fusionfleet.environment.api import ApiEnvironment
from infra.emulators.api_gateway import Answer, LocalApi
from infra.emulators.jwt_authorizer import JwtAuthorizer
from tests.integration.conftest import Aws
from tests.support import cfn
from tests.support.jobs import api_config

ISSUER = "https://issuer.example/"
AUDIENCE = "fusionfleet-api"


def _pem(key: Any) -> bytes:
    return bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))  # fmt: skip


def _public_pem(key: Any) -> bytes:
    return bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


@dataclass
class Api:
    api: LocalApi
    aws: Aws
    private_pem: bytes
    public_pem: bytes

    def token(self, tenant: str | None = "acme", **overrides: Any) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
        if tenant is not None:
            claims["tenant"] = tenant
        claims.update(overrides)
        return jwt.encode(claims, self.private_pem, algorithm="ES256")

    def call(self, method: str, path: str, body: Any = None, token: str | None = None, **headers: str) -> Answer:
        sent = dict(headers)
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        raw = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.api.respond(method, path, sent, raw)

    def as_tenant(self, tenant: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        answer = self.call(method, path, body, self.token(tenant))
        return answer.status, json.loads(answer.body)


@pytest.fixture
def api(aws: Aws) -> Iterator[Api]:
    key = ec.generate_private_key(ec.SECP256R1())
    jobs = tenant_jobs(api_config(aws.media_bucket, aws.work_bucket, aws.state_machine_arn, aws.topic_arn))
    authorizer = JwtAuthorizer(_public_pem(key), ISSUER, AUDIENCE)
    yield Api(LocalApi(authorizer, lambda event, _context: respond(event, jobs)), aws, _pem(key), _public_pem(key))


BODY = {"source": ["face.png"], "target": "clip.mp4", "priority": "high", "engine": "copy"}


def _challenge(answer: Answer) -> str:
    return dict(answer.headers).get("WWW-Authenticate", "")


# --- authentication ----------------------------------------------------------------------------------


def test_a_valid_token_reaches_the_api(api: Api) -> None:
    # GIVEN a token from the trusted issuer, for the API's audience WHEN it lists jobs THEN it is served
    answer = api.call("GET", "/jobs", token=api.token())
    assert answer.status == 200
    assert json.loads(answer.body)["jobs"] == []


def test_a_request_without_a_token_is_401_with_a_challenge(api: Api) -> None:
    answer = api.call("GET", "/jobs")
    assert answer.status == 401
    assert _challenge(answer) == 'Bearer realm="fusionfleet"'


@pytest.mark.parametrize("header", ["Basic YWxhZGRpbjpvcGVuc2VzYW1l", "Bearer", "Bearer not-a-jwt", "Token abc"])
def test_a_malformed_authorization_header_is_401(api: Api, header: str) -> None:
    answer = api.api.respond("GET", "/jobs", {"Authorization": header}, b"")
    assert answer.status == 401
    assert 'error="invalid_token"' in _challenge(answer)


def test_an_expired_token_is_401(api: Api) -> None:
    # GIVEN a token that expired a minute ago
    token = api.token(exp=int(time.time()) - 60, iat=int(time.time()) - 660)
    answer = api.call("GET", "/jobs", token=token)
    # THEN it is refused, and the challenge says why
    assert answer.status == 401
    assert "expired" in _challenge(answer)


def test_a_token_for_another_audience_is_401(api: Api) -> None:
    answer = api.call("GET", "/jobs", token=api.token(aud="some-other-api"))
    assert answer.status == 401
    assert "audience" in _challenge(answer)


def test_a_token_from_another_issuer_is_401(api: Api) -> None:
    answer = api.call("GET", "/jobs", token=api.token(iss="https://evil.example/"))
    assert answer.status == 401
    assert "issuer" in _challenge(answer)


def test_a_tampered_token_is_401(api: Api) -> None:
    # GIVEN a valid token whose payload is changed to another tenant after signing
    header, _payload, signature = api.token("acme").split(".")
    forged = jwt.utils.base64url_encode(
        json.dumps({"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 600, "tenant": "globex"}).encode()
    ).decode()
    answer = api.call("GET", "/jobs", token=f"{header}.{forged}.{signature}")
    # THEN the signature does not verify
    assert answer.status == 401
    assert "signature" in _challenge(answer)


def test_tokens_signed_by_another_key_or_with_no_or_a_shared_key_algorithm_are_401(api: Api) -> None:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "exp": now + 600, "tenant": "acme"}
    stranger = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    unsigned = jwt.encode(claims, "", algorithm="none")
    # the public key used as an HMAC secret: the classic algorithm-confusion forgery
    # (built by hand: PyJWT itself refuses to sign with a PEM key as an HMAC secret)
    signing_input = b".".join(
        jwt.utils.base64url_encode(json.dumps(part).encode()) for part in ({"alg": "HS256", "typ": "JWT"}, claims)
    )
    mac = hmac.new(api.public_pem, signing_input, hashlib.sha256).digest()
    confused = (signing_input + b"." + jwt.utils.base64url_encode(mac)).decode()
    for token in (jwt.encode(claims, stranger, algorithm="RS256"), unsigned, confused):
        assert api.call("GET", "/jobs", token=token).status == 401


def test_an_rs256_token_of_the_trusted_key_is_accepted(aws: Aws) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    authorizer = JwtAuthorizer(_public_pem(key), ISSUER, AUDIENCE)
    claims = authorizer.claims({"authorization": "Bearer " + jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60, "tenant": "acme"}, _pem(key), algorithm="RS256"
    )})  # fmt: skip
    assert claims["tenant"] == "acme"


def test_the_local_stacks_own_tokens_are_accepted(api: Api) -> None:
    # GIVEN a token made as `fusionfleet local token` makes it, with this API's issuer and audience
    token = mint(api.private_pem, "acme", ttl_s=60, issuer=ISSUER, audience=AUDIENCE)
    assert api.call("GET", "/jobs", token=token).status == 200


def test_a_token_without_a_tenant_claim_is_403(api: Api) -> None:
    for token in (api.token(None), api.token("Not A Tenant!")):
        answer = api.call("GET", "/jobs", token=token)
        assert answer.status == 403
        assert "tenant" in json.loads(answer.body)["error"]


# --- jobs ------------------------------------------------------------------------------------------


def test_creating_a_job_hands_out_upload_urls_for_the_tenants_own_keys(api: Api) -> None:
    status, created = api.as_tenant("acme", "POST", "/jobs", BODY)
    assert status == 201
    job_id = created["job_id"]
    assert [u["name"] for u in created["uploads"]] == ["face.png", "clip.mp4"]
    assert created["max_upload_bytes"] == ApiEnvironment.max_upload_mib * 1024 * 1024
    for upload in created["uploads"]:
        # each form writes exactly the tenant's key for this job, and its policy expires within minutes
        key = f"tenants/acme/inputs/{job_id}/{upload['name']}"
        assert upload["key"] == upload["fields"]["key"] == key
        policy = _policy(upload["fields"])
        assert {"key": key} in policy["conditions"]
        expiry = datetime.fromisoformat(policy["expiration"].replace("Z", "+00:00"))
        assert 0 < (expiry - datetime.now(UTC)).total_seconds() <= 900
    # AND nothing is triggered yet: no manifest was written
    assert api.aws.s3.list_objects_v2(Bucket="media", Prefix="tenants/acme/jobs/").get("KeyCount") == 0


def _policy(fields: dict[str, str]) -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(base64.b64decode(fields["policy"]))
    return policy


def _rule(rule_id: str) -> dict[str, Any]:
    rules = cfn.properties(cfn.source(), "MediaBucket")["LifecycleConfiguration"]["Rules"]
    return next(rule for rule in rules if rule["Id"] == rule_id)


def test_every_upload_form_requires_the_tag_the_templates_expiry_rule_matches(api: Api) -> None:
    # GIVEN the template's rule that expires tenants' uploads (prefixes take no wildcards: a tag)
    rule = _rule("expire-tagged-inputs")
    wanted = {item["Key"]: item["Value"] for item in rule["TagFilters"]}
    assert rule["ExpirationInDays"] == {"Ref": "FaceRetentionDays"}
    # WHEN a job is created
    _status, created = api.as_tenant("acme", "POST", "/jobs", BODY)
    for upload in created["uploads"]:
        # THEN the form sends exactly the rule's tags, and its signed policy requires them
        tagging = ElementTree.fromstring(upload["fields"]["tagging"])
        sent = {tag.findtext("Key"): tag.findtext("Value") for tag in tagging.iter("Tag")}
        assert sent == wanted
        assert {"tagging": upload["fields"]["tagging"]} in _policy(upload["fields"])["conditions"]


def test_every_upload_form_signs_the_size_limit(aws: Aws) -> None:
    # GIVEN an API whose limit is 3 MiB
    jobs = tenant_jobs(api_config(aws.media_bucket, aws.work_bucket, aws.state_machine_arn, aws.topic_arn,
                                  max_upload_mib=3))  # fmt: skip
    created = jobs.create("acme", json.dumps(BODY).encode())
    # THEN the answer states the limit and each form's policy refuses anything larger
    assert created.max_upload_bytes == 3 * 1024 * 1024
    for upload in created.uploads:
        assert ["content-length-range", 0, 3 * 1024 * 1024] in _policy(upload.fields)["conditions"]


def test_a_declared_size_over_the_limit_is_400_naming_the_file_and_the_limit(api: Api) -> None:
    limit = ApiEnvironment.max_upload_mib * 1024 * 1024
    body = {**BODY, "sizes": {"face.png": 1000, "clip.mp4": limit + 1}}
    status, answer = api.as_tenant("acme", "POST", "/jobs", body)
    assert status == 400
    assert any(
        "clip.mp4" in problem and f"{ApiEnvironment.max_upload_mib} MiB" in problem for problem in answer["problems"]
    ), answer
    assert not any("face.png" in problem for problem in answer["problems"])
    # AND no job record was kept for it
    assert api.aws.s3.list_objects_v2(Bucket="work", Prefix="work/_api/").get("KeyCount") == 0
    # AND sizes within the limit make a job as before
    status, created = api.as_tenant("acme", "POST", "/jobs", {**BODY, "sizes": {"face.png": 1000, "clip.mp4": limit}})
    assert status == 201, created


def test_a_body_naming_another_tenants_key_is_400(api: Api) -> None:
    body = {**BODY, "target": "tenants/globex/inputs/board-meeting.mp4"}
    status, answer = api.as_tenant("acme", "POST", "/jobs", body)
    assert status == 400
    assert any(
        "target" in problem and "tenants/globex/inputs/board-meeting.mp4" in problem and "outside" in problem
        for problem in answer["problems"]
    ), answer
    # AND no job record was kept for it
    assert api.aws.s3.list_objects_v2(Bucket="work", Prefix="work/_api/").get("KeyCount") == 0


def test_a_bad_body_is_400_listing_every_problem(api: Api) -> None:
    body = {"source": [], "target": "clip.mp4", "priority": "urgent", "engine": "magic", "colour": "blue",
            "options": {"no_such_option": 1}}  # fmt: skip
    status, answer = api.as_tenant("acme", "POST", "/jobs", body)
    assert status == 400
    problems = " | ".join(answer["problems"])
    for field in ("source", "priority", "engine", "colour", "no_such_option"):
        assert field in problems, problems


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_400(api: Api, raw: bytes) -> None:
    answer = api.call("POST", "/jobs", raw, api.token())
    assert answer.status == 400
    assert json.loads(answer.body)["problems"]


def _uploaded(api: Api, created: dict[str, Any]) -> None:
    # Sources are known by their first bytes at start (a face image here); the rest is the slicer's to judge.
    for upload in created["uploads"]:
        head = b"\x89PNG\r\n\x1a\n" if upload["name"] == "face.png" else b""
        api.aws.s3.put_object(Bucket="media", Key=upload["key"], Body=head + b"bytes of " + upload["name"].encode())


def test_start_writes_the_manifest_once_the_files_are_there(api: Api) -> None:
    _status, created = api.as_tenant("acme", "POST", "/jobs", BODY)
    job_id = created["job_id"]
    # WHEN it is started before the files are uploaded THEN 409 names what is missing
    status, answer = api.as_tenant("acme", "POST", f"/jobs/{job_id}/start")
    assert status == 409
    assert "face.png" in answer["error"] and "clip.mp4" in answer["error"]
    # WHEN the files are there THEN start writes the manifest under the tenant's jobs/ prefix
    _uploaded(api, created)
    status, answer = api.as_tenant("acme", "POST", f"/jobs/{job_id}/start")
    assert (status, answer["state"]) == (202, "PENDING")
    manifest = json.loads(api.aws.s3.get_object(Bucket="media", Key=f"tenants/acme/jobs/{job_id}.json")["Body"].read())
    assert manifest["source"] == [f"tenants/acme/inputs/{job_id}/face.png"]
    assert manifest["target"] == f"tenants/acme/inputs/{job_id}/clip.mp4"
    assert (manifest["priority"], manifest["engine"]) == ("high", "copy")
    # AND a second start is refused, not a second job
    assert api.as_tenant("acme", "POST", f"/jobs/{job_id}/start")[0] == 409
    # AND until the slicer takes it the job is PENDING
    status, answer = api.as_tenant("acme", "GET", f"/jobs/{job_id}")
    assert (status, answer["state"], answer["segments"]) == (200, "PENDING", {"done": 0, "failed": 0, "total": 0})


def test_a_body_with_targets_is_a_batch_with_an_upload_per_target(api: Api) -> None:
    body = {"source": "face.png", "targets": ["a.jpg", "b.webp", "tenants/acme/inputs/old/"], "engine": "copy"}
    status, created = api.as_tenant("acme", "POST", "/jobs", body)
    assert status == 201, created
    job_id = created["job_id"]
    # THEN each plain name is an upload of this job, the prefix the tenant's own folder as named
    assert sorted(upload["name"] for upload in created["uploads"]) == ["a.jpg", "b.webp", "face.png"]
    _uploaded(api, created)
    status, answer = api.as_tenant("acme", "POST", f"/jobs/{job_id}/start")
    assert (status, answer["state"]) == (202, "PENDING")
    manifest = json.loads(api.aws.s3.get_object(Bucket="media", Key=f"tenants/acme/jobs/{job_id}.json")["Body"].read())
    inputs = f"tenants/acme/inputs/{job_id}/"
    assert manifest["targets"] == [f"{inputs}a.jpg", f"{inputs}b.webp", "tenants/acme/inputs/old/"]
    # AND until the slicer opens the batch it reads PENDING
    status, answer = api.as_tenant("acme", "GET", f"/jobs/{job_id}")
    assert (status, answer["job_id"], answer["state"]) == (200, job_id, "PENDING")
    # AND another tenant's folder is refused as a target, naming it
    status, answer = api.as_tenant("acme", "POST", "/jobs", {**body, "targets": ["tenants/globex/inputs/x/"]})
    assert status == 400 and any("targets[0]" in problem for problem in answer["problems"]), answer


def test_another_tenants_job_is_404_everywhere(api: Api) -> None:
    _status, created = api.as_tenant("acme", "POST", "/jobs", BODY)
    job_id = created["job_id"]
    _uploaded(api, created)
    api.as_tenant("acme", "POST", f"/jobs/{job_id}/start")
    for method, path in (("GET", f"/jobs/{job_id}"), ("POST", f"/jobs/{job_id}/start"),
                         ("POST", f"/jobs/{job_id}/cancel"), ("POST", f"/jobs/{job_id}/retry"),
                         ("GET", f"/jobs/{job_id}/detail"), ("GET", f"/jobs/{job_id}/logs"),
                         ("GET", f"/jobs/{job_id}/preview")):  # fmt: skip
        status, answer = api.as_tenant("globex", method, path)
        assert status == 404, (method, path, answer)
    # AND acme reads its own job's detail (PENDING until the slicer takes it)
    status, detail = api.as_tenant("acme", "GET", f"/jobs/{job_id}/detail")
    assert (status, detail["job"]["job_id"], detail["job"]["state"]) == (200, job_id, "PENDING")
    # AND an id that never existed reads the same
    assert api.as_tenant("acme", "GET", "/jobs/20260101-000000-00000000")[0] == 404


def test_listing_shows_only_the_callers_jobs(api: Api) -> None:
    mine = [api.as_tenant("acme", "POST", "/jobs", BODY)[1]["job_id"] for _ in range(2)]
    theirs = api.as_tenant("globex", "POST", "/jobs", BODY)[1]["job_id"]
    status, answer = api.as_tenant("acme", "GET", "/jobs")
    assert status == 200
    assert sorted(job["job_id"] for job in answer["jobs"]) == sorted(mine)
    assert [job["job_id"] for job in api.as_tenant("globex", "GET", "/jobs")[1]["jobs"]] == [theirs]


def test_cancelling_a_job_that_has_not_started_is_409(api: Api) -> None:
    job_id = api.as_tenant("acme", "POST", "/jobs", BODY)[1]["job_id"]
    status, answer = api.as_tenant("acme", "POST", f"/jobs/{job_id}/cancel")
    assert status == 409
    assert "not been started" in answer["error"]


def test_unknown_routes_and_methods(api: Api) -> None:
    assert api.as_tenant("acme", "GET", "/nothing")[0] == 404
    answer = api.call("DELETE", "/jobs", token=api.token())
    assert answer.status == 405
    assert dict(answer.headers)["Allow"] == "GET, POST"
    assert api.as_tenant("acme", "GET", "/jobs?limit=0")[0] == 400
