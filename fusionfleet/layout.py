"""Where things live in the buckets: a job's key formats, both ways (a tenant's records are in
`tenant_layout.py`, a batch's in `batch_layout.py`; nowhere else spells out a key)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from fusionfleet.key_format import KeyFormat

MANIFEST_PREFIX = "jobs/"
MANIFEST_SUFFIX = ".json"
OUTPUT_PREFIX = "outputs/"
WORK_PREFIX = "work/"
INPUT_PREFIX = "inputs/"
# S3 lifecycle prefixes take no wildcards, so tenants/<tenant>/inputs/ uploads carry this tag
# (set by the API's presigned POST) and template.yaml's expire-tagged-inputs rule matches it.
INPUT_RETENTION_TAG = ("fusionfleet-retention", "input")
# Outputs and their previews carry this one: template.yaml expires them after OutputRetentionDays (a
# tenant's tenants/<tenant>/outputs/ cannot be named by a lifecycle prefix either).
OUTPUT_RETENTION_TAG = ("fusionfleet-retention", "output")
# Tenant T's inputs, manifests and outputs live under `tenants/T/` (`tenants/T/jobs/…`, …). A plain
# `jobs/` drop is the single-tenant deployment and may name nothing under `tenants/`.
TENANTS_PREFIX = "tenants/"
TENANT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")  # short: it heads every job id of the tenant


def work_prefix(job_id: str) -> str:
    return f"{WORK_PREFIX}{job_id}/"


def plan_key(job_id: str) -> str:
    return f"{work_prefix(job_id)}plan.json"


def job_key(job_id: str) -> str:
    """The job record: manifest location, probe, settings; written by the slicer."""
    return f"{work_prefix(job_id)}job.json"


def rejection_key(job_id: str) -> str:
    """Written instead of a plan when the slicer refuses a job, so clients learn why."""
    return f"{work_prefix(job_id)}rejected.json"


def notice_key(job_id: str) -> str:
    """The watchdog's record of the final notice it published (or found published) for a job."""
    return f"{work_prefix(job_id)}notice.json"


def reference_frame_key(job_id: str) -> str:
    """The frame the job's reference face comes from, decoded once by the slicer (fusionfleet.facefusion.reference)."""
    return f"{work_prefix(job_id)}reference-frame.png"


def content_analysis_key(job_id: str) -> str:
    """The job's content-analysis verdict, made once over the whole target (fusionfleet.facefusion.content_analysis)."""
    return f"{work_prefix(job_id)}content-analysis.json"


def voice_key(job_id: str) -> str:
    """The job's voice for the lip syncer, extracted once by its analysis step (gpu_worker.rendering.job_analysis)."""
    return f"{work_prefix(job_id)}voice-spectrogram.npy"


def content_analysis_progress_key(job_id: str) -> str:
    """How far the job's content analysis has read the target, while it runs (its own step, before the Map)."""
    return f"{work_prefix(job_id)}content-analysis-progress.json"


def face_reference_key(job_id: str, face: int) -> str:
    """The target's frame person `face` of a job with `faces` is named by, decoded once by the slicer."""
    return f"{work_prefix(job_id)}faces/{face:02d}.png"


# The formats read back as well as built (the parsers below); each is spelled here and nowhere else.
# A segment's output (`mp4`, or `png` for an image target's picture or a test render's frame), a
# backup copy's beside it (`.c1`), a later delivery's beside them (`.d2`), and the segment's record (`json`).
SEGMENT_FILE = KeyFormat(WORK_PREFIX + "{job}/segments/{index:05d}[.c{copy:01d}][.d{delivery:01d}].{ext}")
ATTEMPT_FILE = KeyFormat(
    WORK_PREFIX + "{job}/segments/{index:05d}.attempts/r{run:03d}-{attempt:03d}[-c{copy:01d}].json"
)
RUN_FILE = KeyFormat(WORK_PREFIX + "{job}/segments/{index:05d}.attempts/r{run:03d}-{kind:winner|task|backup}.json")
CHUNK_FILE = KeyFormat(WORK_PREFIX + "{job}/checkpoints/{index:05d}/{first:07d}-{end:07d}.{kind:mp4|state}")
WEBHOOK_DELIVERY_FILE = KeyFormat(WORK_PREFIX + "{job}/webhooks/{event}.json")
WORK_FILE = KeyFormat(WORK_PREFIX + "{job}/{rest}")


def segment_key(job_id: str, index: int, suffix: str = "mp4") -> str:
    """A segment's output: video (`mp4`), or the picture of an image target or a test render's frame (`png`)."""
    return SEGMENT_FILE.key(job=job_id, index=index, ext=suffix)


def segment_record_key(job_id: str, index: int) -> str:
    """Beside each segment: success (with checks) or the last error. The merge reads these."""
    return SEGMENT_FILE.key(job=job_id, index=index, ext="json")


def checkpoint_prefix(job_id: str, index: int) -> str:
    return f"{work_prefix(job_id)}checkpoints/{index:05d}/"


def chunk_key(job_id: str, index: int, first: int, end: int) -> str:
    """A checkpoint chunk of a segment: frames [first, end), uploaded as soon as it is encoded."""
    return CHUNK_FILE.key(job=job_id, index=index, first=first, end=end, kind="mp4")


def chunk_state_key(job_id: str, index: int, first: int, end: int) -> str:
    """Beside a chunk: the engine's frame-to-frame state after its last frame, so a resume continues exactly."""
    return CHUNK_FILE.key(job=job_id, index=index, first=first, end=end, kind="state")


def preview_key(output_key: str) -> str:
    """Beside the output: `outputs/x.mp4` → `outputs/x.preview.jpg`."""
    stem, dot, extension = output_key.rpartition(".")
    base = stem if dot and "/" not in extension else output_key
    return f"{base}.preview.jpg"


def segments_prefix(job_id: str) -> str:
    return f"{work_prefix(job_id)}segments/"


def attempts_prefix(job_id: str, index: int) -> str:
    """Beside each segment's record: one record per attempt (success, failure, release), for `logs`."""
    return f"{segments_prefix(job_id)}{index:05d}.attempts/"


def attempt_record_key(job_id: str, index: int, run: int, attempt: int, copy: int = 0) -> str:
    """Attempt `attempt` (the delivery's receive count) of run `run` (0, then each retry) of a segment;
    a straggler's backup copy `copy` (1) has attempts of its own, `…-001-c1.json`."""
    return ATTEMPT_FILE.key(job=job_id, index=index, run=run, attempt=attempt, copy=copy)


def copy_segment_key(job_id: str, index: int, copy: int, suffix: str = "mp4", delivery: int = 0) -> str:
    """Where copy `copy` of a segment uploads its output: the original (0) at the segment's key, a
    backup beside it, so two copies never write the same object; the segment record names the winner.
    `delivery`: a delivery after the first (its attempt number) uploads beside them too (`00003.d2.mp4`):
    two deliveries of one copy may render at once (a lapsed visibility, SQS's duplicate), and one upload
    landing on the other's key after its commit changed the committed bytes (the simulation's workers)."""
    return SEGMENT_FILE.key(job=job_id, index=index, copy=copy, delivery=delivery if delivery > 1 else 0, ext=suffix)


def segment_winner_key(job_id: str, index: int, run: int) -> str:
    """The commit of a segment in run `run`: created once (conditional PUT) by the first copy to finish."""
    return RUN_FILE.key(job=job_id, index=index, run=run, kind="winner")


def segment_task_key(job_id: str, index: int, run: int) -> str:
    """The segment's task token and its current attempt's start, for the watchdog's backup copies."""
    return RUN_FILE.key(job=job_id, index=index, run=run, kind="task")


def segment_backup_key(job_id: str, index: int, run: int) -> str:
    """Created once (conditional PUT) when the watchdog sends the segment's backup copy."""
    return RUN_FILE.key(job=job_id, index=index, run=run, kind="backup")


def blocklist_prefix(job_id: str) -> str:
    """The job's worker blocklist: one record per worker that failed too many of its segments."""
    return f"{work_prefix(job_id)}blocklist/"


def blocked_worker_key(job_id: str, worker: str) -> str:
    return f"{blocklist_prefix(job_id)}{worker}.json"


def run_key(job_id: str) -> str:
    """The job's current run (0 until it is retried): which execution is the job's now."""
    return f"{work_prefix(job_id)}run.json"


def run_plan_key(job_id: str, run: int) -> str:
    """A retry's plan: only the segments that had no valid output. Run 0 uses the job's plan."""
    return plan_key(job_id) if run == 0 else f"{work_prefix(job_id)}plans/r{run:03d}.json"


def cancel_key(job_id: str) -> str:
    """Written when an operator cancels a job; workers check it and drop the job's segments."""
    return f"{work_prefix(job_id)}cancelled.json"


def job_failed_key(job_id: str) -> str:
    """Written once by whoever first knows a job is lost (fusionfleet.jobs.loss): workers drop its segments."""
    return f"{work_prefix(job_id)}failed.json"


def frame_preview_key(job_id: str) -> str:
    """A small JPEG of the latest rendered frame, for the dashboard."""
    return f"{work_prefix(job_id)}preview.jpg"


def waiting_key(job_id: str) -> str:
    """A job that waits for its tenant's turn: what starts it (fusionfleet.jobs.waiting)."""
    return f"{work_prefix(job_id)}waiting.json"


def summary_key(job_id: str) -> str:
    """The job's summary: what its listing and detail show, kept current by every party that changes it."""
    return f"{work_prefix(job_id)}summary.json"


def accepted_key(job_id: str) -> str:
    """A manifest accepted for this job or batch, before the slicer's records (fusionfleet.jobs.acceptance)."""
    return f"{work_prefix(job_id)}accepted.json"


def webhook_key(job_id: str) -> str:
    """The job's webhook: URL, events and the caller's metadata (fusionfleet.webhooks.events)."""
    return f"{work_prefix(job_id)}webhook.json"


def webhook_deliveries_prefix(job_id: str) -> str:
    """One delivery record per webhook event of the job, and the job's webhook state."""
    return f"{work_prefix(job_id)}webhooks/"


def webhook_delivery_key(job_id: str, event_id: str) -> str:
    """The record of one event's delivery attempts; the event id (fusionfleet.webhooks.events.event_id)
    starts with the job id, which the key leaves out."""
    return WEBHOOK_DELIVERY_FILE.key(job=job_id, event=event_id.removeprefix(f"{job_id}."))


def webhook_state_key(job_id: str) -> str:
    """The job's webhook sequence counter and what it last delivered (progress, preview, final)."""
    return f"{webhook_deliveries_prefix(job_id)}_state.json"


# Records that are not jobs live under names a job id never has (job ids start with [a-z0-9]).
WORKERS_PREFIX = f"{WORK_PREFIX}_workers/"
REJECTED_INDEX_PREFIX = f"{WORK_PREFIX}_rejected/"
REJECTED_INDEX_FILE = KeyFormat(REJECTED_INDEX_PREFIX + "{job}.json")
API_PREFIX = f"{WORK_PREFIX}_api/"


def worker_key(name: str) -> str:
    """A worker's presence record: role, engine, current segment, last beat."""
    return f"{WORKERS_PREFIX}{name}.json"


def rejected_index_key(job_id: str) -> str:
    """One small record per rejected job, so rejected jobs can be listed without listing every job's files."""
    return REJECTED_INDEX_FILE.key(job=job_id)


def api_jobs_prefix(tenant: str) -> str:
    """The HTTP API's records of a tenant's jobs, one per job it issued (the body kept until start)."""
    return f"{API_PREFIX}{tenant}/"


def api_job_key(tenant: str, api_job_id: str) -> str:
    return f"{api_jobs_prefix(tenant)}{api_job_id}.json"


def tenant_prefix(tenant: str) -> str:
    """`acme` → `tenants/acme/`: everything of one tenant's, and nothing of anyone else's."""
    return f"{TENANTS_PREFIX}{tenant}/"


def tenant_manifest_prefix(tenant: str) -> str:
    return f"{tenant_prefix(tenant)}{MANIFEST_PREFIX}"


def tenant_output_prefix(tenant: str) -> str:
    return f"{tenant_prefix(tenant)}{OUTPUT_PREFIX}"


def tenant_input_prefix(tenant: str) -> str:
    return f"{tenant_prefix(tenant)}{INPUT_PREFIX}"


def tenant_manifest_key(tenant: str, name: str) -> str:
    """`tenants/<tenant>/jobs/<name>.json`: the trigger, as a drop into the bucket would write it."""
    return f"{tenant_manifest_prefix(tenant)}{name}{MANIFEST_SUFFIX}"


def tenant_upload_key(tenant: str, api_job_id: str, file_name: str) -> str:
    """Where the HTTP API has a tenant upload one file of one job: `tenants/T/inputs/<job>/<name>`."""
    return f"{tenant_input_prefix(tenant)}{api_job_id}/{file_name}"


def is_tenant_name(name: str) -> bool:
    return bool(TENANT_NAME.match(name))


def tenant_of(key: str) -> str | None:
    """The tenant whose prefix `key` is under (`tenants/acme/jobs/a.json` → `acme`), or None."""
    if not key.startswith(TENANTS_PREFIX):
        return None
    tenant, slash, _ = key[len(TENANTS_PREFIX) :].partition("/")
    return tenant if slash and is_tenant_name(tenant) else None


def manifest_prefix_of(manifest_key: str) -> str:
    """The drop prefix a manifest key is under: `jobs/` or `tenants/T/jobs/`."""
    tenant = tenant_of(manifest_key)
    return tenant_manifest_prefix(tenant) if tenant else MANIFEST_PREFIX


def manifest_name(manifest_key: str) -> str:
    """`jobs/summer/alice.json` → `summer/alice`; `tenants/acme/jobs/alice.json` → `alice`."""
    prefix = manifest_prefix_of(manifest_key)
    name = manifest_key[len(prefix) :] if manifest_key.startswith(prefix) else manifest_key
    return name[: -len(MANIFEST_SUFFIX)] if name.endswith(MANIFEST_SUFFIX) else name


def default_output_key(manifest_key: str, suffix: str = ".mp4") -> str:
    """Beside the drop it came from: `outputs/…` for `jobs/…`, `tenants/T/outputs/…` for a tenant's;
    `suffix` is the output's extension (an image target's output keeps its format)."""
    tenant = tenant_of(manifest_key)
    prefix = tenant_output_prefix(tenant) if tenant else OUTPUT_PREFIX
    return f"{prefix}{manifest_name(manifest_key)}{suffix}"


def default_output_prefix(manifest_key: str) -> str:
    """Where a batch's outputs (one per target) or a test render's frames go: `outputs/<name>/`."""
    return default_output_key(manifest_key, "/")


def trial_frame_key(prefix: str, frame: int) -> str:
    """Where a test render writes frame `frame` of its target: `<output prefix>frame-000120.png`."""
    return f"{prefix}frame-{frame:06d}.png"


def is_manifest_key(key: str) -> bool:
    """`jobs/<name>.json`, or `tenants/<tenant>/jobs/<name>.json` for a valid tenant name."""
    if key.startswith(TENANTS_PREFIX) and tenant_of(key) is None:
        return False
    prefix = manifest_prefix_of(key)
    return key.startswith(prefix) and key.endswith(MANIFEST_SUFFIX) and len(key) > len(prefix + MANIFEST_SUFFIX)


def input_key(name: str, file_name: str, tenant: str | None = None) -> str:
    """Where the CLI uploads one file of a job named `name`: `inputs/<name>/<file>`, under
    `tenants/T/` for a tenant."""
    return f"{tenant_input_prefix(tenant) if tenant else INPUT_PREFIX}{name}/{file_name}"


def manifest_key(name: str, tenant: str | None = None) -> str:
    """`jobs/<name>.json`, or a tenant's `tenants/<tenant>/jobs/<name>.json`."""
    return tenant_manifest_key(tenant, name) if tenant else f"{MANIFEST_PREFIX}{name}{MANIFEST_SUFFIX}"


# ---------------------------------------------------------------------- reading keys back
# Each parser takes a key one of the builders above made and gives back what built it (None for any
# other key), from the same format the builder used.
@dataclass(frozen=True)
class SegmentFile:
    """`segment_key` / `copy_segment_key` (kind "mp4" or "png") or `segment_record_key` (kind "json")."""

    job_id: str
    index: int
    kind: str
    copy: int = 0

    @property
    def is_output(self) -> bool:
        return self.kind != "json"


@dataclass(frozen=True)
class AttemptFile:
    """`attempt_record_key`."""

    job_id: str
    index: int
    run: int
    attempt: int
    copy: int = 0


@dataclass(frozen=True)
class RunFile:
    """`segment_winner_key`, `segment_task_key` or `segment_backup_key` of one run of a segment."""

    job_id: str
    index: int
    run: int
    kind: Literal["winner", "task", "backup"]


@dataclass(frozen=True)
class ChunkFile:
    """`chunk_key` (kind "mp4") or `chunk_state_key` (kind "state")."""

    job_id: str
    index: int
    first: int
    end: int
    kind: Literal["mp4", "state"] = "mp4"


def job_of_work_key(key: str) -> str | None:
    """The job a key under `work/<job_id>/` belongs to (any of the per-job builders above), or None."""
    found = WORK_FILE.parse(key)
    return str(found["job"]) if found else None


def parse_segment_file(key: str) -> SegmentFile | None:
    found = SEGMENT_FILE.parse(key)
    return SegmentFile(str(found["job"]), int(found["index"]), str(found["ext"]), int(found["copy"])) if found else None


def parse_attempt_record_key(key: str) -> AttemptFile | None:
    found = ATTEMPT_FILE.parse(key)
    if found is None:
        return None
    return AttemptFile(str(found["job"]), *(int(found[name]) for name in ("index", "run", "attempt", "copy")))


def parse_run_file(key: str) -> RunFile | None:
    found = RUN_FILE.parse(key)
    if found is None:
        return None
    kind: Literal["winner", "task", "backup"] = found["kind"]  # type: ignore[assignment]  # the format's three
    return RunFile(str(found["job"]), int(found["index"]), int(found["run"]), kind)


def parse_chunk_key(key: str) -> ChunkFile | None:
    found = CHUNK_FILE.parse(key)
    if found is None:
        return None
    kind: Literal["mp4", "state"] = "mp4" if found["kind"] == "mp4" else "state"
    return ChunkFile(str(found["job"]), int(found["index"]), int(found["first"]), int(found["end"]), kind)


def parse_rejected_index_key(key: str) -> str | None:
    """The job id of `rejected_index_key`."""
    found = REJECTED_INDEX_FILE.parse(key)
    return str(found["job"]) if found else None


def parse_webhook_delivery_key(key: str) -> tuple[str, str] | None:
    """(job id, event id) of `webhook_delivery_key`; None for the job's webhook state and other keys."""
    found = WEBHOOK_DELIVERY_FILE.parse(key)
    return (str(found["job"]), f"{found['job']}.{found['event']}") if found else None
