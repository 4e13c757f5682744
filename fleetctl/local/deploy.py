"""Deploy template.yaml to LocalStack the way `sam package` + `sam deploy` would on AWS.

Packaging uploads the files a SAM template points at (the state machine's ASL, Lambda code) to a
deployment bucket and rewrites those paths to S3 locations; CloudFormation (with the SAM transform)
then does the rest, so the local stack is built from the same template as the AWS one.
"""

from __future__ import annotations

import hashlib
import io
import re
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

DEPLOY_BUCKET = "fusionfleet-deployment"
_URI_LINE = re.compile(r"^(?P<indent>\s*)(?P<field>DefinitionUri|CodeUri): (?P<path>[^\s{#]+)\s*$", re.MULTILINE)
_TERMINAL_OK = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE"}
_TERMINAL_BAD = {"CREATE_FAILED", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "DELETE_COMPLETE", "UPDATE_ROLLBACK_FAILED"}


def local_artifacts(template: str) -> list[tuple[str, str]]:
    """(field, relative path) of every local file or folder the template points at."""
    return [(m["field"], m["path"]) for m in _URI_LINE.finditer(template)]


def rewrite_artifacts(template: str, locations: dict[str, str], bucket: str) -> str:
    """Replace each local path with its uploaded S3 location (pure; the text is otherwise unchanged)."""

    def replace(match: re.Match[str]) -> str:
        key = locations[match["path"]]
        if match["field"] == "CodeUri":
            return f"{match['indent']}CodeUri: s3://{bucket}/{key}"
        return f"{match['indent']}DefinitionUri:\n{match['indent']}  Bucket: {bucket}\n{match['indent']}  Key: {key}"

    return _URI_LINE.sub(replace, template)


def _zip_folder(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def package(root: Path, template_path: Path, s3: Any, bucket: str = DEPLOY_BUCKET) -> str:
    """Upload the template's artifacts and return the rewritten template text."""
    template = template_path.read_text()
    try:
        s3.create_bucket(Bucket=bucket)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
            raise
    locations: dict[str, str] = {}
    for _field, relative in local_artifacts(template):
        path = root / relative
        if path.is_dir():
            body, name = _zip_folder(path), f"{relative.strip('/').replace('/', '-')}.zip"
        else:
            body, name = path.read_bytes(), path.name
        # Content-addressed, as `sam package` does: a changed file changes the template, so
        # CloudFormation sees an update.
        key = f"artifacts/{hashlib.sha256(body).hexdigest()[:16]}/{name}"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        locations[relative] = key
    return rewrite_artifacts(template, locations, bucket)


def deploy_stack(
    cloudformation: Any,
    s3: Any,
    stack_name: str,
    template_body: str,
    parameters: dict[str, str],
    timeout_s: float = 300,
    on_event: Callable[[str], None] | None = None,
    bucket: str = DEPLOY_BUCKET,
) -> dict[str, str]:
    """Create or update the stack, wait for it, and return its outputs."""
    key = f"templates/{stack_name}.yaml"
    s3.put_object(Bucket=bucket, Key=key, Body=template_body.encode())
    url = f"{s3.meta.endpoint_url}/{bucket}/{key}"
    arguments = {
        "StackName": stack_name,
        "TemplateURL": url,
        "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        "Capabilities": ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    }
    if _stack_status(cloudformation, stack_name) is None:
        cloudformation.create_stack(**arguments)
    else:
        try:
            cloudformation.update_stack(**arguments)
        except ClientError as error:
            if "No updates are to be performed" not in str(error):
                raise
    return wait_for_stack(cloudformation, stack_name, timeout_s, on_event)


def _stack_status(cloudformation: Any, stack_name: str) -> str | None:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        if "does not exist" in str(error):
            return None
        raise
    return str(stacks[0]["StackStatus"]) if stacks else None


def wait_for_stack(
    cloudformation: Any, stack_name: str, timeout_s: float, on_event: Callable[[str], None] | None = None
) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
        status = stack["StackStatus"]
        if status in _TERMINAL_OK:
            return {item["OutputKey"]: item["OutputValue"] for item in stack.get("Outputs", [])}
        if status in _TERMINAL_BAD:
            raise RuntimeError(f"stack {stack_name} ended {status}: {_failure_reasons(cloudformation, stack_name)}")
        if on_event:
            on_event(status)
        time.sleep(1)
    raise TimeoutError(f"stack {stack_name} did not finish within {timeout_s:.0f} s")


def _failure_reasons(cloudformation: Any, stack_name: str) -> str:
    events = cloudformation.describe_stack_events(StackName=stack_name).get("StackEvents", [])
    reasons = [
        f"{event['LogicalResourceId']}: {event.get('ResourceStatusReason', '')}"
        for event in events
        if str(event.get("ResourceStatus", "")).endswith("FAILED")
    ]
    return "; ".join(reasons[:5]) or "no reason given"
