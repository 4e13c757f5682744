"""A tenant's jobs through the HTTP API: create (validate, hand out upload URLs), start, status, list,
detail (segments, attempts, timings, cost), preview, cancel and retry.

The API adds no store of its own to the farm's: between `POST /jobs` and `start` the validated body
waits in a small record (`work/_api/<tenant>/<id>.json`); `start` writes the manifest under the
tenant's `jobs/` prefix, the same trigger as a drop into the bucket; the pipeline's job is then found
from the manifest object (its ETag gives the job id, `fusionfleet.jobs.ids`) and read through the read model
(`fusionfleet.jobs.reader`), as the CLI and the dashboard read it, and steered through `Operations`.
Every key is built from the caller's tenant, so another tenant's job is simply not found.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from fusionfleet import index_layout, layout
from fusionfleet.adapters.storage import ObjectInfo, Storage, get_json, put_json
from fusionfleet.errors import (
    BadRequest,
    InputRejected,
    JobNotFound,
    JobRejected,
    ObjectMissing,
    ObjectRefused,
    OperationRefused,
)
from fusionfleet.facefusion.requirements import SourceKind
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.batch_views import ItemView, item_page, tenant_item_json
from fusionfleet.jobs.engine_options import check_engine_options, check_sources, faces_problem
from fusionfleet.jobs.ids import JOB_ID, name_of_job
from fusionfleet.jobs.ids import batch_id as pipeline_batch_id
from fusionfleet.jobs.ids import job_id as pipeline_job_id
from fusionfleet.jobs.manifest import KeyPolicy, invalid_manifest, parse_manifest
from fusionfleet.jobs.reader import DEFAULT_ATTEMPT_PAGE, DEFAULT_SEGMENT_PAGE, JobReader, encode_cursor
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.views import AttemptView, JobDetail, JobView, SegmentCounts, parse_time, pending_view
from fusionfleet.key_rules import slug
from fusionfleet.media.sniff import SNIFF_BYTES, sniff_source
from fusionfleet.services.batch_operations import BatchOperations
from fusionfleet.services.operations import Operations
from fusionfleet.webhooks.addresses import AddressPolicy

# The fields of a body that name files: a plain name is uploaded through the API, a key (with '/')
# names an object the tenant already has (checked by the manifest's own key rules).
# `targets` makes a batch: one job per target, steered and shown as one (fusionfleet.jobs.batches).
_FILE_FIELDS = ("source", "target", "targets", "reference")
_FACE_FILE_FIELDS = ("source", "reference")  # of each mapping of `faces` (a remix chain's passes)
# A page of GET /jobs: one listing and a summary read per job (fusionfleet.jobs.reader), so well under
# 20 reads of the work bucket per request.
DEFAULT_LIST_LIMIT = 15
# Optional in a body: {"sizes": {name: bytes}}, so a file over the limit is refused before any upload.
_SIZES_FIELD = "sizes"
MIB = 1024 * 1024


def oversized(sizes: Any, max_bytes: int) -> tuple[str, ...]:
    """A problem for each declared size that is not a byte count or is over `max_bytes`."""
    if not isinstance(sizes, dict):
        return (f"'{_SIZES_FIELD}' must map file names to sizes in bytes",)
    limit = f"{max_bytes // MIB} MiB" if max_bytes % MIB == 0 else f"{max_bytes} bytes"
    problems = []
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            problems.append(f"size of {name!r} must be a whole number of bytes, not {size!r}")
        elif size > max_bytes:
            problems.append(f"{name!r} is {size} bytes, over the upload limit of {limit} ({max_bytes} bytes)")
    return tuple(problems)


class BadBody(BadRequest):
    """The body of a request cannot make a job; `problems` lists every reason."""

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__("the job is invalid", problems)


class NotStarted(OperationRefused):
    """The job's files are not all uploaded, or it was started already."""


@dataclass(frozen=True)
class Upload:
    """One file's upload: an HTML-form POST of `fields`, then the file as form field `file`, to `url`."""

    name: str
    key: str
    url: str
    fields: dict[str, str]


@dataclass(frozen=True)
class Created:
    job_id: str
    uploads: tuple[Upload, ...]
    expires_in: int
    max_upload_bytes: int


def _targets(record: dict[str, Any]) -> tuple[str, ...]:
    """The target keys of an API job's body as kept in its record (its `targets` for a batch)."""
    manifest = record.get("manifest") or {}
    named = manifest.get("targets") or [manifest.get("target")]
    return tuple(str(key) for key in named if isinstance(key, str) and key)


def _items_known(record: dict[str, Any]) -> bool:
    """Whether each of a batch's targets is one item (a prefix's items are known once the slicer lists it)."""
    return not any(target.endswith("/") for target in _targets(record))


def new_job_id(now: datetime) -> str:
    """Time-ordered (listings sort by it) and unguessable; also a valid manifest name."""
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def manifest_for(body: Any, tenant: str, job_id: str) -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """The manifest a body describes, with plain file names turned into the job's upload keys.

    Returns the manifest's bytes and the (name, key) of each file to upload. Entries that are not
    strings are left as they are, so the manifest's validation names them.
    """
    if not isinstance(body, dict):
        raise BadBody((f"the body must be a JSON object, not {type(body).__name__}",))
    uploads: dict[str, str] = {}

    def place(value: Any) -> Any:
        if not isinstance(value, str) or "/" in value:
            return value
        key = layout.tenant_upload_key(tenant, job_id, value)
        uploads.setdefault(value, key)
        return key

    def placed(value: Any) -> Any:
        return [place(item) for item in value] if isinstance(value, list) else place(value)

    manifest = dict(body)
    for name in (name for name in _FILE_FIELDS if name in manifest):  # uploads in this order
        manifest[name] = placed(manifest[name])
    if isinstance(faces := manifest.get("faces"), list):  # each mapping's sources and reference are files too
        manifest["faces"] = [
            {name: placed(value) if name in _FACE_FILE_FIELDS else value for name, value in face.items()}
            if isinstance(face, dict) else face
            for face in faces
        ]  # fmt: skip
    output = manifest.get("output")
    if isinstance(output, str) and "/" not in output:
        manifest["output"] = f"{layout.tenant_output_prefix(tenant)}{job_id}/{output}"
    return json.dumps(manifest).encode(), tuple(uploads.items())


@dataclass
class TenantJobs:
    storage: Storage
    reader: JobReader
    operations: Operations
    media_bucket: str
    work_bucket: str
    upload_url_s: int = 300
    download_url_s: int = 900
    max_upload_bytes: int = 2048 * MIB
    clock: Callable[[], float] = field(default=time.time)
    # Where a job's webhook may go (the manifest's rules: https and public addresses on AWS).
    webhooks: AddressPolicy = field(default_factory=AddressPolicy)

    @property
    def _keys(self) -> KeyPolicy:
        # The API does not know the fleet's encoder device: NVENC is judged by the slicer (still before any render).
        return KeyPolicy(webhooks=self.webhooks, encoder_device="")

    # The engine of a job that names none (the slicer's DEFAULT_ENGINE): its options are judged for it.
    default_engine: str = "classic"

    # ------------------------------------------------------------------ create and start
    def create(self, tenant: str, raw: bytes) -> Created:
        """Validate a body as a dropped manifest would be; keep it; hand out one upload URL per file."""
        now = datetime.fromtimestamp(self.clock(), UTC)
        job_id = new_job_id(now)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise BadBody((f"the body is not JSON: {error}",)) from error
        if isinstance(body, dict) and _SIZES_FIELD in body:
            body = dict(body)
            problems = oversized(body.pop(_SIZES_FIELD), self.max_upload_bytes)
            if problems:
                raise BadBody(problems)
        manifest_bytes, files = manifest_for(body, tenant, job_id)
        manifest_key = layout.tenant_manifest_key(tenant, job_id)
        try:
            manifest = parse_manifest(manifest_bytes, manifest_key, self._keys)
            check_engine_options(engine := manifest.engine or self.default_engine, manifest.options)
            if problem := faces_problem(engine, manifest.faces):  # as the slicer would refuse it
                raise invalid_manifest([problem])
        except JobRejected as rejected:
            raise BadBody(rejected.problems) from rejected
        record = {
            "job_id": job_id,
            "created_at": now.isoformat(),
            # As sent (keys placed): the slicer validates exactly what was validated here.
            "manifest": json.loads(manifest_bytes),
            "uploads": [{"name": name, "key": key} for name, key in files],
        }
        put_json(self.storage, self.work_bucket, layout.api_job_key(tenant, job_id), record)
        uploads = []
        lasts_s = self.upload_url_s  # told as signed: the signer's credentials may end sooner
        for name, key in files:
            # Signed with the size cap and the retention tag: the lifecycle rule expires tagged uploads.
            post = self.storage.presign_post(
                self.media_bucket, key, self.upload_url_s, self.max_upload_bytes, dict([layout.INPUT_RETENTION_TAG])
            )
            uploads.append(Upload(name, key, post.url, post.fields))
            lasts_s = min(lasts_s, post.expires_s or lasts_s)
        return Created(job_id, tuple(uploads), lasts_s, self.max_upload_bytes)

    def start(self, tenant: str, job_id: str) -> JobView:
        """Write the manifest: from here on the job runs as any dropped manifest does."""
        record = self._record(tenant, job_id)
        if record is None:
            raise JobNotFound(f"no job {job_id}")
        missing = [item["name"] for item in record.get("uploads", []) if not self._exists(item["key"])]
        if missing:
            raise NotStarted(f"job {job_id} cannot start: not uploaded yet: {', '.join(missing)}")
        body = json.dumps(record["manifest"], indent=2).encode()
        self._check_sources(tenant, job_id, body)
        # A conditional create: starting twice (a retried request) writes one manifest, one job.
        if not self.storage.create(self.media_bucket, layout.tenant_manifest_key(tenant, job_id), body):
            raise NotStarted(f"job {job_id} was started already")
        return pending_view(job_id, submitted_at=parse_time(record.get("created_at")))

    def _check_sources(self, tenant: str, job_id: str, body: bytes) -> None:
        """What the job's engine needs from its sources (a face image, an audio file for the lip syncer),
        told now rather than by the slicer's notice: each uploaded source is known by its first bytes."""
        manifest = parse_manifest(body, layout.tenant_manifest_key(tenant, job_id), self._keys)
        kinds: list[SourceKind] = []
        for index, key in enumerate(manifest.all_sources):  # `faces`' too: a chain's passes swap faces
            info = self._head_own(key)
            if info is None:
                return  # not one this role reads (or not there): the slicer judges the job as a whole
            try:
                head = self.storage.get_range(self.media_bucket, key, 0, min(SNIFF_BYTES, info.size))
                kinds.append(sniff_source(head, f"source[{index}] {key!r}"))
            except InputRejected as rejected:
                raise BadBody(rejected.problems) from rejected
            except (ObjectMissing, ObjectRefused):
                return
        try:
            check_sources(manifest.engine or self.default_engine, manifest.options, kinds)
        except JobRejected as rejected:
            raise BadBody(rejected.problems) from rejected

    # ------------------------------------------------------------------ reading
    def status(self, tenant: str, job_id: str) -> JobView:
        record, pipeline = self._lookup(tenant, job_id)
        if pipeline is None:
            return self._waiting(job_id, record)
        if self._is_batch(record):
            return self._batch_view(job_id, pipeline, record)
        try:
            view = self.reader.view(pipeline)
        except JobNotFound:
            return self._waiting(job_id, record, started=True)  # the slicer has not taken it yet
        return self._shown(job_id, view, record)

    def detail_page(
        self, tenant: str, job_id: str, segments_from: int = 0, limit: int = DEFAULT_SEGMENT_PAGE
    ) -> tuple[JobDetail, int | None]:
        """`detail` with one page of the job's segments and none of its attempts (`logs_page` pages them):
        a bounded number of reads however long the job. Also the first segment of the next page."""
        record, pipeline = self._lookup(tenant, job_id)
        if pipeline is None:
            return JobDetail(self._waiting(job_id, record), [], [], {}, None), None
        if self._is_batch(record):
            return JobDetail(self._batch_view(job_id, pipeline, record), [], [], {}, None), None
        try:
            found, more = self.reader.detail_page(pipeline, segments_from, limit)
        except JobNotFound:
            return JobDetail(self._waiting(job_id, record, started=True), [], [], {}, None), None
        return replace(found, job=self._shown(job_id, found.job, record)), more

    def logs_page(
        self, tenant: str, job_id: str, limit: int = DEFAULT_ATTEMPT_PAGE, after: str = ""
    ) -> tuple[list[AttemptView], str | None]:
        _record, pipeline = self._lookup(tenant, job_id)
        if pipeline is None:
            return [], None
        try:
            return self.reader.attempts_page(pipeline, after, limit)
        except JobNotFound:
            return [], None

    def batch_items(
        self, tenant: str, job_id: str, first: int, limit: int
    ) -> tuple[list[dict[str, Any]], int | None] | None:
        """A page of a batch's items (from `first`, at most `limit`) as the tenant sees them, and the next
        page's first index; None when the job is no batch. Before the slicer opened it: no items yet."""
        record, pipeline = self._lookup(tenant, job_id)
        if not self._is_batch(record):
            return None
        try:
            if pipeline is None:
                raise JobNotFound(f"job {job_id} not started")
            detail = BatchReader(self.reader).detail(pipeline, page=range(first, first + limit))
        except JobNotFound:
            # Not started, or not opened by the slicer yet: its targets, as the job's body named them.
            targets = _targets(record)
            unopened = [ItemView(index, "", target, None) for index, target in enumerate(targets)]
            page, more = item_page(unopened if _items_known(record) else [], first, limit)
            return [tenant_item_json(item, None) for item in page], more
        page, more = item_page(detail.items, first, limit)
        links = [item.job.output_object if item.job is not None else None for item in page]
        return [
            tenant_item_json(
                item, self.storage.presign_link(*where, self.download_url_s, download=True).url if where else None
            )
            for item, where in zip(page, links, strict=True)
        ], more

    def logs(self, tenant: str, job_id: str, segment: int | None = None) -> list[AttemptView]:
        _record, pipeline = self._lookup(tenant, job_id)
        if pipeline is None:
            return []
        try:
            return self.reader.logs(pipeline, segment)
        except JobNotFound:
            return []

    def preview(self, tenant: str, job_id: str) -> str | None:
        """The latest swapped frame as a `data:` URL (the page's CSP allows no other image origin), or None."""
        _record, pipeline = self._lookup(tenant, job_id)
        if pipeline is None:
            return None
        try:
            image = self.reader.preview(pipeline)
        except JobNotFound:
            return None
        return None if image is None else "data:image/jpeg;base64," + base64.b64encode(image).decode()

    def list_jobs(self, tenant: str, limit: int = DEFAULT_LIST_LIMIT) -> list[JobView]:
        """The caller's jobs, newest first: those the API issued and manifests dropped under its prefix."""
        return self.list_page(tenant, limit)[0]

    def list_page(
        self, tenant: str, limit: int = DEFAULT_LIST_LIMIT, after: str = ""
    ) -> tuple[list[JobView], str | None]:
        """One page of the caller's jobs and the cursor of the next (None on the last).

        Started jobs come from the farm's job index (`JobReader.list_page`, one listing and a summary
        read each); the first page also shows, newest first, the jobs created through the API that
        were not started (one listing of the API's records, whose names the index does not hold).
        """
        views: list[JobView] = []
        if not after:
            for job_id in self._unstarted(tenant)[:limit]:
                try:
                    views.append(self.status(tenant, job_id))  # not started, or started before the job index
                except JobNotFound:
                    continue
        if len(views) >= limit:
            # The next page starts at the index's first job (only the first page shows unstarted jobs).
            return views, encode_cursor(index_layout.JOB_INDEX_PREFIX)
        started, more = self.reader.list_page(None, limit - len(views), tenant, after, unindexed=False)
        names = {view.name for view in started}  # a farm's jobs from before its index are not in `_unstarted`'s
        views = [view for view in views if view.job_id not in names]
        return views + [self._shown(view.name, view, {}) for view in started], more

    def _unstarted(self, tenant: str) -> list[str]:
        """The API's jobs of the caller that no job in the index was started from, newest first."""
        prefix = layout.api_jobs_prefix(tenant)
        created = {key[len(prefix) :].removesuffix(".json") for key in self.storage.list_keys(self.work_bucket, prefix)}
        if not created:
            return []
        started = {name_of_job(job_id) for job_id in self.reader.indexed_jobs(tenant)}
        return sorted((i for i in created if JOB_ID.fullmatch(i) and slug(i, len(i)) not in started), reverse=True)

    # ------------------------------------------------------------------ actions
    def cancel(self, tenant: str, job_id: str) -> str:
        pipeline, batch = self._started(tenant, job_id, "cancel")
        try:
            if batch:
                return BatchOperations(self.operations).cancel(pipeline).replace(pipeline, job_id)
            return self.operations.cancel(pipeline).replace(pipeline, job_id)
        except JobNotFound as error:
            raise OperationRefused(f"job {job_id} has not started running yet; cancel it in a moment") from error

    def retry(self, tenant: str, job_id: str) -> str:
        """Run a failed or cancelled job again (only its segments without a valid output)."""
        pipeline, batch = self._started(tenant, job_id, "retry")
        try:
            if batch:
                return BatchOperations(self.operations).retry(pipeline).replace(pipeline, job_id)
            return self.operations.retry(pipeline).replace(pipeline, job_id)
        except JobNotFound as error:
            raise OperationRefused(f"job {job_id} has not started running yet, nothing to retry") from error

    # ------------------------------------------------------------------ internals
    def _lookup(self, tenant: str, job_id: str) -> tuple[dict[str, Any], str | None]:
        """The API's record of the job ({} for a manifest dropped by hand) and its pipeline id, if started.

        Every key is built from the caller's tenant: another tenant's job is JobNotFound.
        """
        record = self._record(tenant, job_id)
        pipeline = self._pipeline_job(tenant, job_id, record)
        if record is None and pipeline is None:
            raise JobNotFound(f"no job {job_id}")
        return record or {}, pipeline

    def _started(self, tenant: str, job_id: str, action: str) -> tuple[str, bool]:
        """The started job's pipeline id, and whether it is a batch."""
        record, pipeline = self._lookup(tenant, job_id)
        if pipeline is None:
            raise OperationRefused(f"job {job_id} has not been started, nothing to {action}")
        return pipeline, self._is_batch(record)

    @staticmethod
    def _waiting(job_id: str, record: dict[str, Any], started: bool = False) -> JobView:
        """PENDING with what the job's body said (its priority, its target or targets): not yet started,
        or started and not yet taken by the slicer."""
        priority = (record.get("manifest") or {}).get("priority") or "normal"
        reason = "" if started else "waiting for its files and POST /jobs/{id}/start"
        view = replace(pending_view(job_id, reason, priority, parse_time(record.get("created_at"))),
                       targets=_targets(record))  # fmt: skip
        if not TenantJobs._is_batch(record):
            return view
        return replace(view, kind="batch", items=SegmentCounts(len(view.targets) if _items_known(record) else 0))

    def _shown(self, job_id: str, view: JobView, record: dict[str, Any]) -> JobView:
        """The pipeline's view as the tenant sees it: its own id, the API's states, a fresh download link."""
        shown = replace(view.public(job_id), submitted_at=parse_time(record.get("created_at")) or view.submitted_at)
        if view.output_object is None or view.kind == "batch":
            return shown  # a batch's output is a prefix: each of its items has its own link (batch_items)
        asked = record.get("manifest") or {}
        frames = asked.get("frames") or []
        if asked.get("spread_frames") and view.state is JobState.SUCCEEDED:
            # A poster strip's frames are the slicer's choice, once it knew the target's length: its context's.
            frames = (self.reader.records.json(layout.job_key(view.job_id)) or {}).get("trial_frames") or []
        if frames and view.state is JobState.SUCCEEDED:
            # A test render's output is a prefix: one link per frame's picture under it (trial_frame_key).
            bucket, prefix = view.output_object
            pictures = tuple(
                (int(frame), self.storage.presign_link(bucket, layout.trial_frame_key(prefix, int(frame)),
                                                       self.download_url_s).url)
                for frame in frames
            )  # fmt: skip
            return replace(shown, pictures=pictures)
        return replace(
            shown, download=self.storage.presign_link(*view.output_object, self.download_url_s, download=True)
        )

    def _pipeline_job(self, tenant: str, job_id: str, record: dict[str, Any] | None) -> str | None:
        """The pipeline's job (or batch) id for the manifest of this job, or None before it was started."""
        key = layout.tenant_manifest_key(tenant, job_id)
        info = self._head_own(key)
        if info is None:
            return None
        derive = pipeline_batch_id if self._is_batch(record) else pipeline_job_id
        return derive(self.media_bucket, key, info.etag)

    @staticmethod
    def _is_batch(record: dict[str, Any] | None) -> bool:
        """Whether the API made this job from a body with `targets` (a manifest dropped by hand is a job)."""
        return bool(((record or {}).get("manifest") or {}).get("targets"))

    def _batch_view(self, job_id: str, batch: str, record: dict[str, Any]) -> JobView:
        """A batch as one row: its state and items' counts (each item is a job the tenant reads by its id)."""
        try:
            view = BatchReader(self.reader).detail(batch, segments=False).batch
        except JobNotFound:
            return self._waiting(job_id, record, started=True)  # the slicer has not opened it yet
        return self._shown(job_id, view, record)

    def _record(self, tenant: str, job_id: str) -> dict[str, Any] | None:
        try:
            record = get_json(self.storage, self.work_bucket, layout.api_job_key(tenant, job_id))
        except (ObjectMissing, ObjectRefused):  # the caller's own key: refused means absent (as _head_own)
            return None
        return record if isinstance(record, dict) else None

    def _exists(self, key: str) -> bool:
        return self._head_own(key) is not None

    def _head_own(self, key: str) -> ObjectInfo | None:
        """The object under the caller's own prefix (every key here is built from it), or None.

        S3 answers a HEAD of a missing key 403, not 404, whenever the role's ListBucket grant does not
        match the request (a HEAD carries no s3:prefix), so here a 403 means "not there yet" too.
        """
        try:
            return self.storage.head(self.media_bucket, key)
        except (ObjectMissing, ObjectRefused):
            return None
