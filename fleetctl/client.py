"""The user's client: submit a job (upload media + manifest), follow it, fetch its result."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetctl.notices import NoticeInbox
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.errors import FusionFleetError, ObjectMissing
from fusionfleet.identity import job_id as derive_job_id
from fusionfleet.links import DOWNLOAD_LINK_SECONDS, PresignedLink
from fusionfleet.operations import CANCEL_REASON
from fusionfleet.orchestrator import Execution, ExecutionMissing, Orchestrator, Progress, execution_arn
from fusionfleet.runs import current_run, execution_name, is_cancelled
from fusionfleet.storage import Storage, get_json
from fusionfleet.tenants import check_tenant_name

# After a job's notice, how long and how often `wait` reads the status until the execution has ended.
NOTICE_SETTLE_S = 30.0
NOTICE_SETTLE_POLL_S = 0.1
_CONTENT_TYPES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
    ".mp4": "video/mp4",
    ".mov": "video/quicktime",
    ".mkv": "video/x-matroska",
    ".webm": "video/webm",
}


@dataclass(frozen=True)
class Submission:
    job_id: str
    manifest_key: str
    output_key: str


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: str  # PENDING | RUNNING | SUCCEEDED | FAILED | REJECTED | CANCELLED | TIMED_OUT | ABORTED
    progress: Progress | None = None
    output: dict[str, Any] | None = None
    reason: str = ""
    execution: Execution | None = None
    # A SUCCEEDED job's output, signed afresh when the status was read: the notice's link may have
    # died with the merge task's role session (fusionfleet.links).
    download: PresignedLink | None = None

    @property
    def finished(self) -> bool:
        return self.state not in ("PENDING", "RUNNING")


def job_name(target: Path, now: datetime | None = None) -> str:
    """A fresh manifest name: each submission is its own job, even with the same files."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{target.stem}-{stamp}-{secrets.token_hex(2)}"


def build_manifest(
    sources: list[str],
    target: str,
    output: str,
    priority: str,
    engine: str | None,
    quality: str | None,
    reference: str | None,
    options: dict[str, Any],
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "version": 1,
        "source": sources,
        "target": target,
        "output": output,
        "priority": priority,
    }
    if engine:
        manifest["engine"] = engine
    if quality:
        manifest["quality"] = quality
    if reference:
        manifest["reference"] = reference
    if options:
        manifest["options"] = options
    return manifest


class Client:
    def __init__(self, storage: Storage, orchestrator: Orchestrator, resources: StackResources) -> None:
        self._storage = storage
        self._orchestrator = orchestrator
        self._resources = resources

    def submit(
        self,
        sources: list[Path],
        target: Path,
        priority: str = "normal",
        engine: str | None = None,
        quality: str | None = None,
        reference: Path | None = None,
        options: dict[str, Any] | None = None,
        name: str | None = None,
        say: Callable[[str], None] = lambda _line: None,
        tenant: str | None = None,
    ) -> Submission:
        """Upload the media under inputs/<name>/, then the manifest: the manifest is the trigger.

        For a tenant, all three go under `tenants/<tenant>/` (inputs/, jobs/, outputs/).
        """
        if tenant is not None:
            check_tenant_name(tenant)
        for path in [*sources, target, *([reference] if reference else [])]:
            if not path.is_file():
                raise FusionFleetError(f"{path} is not a file")
        name = name or job_name(target)
        bucket = self._resources.media_bucket
        home = layout.tenant_prefix(tenant) if tenant else ""

        def upload(path: Path, slot: str) -> str:
            key = f"{home}{layout.INPUT_PREFIX}{name}/{slot}{path.suffix.lower()}"
            say(f"uploading {path} → s3://{bucket}/{key}")
            self._storage.upload_file(
                bucket, key, path, _CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
            )
            return key

        source_keys = [upload(path, f"source-{i}") for i, path in enumerate(sources)]
        target_key = upload(target, "target")
        reference_key = upload(reference, "reference") if reference else None
        manifest_key = f"{home}{layout.MANIFEST_PREFIX}{name}{layout.MANIFEST_SUFFIX}"
        output_key = layout.default_output_key(manifest_key)
        manifest = build_manifest(
            source_keys, target_key, output_key, priority, engine, quality, reference_key, options or {}
        )
        etag = self._storage.put_bytes(
            bucket, manifest_key, json.dumps(manifest, indent=2).encode(), "application/json"
        )
        say(f"submitted s3://{bucket}/{manifest_key}")
        return Submission(derive_job_id(bucket, manifest_key, etag), manifest_key, output_key)

    def status(self, job_id: str) -> JobStatus:
        try:
            rejection = get_json(self._storage, self._resources.work_bucket, layout.rejection_key(job_id))
        except ObjectMissing:
            rejection = None
        if rejection is not None:
            return JobStatus(job_id, "REJECTED", reason=str(rejection.get("reason", "")))
        # The job's current run: its first execution, or the latest retry's (fusionfleet.runs).
        run = current_run(self._storage, self._resources.work_bucket, job_id).run
        arn = execution_arn(self._resources.state_machine_arn, execution_name(job_id, run))
        try:
            execution = self._orchestrator.describe(arn)
        except ExecutionMissing:
            return JobStatus(job_id, "PENDING")
        progress = _whole_job(self._orchestrator.progress(arn), execution) if run else self._orchestrator.progress(arn)
        if execution.status in ("RUNNING", "ABORTED") and is_cancelled(
            self._storage, self._resources.work_bucket, job_id
        ):
            return JobStatus(job_id, "CANCELLED", progress, reason=CANCEL_REASON, execution=execution)
        if execution.status == "SUCCEEDED":
            return JobStatus(
                job_id,
                "SUCCEEDED",
                progress,
                execution.output,
                execution=execution,
                download=self._fresh_link(execution),
            )
        if execution.finished:
            return JobStatus(
                job_id, execution.status, progress, reason=execution.cause or execution.error or "", execution=execution
            )
        return JobStatus(job_id, "RUNNING", progress, execution=execution)

    def wait(
        self,
        job_id: str,
        timeout_s: float,
        on_update: Callable[[JobStatus], None] = lambda _status: None,
        poll_s: float = 1.0,
        notices: NoticeInbox | None = None,
        progress_s: float = 5.0,
    ) -> JobStatus:
        """Until the job ends or `timeout_s` passes: by polling every `poll_s`, or, given an inbox of the
        job's notices, on its notice (the status is then read every `progress_s` for `on_update` only)."""
        deadline = time.monotonic() + timeout_s
        settling_until = 0.0
        while True:
            status = self.status(job_id)
            on_update(status)
            if status.finished:
                return status
            now = time.monotonic()
            if now > deadline:
                return JobStatus(
                    job_id, "WAIT_TIMEOUT", status.progress, reason=f"still {status.state} after {timeout_s:.0f} s"
                )
            if notices is None or now < settling_until:
                time.sleep(poll_s if notices is None else NOTICE_SETTLE_POLL_S)
                continue
            # The status is read first, so a job that ended before the inbox was subscribed is not missed.
            if notices.next_notice(min(progress_s, deadline - now)) is not None:
                # The notice is published just before the execution records its end: follow it closely.
                settling_until = time.monotonic() + NOTICE_SETTLE_S

    def _fresh_link(self, execution: Execution) -> PresignedLink | None:
        output = (execution.output or {}).get("output")
        if not isinstance(output, dict) or not output.get("bucket") or not output.get("key"):
            return None
        return self._storage.presign_link(str(output["bucket"]), str(output["key"]), DOWNLOAD_LINK_SECONDS)

    def download(self, output: dict[str, Any], path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._storage.download_file(output["bucket"], output["key"], path)
        return path


def _whole_job(progress: Progress | None, execution: Execution) -> Progress | None:
    """A retry's Map Run covers only the segments it renders: the others were done before it."""
    total = int((execution.input or {}).get("job", {}).get("segment_count", 0))
    if progress is None or total <= progress.total:
        return progress
    before = total - progress.total
    return Progress(
        total=total,
        succeeded=progress.succeeded + before,
        failed=progress.failed,
        running=progress.running,
        pending=progress.pending,
    )
