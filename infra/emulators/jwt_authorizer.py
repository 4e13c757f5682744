"""Stand-in for API Gateway's JWT authorizer: verify `Authorization: Bearer <JWT>`, hand on its claims.

As API Gateway does, a token is accepted only when it is signed by a trusted key (RS256 or ES256; `none`
and HMAC are refused), unexpired, and names the configured issuer and audience; where configured, also
Cognito's `token_use` (API Gateway leaves that to the handler: functions/api/claims.py). Any failure is
a 401 with a `WWW-Authenticate` header (RFC 6750) saying what was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

ALGORITHMS = ("RS256", "ES256")
REALM = "fusionfleet"


class Unauthorized(Exception):
    """No acceptable token; `challenge` is the WWW-Authenticate value to send with the 401."""

    def __init__(self, description: str, invalid: bool = True) -> None:
        super().__init__(description)
        self.description = description
        # No token at all gets a bare challenge; a bad one says invalid_token (RFC 6750, section 3).
        quoted = description.replace("\\", "").replace('"', "'")
        self.challenge = (
            f'Bearer realm="{REALM}", error="invalid_token", error_description="{quoted}"'
            if invalid
            else f'Bearer realm="{REALM}"'
        )


@dataclass(frozen=True)
class JwtAuthorizer:
    public_key_pem: bytes
    issuer: str
    audience: str
    leeway_s: float = 0.0
    # Cognito's `id` or `access`; None: not checked (OIDC providers do not set it).
    token_use: str | None = None

    @classmethod
    def from_file(cls, path: Path, issuer: str, audience: str) -> JwtAuthorizer:
        return cls(path.read_bytes(), issuer, audience)

    def claims(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """The verified claims of the request's bearer token, or Unauthorized."""
        value = next((v for k, v in headers.items() if k.lower() == "authorization"), "").strip()
        if not value:
            raise Unauthorized("no Authorization header", invalid=False)
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("the Authorization header must be 'Bearer <token>'")
        try:
            claims = dict(
                jwt.decode(
                    token.strip(),
                    self.public_key_pem,
                    algorithms=list(ALGORITHMS),
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=self.leeway_s,
                    options={"require": ["exp", "iss", "aud"]},
                )
            )
        except jwt.ExpiredSignatureError as error:
            raise Unauthorized("the token has expired") from error
        except jwt.InvalidAudienceError as error:
            raise Unauthorized(f"the token is not for audience {self.audience!r}") from error
        except jwt.InvalidIssuerError as error:
            raise Unauthorized(f"the token is not from issuer {self.issuer!r}") from error
        except jwt.InvalidSignatureError as error:
            raise Unauthorized("the token's signature does not verify") from error
        except jwt.InvalidTokenError as error:
            raise Unauthorized(f"the token is not valid: {error}") from error
        except jwt.PyJWTError as error:  # e.g. an RS256 token where the trusted key is an EC key
            raise Unauthorized(f"the token cannot be verified with the trusted key: {error}") from error
        if self.token_use is not None and claims.get("token_use") != self.token_use:
            raise Unauthorized(f"the token is not an {self.token_use!r} token")
        return claims
