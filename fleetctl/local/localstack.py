"""Start LocalStack on the host (no Docker) from its own pinned Python 3.13 environment."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

# secretsmanager: tenants' webhook signing secrets (fusionfleet/webhooks/secrets.py), as on AWS.
SERVICES = "s3,sqs,sns,stepfunctions,cloudformation,iam,sts,logs,events,secretsmanager"


def localstack_env(port: int, volume: Path) -> dict[str, str]:
    return {
        "GATEWAY_LISTEN": f"127.0.0.1:{port}",
        "LOCALSTACK_HOST": f"127.0.0.1:{port}",
        "SERVICES": SERVICES,
        "EAGER_SERVICE_LOADING": "1",
        "LOCALSTACK_VOLUME_DIR": str(volume),
        # Queue URLs as http://127.0.0.1:<port>/queue/...: the default host name needs internet DNS.
        "SQS_ENDPOINT_STRATEGY": "path",
        "DNS_ADDRESS": "0",
        "SKIP_SSL_CERT_DOWNLOAD": "1",
        "DISABLE_EVENTS": "1",
        "LOCALSTACK_TELEMETRY_DISABLED": "1",
    }


def start(
    python: Path, launcher: Path, port: int, volume: Path, log: Path, base_env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """LocalStack through `launcher` (infra/localstack/launch.py: its JSONPath parses memoised)."""
    if not python.is_file():
        raise FileNotFoundError(
            f"LocalStack's environment is missing ({python}); run `make localstack-env` (needs Python 3.13)"
        )
    volume.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(python), str(launcher)],
            env={**base_env, **localstack_env(port, volume)},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def healthy(endpoint: str, services: tuple[str, ...] = ("s3", "sqs", "sns", "stepfunctions", "cloudformation")) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/_localstack/health", timeout=2) as response:
            states = json.load(response).get("services", {})
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return all(states.get(name) in ("running", "available") for name in services)


def wait_healthy(endpoint: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if healthy(endpoint):
            return
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"LocalStack exited with status {process.returncode} while starting")
        time.sleep(0.5)
    raise TimeoutError(f"LocalStack at {endpoint} was not healthy within {timeout_s:.0f} s")
