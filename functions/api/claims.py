"""What the handler checks of a verified token before it reads the tenant from it.

API Gateway's JWT authorizer (and infra/emulators/jwt_authorizer.py locally) has checked the signature, the
issuer, the expiry and the audience before the call. The handler checks again what decides whose data a
call touches, so a misconfigured authorizer cannot hand it a token meant for another client:

- the audience: `aud` (ID tokens, OIDC) or `client_id` (Cognito access tokens, which carry no `aud`)
  names this API's audience;
- the token's use: Cognito marks each token `token_use` `id` or `access`. A tenant taken from a Cognito
  custom attribute is only in ID tokens (or in access tokens a pre-token-generation trigger enriched),
  so the stack names the one it expects.

The tenant claim itself must be one the user cannot write: see the Cognito notes in the docs (the
attribute left out of the app client's WriteAttributes, or set by a pre-token-generation trigger).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenRules:
    # "" leaves the check to the authorizer alone (the local stack's tests mint tokens without it).
    audience: str = ""
    token_use: str = ""


def _audiences(claims: Mapping[str, Any]) -> set[str]:
    aud = claims.get("aud")
    # API Gateway hands claims on as strings: a list-valued aud arrives as "[a b]".
    if isinstance(aud, str):
        found = set(aud.strip("[]").split()) if aud.startswith("[") else {aud}
    elif isinstance(aud, list):
        found = {str(a) for a in aud}
    else:
        found = set()
    client = claims.get("client_id")
    return found | ({client} if isinstance(client, str) else set())


def token_problem(claims: Mapping[str, Any], rules: TokenRules) -> str | None:
    """Why this token may not act on tenants' data, or None."""
    if rules.audience and rules.audience not in _audiences(claims):
        return f"the token is not for audience {rules.audience!r}"
    if rules.token_use and claims.get("token_use") != rules.token_use:
        return f"the token is not an {rules.token_use!r} token (token_use {claims.get('token_use')!r})"
    return None
