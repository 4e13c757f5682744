"""The local stack's token issuer: a key pair made at `local up`, and tokens the local API accepts.

On AWS an identity provider (Cognito, any OIDC issuer) signs the tokens and API Gateway checks them;
locally `fusionfleet local token` signs them with this private key and the local API gateway
verifies them with the public one. ES256 keys: small, and fast to make.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fusionfleet.environment.api import ApiEnvironment

LOCAL_ISSUER = "https://fusionfleet.local/"
LOCAL_AUDIENCE = "fusionfleet-api"
TENANT_CLAIM = ApiEnvironment.tenant_claim  # the claim the local API reads the tenant from
ALGORITHM = "ES256"
DEFAULT_TTL_S = 3600


@dataclass(frozen=True)
class KeyFiles:
    private: Path
    public: Path

    @classmethod
    def under(cls, state_dir: Path) -> KeyFiles:
        return cls(state_dir / "api-signing-key.pem", state_dir / "api-signing-key.pub.pem")

    def ensure(self) -> KeyFiles:
        """Make the pair once; a running stack keeps its key, so tokens stay valid across `local up`."""
        if self.private.is_file() and self.public.is_file():
            return self
        key = ec.generate_private_key(ec.SECP256R1())
        self.private.parent.mkdir(parents=True, exist_ok=True)
        self.private.touch(mode=0o600)
        self.private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        self.public.write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        return self


def mint(
    private_pem: bytes,
    tenant: str,
    ttl_s: int = DEFAULT_TTL_S,
    issuer: str = LOCAL_ISSUER,
    audience: str = LOCAL_AUDIENCE,
    claim: str = TENANT_CLAIM,
    now: float | None = None,
) -> str:
    issued = int(time.time() if now is None else now)
    claims = {"iss": issuer, "aud": audience, "sub": f"tenant:{tenant}", claim: tenant, "iat": issued,
              "exp": issued + ttl_s}  # fmt: skip
    return jwt.encode(claims, private_pem, algorithm=ALGORITHM)
