"""What the end-to-end tests share: submitting by S3 drop or through the HTTP API, waiting, and checking videos."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fleetctl.api_client import form_body
from fleetctl.local.state import LocalState
from fleetctl.local.supervisor import tenant_page_url
from fleetctl.samples import grace_hopper_path, read_stamp
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.queues import SqsQueue
from fusionfleet.environment.settings import FUSIONFLEET_FACEFUSION_HOME, FUSIONFLEET_FACEFUSION_PYTHON
from fusionfleet.jobs.ids import job_id
from tests.e2e.conftest import ROOT, Stack, free_port, up_command
from tests.support.facefusion_harness import Harness
from tests.support.media import decode_all


@contextmanager
def facefusion_stack(home: Harness, state_dir: Path, workers: int) -> Iterator[Stack]:
    """A local stack of its own in `state_dir` whose `workers` workers run the harness's FaceFusion from `home`;
    its logs printed and the stack taken down after."""
    (state_dir / "faults.json").write_text("[]")
    port = free_port()
    env = {**home.env, FUSIONFLEET_FACEFUSION_HOME: str(home.home), FUSIONFLEET_FACEFUSION_PYTHON: home.python}
    down = [sys.executable, "-m", "fleetctl.cli", "local", "down", "--state-dir", str(state_dir)]
    up = subprocess.run(
        up_command(port, state_dir, workers), env=env, cwd=ROOT, capture_output=True, text=True, timeout=400,
        check=False,
    )  # fmt: skip
    state = LocalState.load(state_dir / "state.json")
    if up.returncode != 0 or state is None:
        subprocess.run(down, cwd=ROOT, capture_output=True, timeout=120, check=False)
        pytest.fail(f"local up failed ({up.returncode}):\n{up.stdout}\n{up.stderr}")
    aws = AwsTarget(region=state.region, endpoint_url=state.endpoint)
    stack = Stack(state_dir, state.endpoint, StackResources.from_outputs(state.outputs), aws, port)
    try:
        yield stack
    finally:
        print(stack.logs())
        subprocess.run(down, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def queues_empty(stack: Stack) -> bool:
    queue = SqsQueue(stack.client("sqs"))
    return all(queue.depth(url).total == 0 for url in stack.resources.queues().values())


def wait_until(check: Callable[[], bool], timeout_s: float, poll_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(poll_s)
    return bool(check())


def drop_job(stack: Stack, name: str, target: Path, **fields: Any) -> str:
    """Upload a face, the target and a manifest `jobs/<name>.json`; returns the job id."""
    s3 = stack.client("s3")
    bucket = stack.resources.media_bucket
    s3.upload_file(str(grace_hopper_path()), bucket, f"inputs/{name}/face.jpg")
    s3.upload_file(str(target), bucket, f"inputs/{name}/{target.name}")
    manifest = {"version": 1, "source": [f"inputs/{name}/face.jpg"], "target": f"inputs/{name}/{target.name}",
                "engine": "copy", "priority": "high", **fields}  # fmt: skip
    etag = s3.put_object(Bucket=bucket, Key=f"jobs/{name}.json", Body=json.dumps(manifest).encode())["ETag"]
    return job_id(bucket, f"jobs/{name}.json", etag)


# Notices read from an inbox while waiting for another job's, kept for the call that asks for them: reading
# deletes them from the queue, and a test waiting for three jobs' notices in turn lost the third when the
# three arrived before it asked for the first (the suite run side by side showed it).
_READ: dict[str, list[dict[str, Any]]] = {}


def notice_for(stack: Stack, inbox: str, job: str, wait_s: float) -> dict[str, Any]:
    """The final notification of `job` (others in the inbox are kept for their own call)."""
    read = _READ.setdefault(inbox, [])
    deadline = time.monotonic() + wait_s
    while True:
        for notice in read:
            if notice.get("job_id") == job:
                read.remove(notice)
                return notice
        if time.monotonic() >= deadline:
            break
        read.extend(stack.notifications(inbox, wait_s=1, count=10))
    raise AssertionError(f"no notification for {job} within {wait_s:.0f} s:\n{stack.logs()}")


def stamps_of(path: Path) -> list[int]:
    return [read_stamp(image) for image in decode_all(path)[1]]


def record(stack: Stack, job: str, index: int) -> dict[str, Any]:
    body = stack.client("s3").get_object(Bucket=stack.resources.work_bucket, Key=layout.segment_record_key(job, index))
    value: dict[str, Any] = json.loads(body["Body"].read())
    return value


def checkpoint_exists(stack: Stack, job: str, index: int, first: int, end: int) -> bool:
    key = layout.chunk_key(job, index, first, end)
    listing = stack.client("s3").list_objects_v2(Bucket=stack.resources.work_bucket, Prefix=key)
    return int(listing.get("KeyCount", 0)) > 0


# ---------------------------------------------------------------- the HTTP API, as a client calls it


def api_token(stack: Stack, tenant: str) -> str:
    result = stack.cli("local", "token", "--tenant", tenant, "--ttl", "900", "--state-dir", str(stack.state_dir))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].count(".") == 2, result.stdout  # the token alone on stdout
    return lines[0]


def api_url(stack: Stack) -> str:
    status = stack.cli("local", "status", "--state-dir", str(stack.state_dir))
    (line,) = [line for line in status.stdout.splitlines() if line.startswith("api http")]
    return line.split(" ", 1)[1]


def tenant_page(stack: Stack, tenant: str) -> str:
    """The tenant's page on the local stack's dashboard, signed in (its API and token in the link)."""
    dashboard = stack.state().dashboard_url
    assert dashboard is not None
    return tenant_page_url(dashboard, api_url(stack), api_token(stack, tenant))


def api_call(url: str, token: str, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def post_file(upload: dict[str, Any], path: Path) -> int:
    """Upload as a client does: the presigned POST's form fields, then the file."""
    body, content_type = form_body(upload["fields"], path.name, path.read_bytes())
    request = urllib.request.Request(upload["url"], data=body, method="POST")
    request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=60) as response:
        return int(response.status)


def output_of(stack: Stack, notice: dict[str, object], tmp_path: Path) -> Path:
    output = notice["output"]
    assert isinstance(output, dict)
    path = tmp_path / "out.mp4"
    stack.client("s3").download_file(output["bucket"], output["key"], str(path))
    return path
