"""The local stack's tokens: a key pair made once at `local up`, tokens `local token` prints, and the
local gateway's authorizer accepts them (and nothing signed otherwise)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleetctl.cli import main
from fleetctl.local.paths import LocalPaths
from fleetctl.local.state import LocalState
from fleetctl.local.supervisor import LocalStack
from fleetctl.local.tokens import LOCAL_AUDIENCE, LOCAL_ISSUER, KeyFiles, mint
from infra.emulators.jwt_authorizer import JwtAuthorizer, Unauthorized


def _authorizer(keys: KeyFiles) -> JwtAuthorizer:
    return JwtAuthorizer.from_file(keys.public, LOCAL_ISSUER, LOCAL_AUDIENCE)


def test_the_key_pair_is_made_once_and_kept_private(tmp_path: Path) -> None:
    keys = KeyFiles.under(tmp_path).ensure()
    first = keys.private.read_bytes()
    assert keys.private.stat().st_mode & 0o077 == 0
    # WHEN `local up` runs again THEN the same key stays, so tokens already handed out stay valid
    assert KeyFiles.under(tmp_path).ensure().private.read_bytes() == first


def test_a_minted_token_names_the_tenant_and_expires(tmp_path: Path) -> None:
    keys = KeyFiles.under(tmp_path).ensure()
    claims = _authorizer(keys).claims({"Authorization": "Bearer " + mint(keys.private.read_bytes(), "acme", 60)})
    assert claims["tenant"] == "acme" and claims["exp"] - claims["iat"] == 60
    stale = mint(keys.private.read_bytes(), "acme", 60, now=time.time() - 120)
    with pytest.raises(Unauthorized, match="expired"):
        _authorizer(keys).claims({"Authorization": f"Bearer {stale}"})
    # AND a token of another stack's key is refused
    other = KeyFiles.under(tmp_path / "other").ensure()
    with pytest.raises(Unauthorized, match="signature"):
        _authorizer(keys).claims({"Authorization": "Bearer " + mint(other.private.read_bytes(), "acme")})


def test_local_token_prints_only_a_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = KeyFiles.under(tmp_path).ensure()
    assert main(["local", "token", "--tenant", "acme", "--ttl", "30", "--state-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert _authorizer(keys).claims({"Authorization": f"Bearer {out.strip()}"})["tenant"] == "acme"


@pytest.mark.parametrize(
    ("args", "why"), [(["--tenant", "Not Valid"], "tenant name"), (["--tenant", "acme", "--ttl", "0"], "--ttl")]
)
def test_local_token_refuses_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], why: str
) -> None:
    KeyFiles.under(tmp_path).ensure()
    assert main(["local", "token", *args, "--state-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and why in captured.err


def test_local_token_without_a_stack_says_to_start_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["local", "token", "--tenant", "acme", "--state-dir", str(tmp_path)]) == 1
    assert "local up" in capsys.readouterr().err


def test_local_status_prints_the_api_line(tmp_path: Path) -> None:
    paths = LocalPaths(root=tmp_path, state_dir=tmp_path / "local")
    LocalState(port=4566, region="us-east-1", stack="fusionfleet", api_url="http://127.0.0.1:18081").save(
        paths.state_file
    )
    assert "api http://127.0.0.1:18081" in LocalStack(paths, say=lambda _line: None).status()
