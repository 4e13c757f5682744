"""The tenant API acts only on tokens for its audience and of the use it expects (functions/api/claims.py)."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from functions.api.claims import TokenRules, token_problem
from functions.api.routes import respond
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.settings import API_AUDIENCE, API_TOKEN_USE
from fusionfleet.jobs.reader import JobReader
from fusionfleet.json_http import http_event
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_jobs import TenantJobs
from infra.emulators.jwt_authorizer import JwtAuthorizer, Unauthorized
from tests.support.cfn import source
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import MEDIA, WORK, api_config

RULES = TokenRules(audience="client-1", token_use="id")


@pytest.mark.parametrize(
    ("claims", "problem"),
    [
        ({"aud": "client-1", "token_use": "id", "custom:tenant": "acme"}, None),
        # Cognito access tokens carry client_id, not aud
        ({"client_id": "client-1", "token_use": "id"}, None),
        # API Gateway hands a list-valued aud on as "[a b]"
        ({"aud": "[other client-1]", "token_use": "id"}, None),
        ({"aud": "client-2", "token_use": "id"}, "audience"),
        ({"token_use": "id"}, "audience"),
        ({"aud": "client-1", "token_use": "access"}, "token_use"),
        ({"aud": "client-1"}, "token_use"),
    ],
)
def test_a_token_for_another_client_or_of_another_use_is_refused(claims: dict[str, Any], problem: str | None) -> None:
    found = token_problem(claims, RULES)
    assert (found is None) if problem is None else (found is not None and problem in found), found


def test_without_rules_the_authorizers_verdict_stands() -> None:
    assert token_problem({"tenant": "acme"}, TokenRules()) is None


def _jobs() -> TenantJobs:
    storage, orchestrator = FakeStorage(), FakeOrchestrator()
    operations = Operations(storage, orchestrator, FakeNotifier(), api_config(MEDIA, WORK, "machine", "topic"))
    return TenantJobs(storage, JobReader(storage, orchestrator, WORK, "machine"), operations, MEDIA, WORK)


def _event(claims: dict[str, Any]) -> dict[str, Any]:
    return http_event("GET", "/jobs", {}, b"", claims)


def test_the_handler_answers_401_before_reading_the_tenant_of_a_foreign_token() -> None:
    # GIVEN a token API Gateway let through that was issued to another app client
    event = _event({"aud": "client-2", "token_use": "id", "custom:tenant": "acme"})
    # WHEN the handler sees it
    answer = respond(event, _jobs(), "custom:tenant", RULES)
    # THEN it is refused as a bad token, saying why, and no tenant's data is read
    assert answer["statusCode"] == 401
    assert "audience" in json.loads(answer["body"])["error"]
    # AND the right token is served
    ok = respond(
        _event({"aud": "client-1", "token_use": "id", "custom:tenant": "acme"}), _jobs(), "custom:tenant", RULES
    )
    assert ok["statusCode"] == 200, ok


def test_the_rules_come_from_the_environment_the_template_sets() -> None:
    env = {"AWS_REGION": "us-east-1", "MEDIA_BUCKET": "m", "WORK_BUCKET": "w", "STATE_MACHINE_ARN": "s",
           "NOTIFICATION_TOPIC_ARN": "t", API_AUDIENCE: "client-1", API_TOKEN_USE: "id"}  # fmt: skip
    config = from_env(ApiEnvironment, env)
    assert TokenRules(config.audience, config.token_use) == RULES
    variables = source()["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert variables[API_AUDIENCE] == {"Ref": "ApiJwtAudience"}
    assert variables[API_TOKEN_USE] == {"Ref": "ApiTokenUse"}


def _token(key: ec.EllipticCurvePrivateKey, **claims: Any) -> str:
    body = {"iss": "https://issuer/", "aud": "client-1", "exp": time.time() + 60, **claims}
    return jwt.encode(body, key, algorithm="ES256")


def test_the_local_authorizer_checks_token_use_where_configured() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    strict = JwtAuthorizer(public, "https://issuer/", "client-1", token_use="id")
    assert strict.claims({"Authorization": f"Bearer {_token(key, token_use='id')}"})["token_use"] == "id"
    with pytest.raises(Unauthorized, match="'id' token"):
        strict.claims({"Authorization": f"Bearer {_token(key, token_use='access')}"})
    # Not configured (OIDC issuers, the local stack's own tokens): not required
    plain = JwtAuthorizer(public, "https://issuer/", "client-1")
    assert "token_use" not in plain.claims({"Authorization": f"Bearer {_token(key)}"})
