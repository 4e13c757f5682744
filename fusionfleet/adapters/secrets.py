"""Secrets: a small protocol and its AWS Secrets Manager adapter (LocalStack's, on the local stack)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


class SecretStore(Protocol):
    def get(self, name: str) -> str | None:
        """The secret's current value, or None when there is no such secret."""
        ...

    def create(self, name: str, value: str, description: str) -> bool:
        """Create the secret; False when one of that name exists already (the caller reads it)."""
        ...


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code"))


class SecretsManagerStore:
    def __init__(self, client: SecretsManagerClient) -> None:
        self._client = client

    def get(self, name: str) -> str | None:
        try:
            return str(self._client.get_secret_value(SecretId=name)["SecretString"])
        except ClientError as error:
            if _code(error) == "ResourceNotFoundException":
                return None
            raise

    def create(self, name: str, value: str, description: str) -> bool:
        try:
            self._client.create_secret(Name=name, SecretString=value, Description=description)
        except ClientError as error:
            if _code(error) in ("ResourceExistsException", "InvalidRequestException"):
                # InvalidRequest: a secret of that name is scheduled for deletion; reading says so.
                return False
            raise
        return True
