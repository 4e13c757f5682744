"""The user's client: submit a job (upload media + manifest), follow it, fetch its result."""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from fleetctl.notices import NoticeInbox
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.links import DOWNLOAD_LINK_SECONDS
from fusionfleet.adapters.orchestrator import Orchestrator
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import FusionFleetError, JobNotFound
from fusionfleet.fleet.tenants import check_tenant_name
from fusionfleet.jobs.acceptance import accept
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.jobs.image_output import IMAGE_EXTENSIONS, extension_of, output_suffix
from fusionfleet.jobs.output_format import container_of_key, default_video_suffix
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.views import JobResult, JobView
from fusionfleet.media.sniff import SNIFF_BYTES, image_format
from fusionfleet.messages import ObjectRef

# After a job's notice, how long and how often `wait` reads the status until the execution has ended.
NOTICE_SETTLE_S = 30.0
NOTICE_SETTLE_POLL_S = 0.1
CONTENT_TYPES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
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
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of a job; `extra`: fields added as they are (a webhook, its events, metadata)."""
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
    manifest.update(extra or {})
    return manifest


def local_output_suffix(path: Path, key: str) -> str:
    """The output's extension for a local target: an image keeps its format (told by its bytes, as the
    slicer tells it), a video its container where the farm writes it, as FaceFusion's output does (else `.mp4`)."""
    with path.open("rb") as handle:
        found = image_format(handle.read(SNIFF_BYTES))
    return output_suffix(key, found) if found else default_video_suffix(key)


# Extensions of the MP4 family (one container under several names).
MP4_EXTENSIONS = (".mp4", ".m4v", ".mov")
VIDEO_NAMES = {"mp4": "an MP4 video", "mkv": "a Matroska video", "webm": "a WebM video", "avi": "an AVI video"}


def _format_named(extension: str) -> str | None:
    """The format a file extension names (an image format, "mp4" for the MP4 family, or another video
    container), None for an extension naming none we know."""
    if extension in MP4_EXTENSIONS:
        return "mp4"
    return IMAGE_EXTENSIONS.get(extension) or container_of_key(extension)


def record_accepted(
    storage: Storage, work_bucket: str, job_id: str, ref: ObjectRef, manifest: dict[str, Any],
    say: Callable[[str], None],
) -> None:  # fmt: skip
    """Record the manifest just written as accepted (fusionfleet.jobs.acceptance). A stack deployed before
    its OperatorPolicy granted this refuses it: the job runs all the same, so say so rather than fail."""
    try:
        accept(storage, work_bucket, job_id, ref, manifest)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        say(f"could not record {job_id} as submitted ({code}): until the slicer takes it, it reads as unknown")


def _tell(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def named_after_content(requested: Path, output_key: str) -> tuple[Path, str]:
    """Where to write a job's output asked to go to `requested`: there, unless its extension names another
    format than the output holds (a PNG target named `.mp4`, an `--output out.mp4` for a picture); then the
    same name with the output's own extension, and the line that tells the user so ("" when unchanged)."""
    wanted, holds = extension_of(requested.name), extension_of(output_key)
    asked = _format_named(wanted)
    if asked is None or not holds or asked == _format_named(holds):
        return requested, ""
    renamed = requested.with_name(requested.name[: -len(wanted)] + holds)
    video = _format_named(holds) or "mp4"
    what = (
        f"a {IMAGE_EXTENSIONS[holds].upper()} picture"
        if holds in IMAGE_EXTENSIONS
        else VIDEO_NAMES.get(video, f"a {video.upper()} video")
    )
    return renamed, f"the output is {what}: writing it to {renamed} rather than {requested}"


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
        extra: dict[str, Any] | None = None,
        frames: tuple[int, ...] = (),
        faces: tuple[dict[str, Any], ...] = (),
        spread: int = 0,
    ) -> Submission:
        """Upload the media under inputs/<name>/, then the manifest: the manifest is the trigger.

        For a tenant, all three go under `tenants/<tenant>/` (inputs/, jobs/, outputs/). With `frames`, a
        test render: its output is a prefix, one picture per frame under it (`layout.trial_frame_key`); with
        `spread`, a test render of that many frames the slicer spreads over the target. With
        `faces` (mappings whose `source` lists indices into `sources`), the manifest maps them to people
        (fusionfleet.jobs.faces) instead of naming `source`.
        """
        if tenant is not None:
            check_tenant_name(tenant)
        for path in [*sources, target, *([reference] if reference else [])]:
            if not path.is_file():
                raise FusionFleetError(f"{path} is not a file")
        name = name or job_name(target)
        bucket = self._resources.media_bucket

        def upload(path: Path, slot: str) -> str:
            key = layout.input_key(name, f"{slot}{path.suffix.lower()}", tenant)
            say(f"uploading {path} → s3://{bucket}/{key}")
            # A tenant's inputs expire by tag (lifecycle prefixes take no wildcard for the tenant).
            tags = dict([layout.INPUT_RETENTION_TAG]) if tenant is not None else None
            content_type = CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
            self._storage.upload_file(bucket, key, path, content_type, tags)
            return key

        source_keys = [upload(path, f"source-{i}") for i, path in enumerate(sources)]
        target_key = upload(target, "target")
        reference_key = upload(reference, "reference") if reference else None
        manifest_key = layout.manifest_key(name, tenant)
        if frames or spread:
            output_key = layout.default_output_prefix(manifest_key)
            extra = {**(extra or {}), **({"frames": list(frames)} if frames else {"spread_frames": spread})}
        else:
            output_key = layout.default_output_key(manifest_key, local_output_suffix(target, target_key))
        if faces:
            mapped = [{**face, "source": [source_keys[index] for index in face["source"]]} for face in faces]
            extra = {**(extra or {}), "faces": mapped}
        manifest = build_manifest(
            source_keys, target_key, output_key, priority, engine, quality, reference_key, options or {}, extra
        )
        if faces:
            del manifest["source"]  # each mapping names its own
        etag = self._storage.put_bytes(
            bucket, manifest_key, json.dumps(manifest, indent=2).encode(), "application/json"
        )
        job_id = derive_job_id(bucket, manifest_key, etag)
        # Before the id is shown: from here `status` and `--wait` read it PENDING, not unknown, until the
        # slicer has taken it (fusionfleet.jobs.acceptance).
        ref = ObjectRef(bucket=bucket, key=manifest_key, etag=etag)
        record_accepted(self._storage, self._resources.work_bucket, job_id, ref, manifest, say)
        say(f"submitted s3://{bucket}/{manifest_key}")
        return Submission(job_id, manifest_key, output_key)

    def status(self, job_id: str) -> JobView:
        """The job as the read model shows it, a job not yet sliced as PENDING (JobNotFound for an id no
        manifest was accepted for), with its segments in flight and, once it succeeded, a link to its
        output signed now: the notice's link may have died with the merge task's role session
        (fusionfleet.adapters.links)."""
        reader = JobReader(
            self._storage, self._orchestrator, self._resources.work_bucket, self._resources.state_machine_arn
        )
        try:
            view = reader.view(job_id, known=False, in_flight=True)
        except JobNotFound:
            view = BatchReader(reader).unstarted_item(job_id)  # JobNotFound again for an id nothing knows
        if view.output_object is None:
            return view
        return replace(
            view, download=self._storage.presign_link(*view.output_object, DOWNLOAD_LINK_SECONDS, download=True)
        )

    def trial_frames(self, job_id: str) -> tuple[int, ...]:
        """The frames a test render renders, as the slicer wrote them into its context (for `spread_frames`,
        the ones it chose); () before it was sliced or for any other job."""
        reader = JobReader(
            self._storage, self._orchestrator, self._resources.work_bucket, self._resources.state_machine_arn
        )
        context = reader.records.facts(job_id).context
        return context.trial_frames if context is not None else ()

    def wait(
        self,
        job_id: str,
        timeout_s: float,
        on_update: Callable[[JobView], None] = lambda _view: None,
        poll_s: float = 1.0,
        notices: NoticeInbox | None = None,
        progress_s: float = 5.0,
    ) -> JobView:
        """Until the job ends or `timeout_s` passes (the view returned has then not ended): by polling
        every `poll_s`, or, given an inbox of the job's notices, on its notice (the status is then read
        every `progress_s` for `on_update` only)."""
        deadline = time.monotonic() + timeout_s
        settling_until = 0.0
        while True:
            view = self.status(job_id)
            on_update(view)
            if view.ended:
                return view
            now = time.monotonic()
            if now > deadline:
                return view
            if notices is None or now < settling_until:
                time.sleep(poll_s if notices is None else NOTICE_SETTLE_POLL_S)
                continue
            # The status is read first, so a job that ended before the inbox was subscribed is not missed.
            if notices.next_notice(min(progress_s, deadline - now)) is not None:
                # The notice is published just before the execution records its end: follow it closely.
                settling_until = time.monotonic() + NOTICE_SETTLE_S

    def download_object(self, bucket: str, key: str, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._storage.download_file(bucket, key, path)
        return path

    def download(self, result: JobResult, path: Path, tell: Callable[[str], None] | None = None) -> Path:
        """The output to `path`, or beside it under the name of what it holds (told on stderr, or to `tell`)."""
        path, renamed = named_after_content(path, result.key)
        if renamed:
            (tell or _tell)(renamed)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._storage.download_file(result.bucket, result.key, path)
        return path
