"""Submitting and following jobs through the HTTP API (a bearer token, no AWS credentials).

The same steps any client takes: `POST /jobs` with the job's fields, file names and sizes (a file
over the limit is refused there, 400), an HTML-form POST of each file to its presigned URL,
`POST /jobs/{id}/start`, then `GET /jobs/{id}` until the job ends, and the result fetched from its
`download_url`.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetctl.client import named_after_content
from fusionfleet.errors import FusionFleetError
from fusionfleet.jobs.states import parse_state


class ApiError(FusionFleetError):
    """The API refused a request; `status` is its HTTP status, the reason its message (and problems)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class ApiClient:
    base_url: str
    token: str
    timeout_s: float = 60.0

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url.rstrip("/") + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer: dict[str, Any] = json.loads(response.read() or b"{}")
                return answer
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, f"{method} {path}: {error.code} {_message(error.read())}") from error
        except urllib.error.URLError as error:
            raise ApiError(0, f"the API at {self.base_url} does not answer: {error.reason}") from error

    def submit(self, files: dict[str, Path], body: dict[str, Any], say: Callable[[str], None]) -> str:
        """Create the job, upload each named file to its URL, start it; returns the API's job id."""
        sizes = {name: path.stat().st_size for name, path in files.items()}
        created = self.call("POST", "/jobs", {**body, "sizes": sizes})
        for upload in created["uploads"]:
            path = files[upload["name"]]
            say(f"uploading {path} → {upload['key']}")
            post_form(upload["url"], upload["fields"], path, int(created["max_upload_bytes"]), self.timeout_s)
        self.call("POST", f"/jobs/{created['job_id']}/start")
        return str(created["job_id"])

    def wait(
        self, job_id: str, timeout_s: float, on_update: Callable[[dict[str, Any]], None], poll_s: float = 1.0
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.call("GET", f"/jobs/{job_id}")
            on_update(status)
            if ended(status) or time.monotonic() > deadline:
                return status
            time.sleep(poll_s)


def ended(status: dict[str, Any]) -> bool:
    """Whether a job the API answered for has ended (its `ended`; an older API's state alone)."""
    if "ended" in status:
        return bool(status["ended"])
    state = parse_state(str(status.get("state", "")))
    return state is not None and state.ended


def form_body(fields: dict[str, str], name: str, data: bytes) -> tuple[bytes, str]:
    """multipart/form-data of `fields`, then the file as `file` (S3 ignores fields after it)."""
    boundary = f"----fusionfleet{secrets.token_hex(12)}"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def upload_refusal(path: Path, status: int, raw: bytes, max_bytes: int) -> str:
    """S3's answer to a refused form upload, told as what the user can act on."""
    code = re.search(rb"<Code>([^<]+)</Code>", raw)
    text = raw.decode(errors="replace")
    limit = f"{max_bytes / (1024 * 1024):g} MiB" if max_bytes >= 1024 * 1024 else f"{max_bytes} bytes"
    if code and code.group(1) == b"EntityTooLarge":
        return f"upload of {path} refused: {path.stat().st_size} bytes is over the upload limit of {limit}"
    if "Policy Condition failed" in text or "Policy expired" in text:
        return (f"upload of {path} refused by the upload's policy (the limit is {limit}; "
                f"or the URL expired: create the job again): {_message(raw)}")  # fmt: skip
    return f"upload of {path} refused: {status} {_message(raw)}"


def post_form(url: str, fields: dict[str, str], path: Path, max_bytes: int, timeout_s: float) -> None:
    """Upload `path` through a presigned POST; ApiError naming the file and the limit when S3 refuses it."""
    if path.stat().st_size > max_bytes:
        raise ApiError(413, upload_refusal(path, 413, b"<Code>EntityTooLarge</Code>", max_bytes))
    body, content_type = form_body(fields, path.name, path.read_bytes())
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            pass
    except urllib.error.HTTPError as error:
        raise ApiError(error.code, upload_refusal(path, error.code, error.read(), max_bytes)) from error


def download(url: str, path: Path, timeout_s: float = 600.0) -> Path:
    """The file behind a download link to `path`, or beside it under the name of what it holds (the link's
    key says: a picture sent as `target.mp4` comes back a picture), told on stderr."""
    path, renamed = named_after_content(path, urllib.parse.urlparse(url).path)
    if renamed:
        print(renamed, file=sys.stderr, flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url, timeout=timeout_s) as response, path.open("wb") as out:
        shutil.copyfileobj(response, out)
    return path


def _message(raw: bytes) -> str:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")[:500]
    if not isinstance(value, dict):
        return str(value)[:500]
    text = str(value.get("error") or value.get("message") or value)
    problems = value.get("problems")
    return text + (": " + "; ".join(map(str, problems)) if isinstance(problems, list) else "")
