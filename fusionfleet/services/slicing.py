"""The slicer's domain logic: manifest → validated job → plan in S3 → one execution per job.

A rejected job gets a record in the work bucket and a failure notification; the manifest and the
media are left exactly where the user put them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from fusionfleet import layout
from fusionfleet.adapters.notify import Notifier, notice_subject
from fusionfleet.adapters.orchestrator import ExecutionMissing, Orchestrator, execution_arn
from fusionfleet.adapters.storage import Storage, get_json, put_json
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.errors import InputRejected, JobRejected, ObjectMissing
from fusionfleet.fleet.fairness import batch_window, fair_concurrency
from fusionfleet.fleet.presence import fleet_view
from fusionfleet.fleet.quotas import GpuCapacity
from fusionfleet.fleet.tenant_settings import TenantSettings, read_settings
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.fleet.wake import FleetWaker
from fusionfleet.jobs import summary
from fusionfleet.jobs.batches import BatchRecord, BatchTarget
from fusionfleet.jobs.final_notice import TopicChannel, state_machine_claim
from fusionfleet.jobs.ids import batch_id as derive_batch_id
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.jobs.ids import tenant_of_job
from fusionfleet.jobs.manifest import Manifest, parse_manifest
from fusionfleet.jobs.runs import RunRecord, execution_name, is_cancelled, record_run
from fusionfleet.jobs.states import NoticeStatus, segment_counts
from fusionfleet.jobs.timeouts import job_timeouts
from fusionfleet.jobs.waiting import WaitingRecord, enqueue, is_waiting, submission_order
from fusionfleet.messages import BatchItem, JobContext, ObjectRef, rejection_notice
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.services.batching import Advanced, Batches, Limits
from fusionfleet.services.job_retry import JobRetry
from fusionfleet.services.preparing import JobPreparer
from fusionfleet.webhooks.events import WebhookEvent, event_id
from fusionfleet.webhooks.outbox import WebhookOutbox

logger = logging.getLogger(__name__)

# Step Functions keeps an ended execution's name for 90 days, longer than the job's record lives
# (WorkRetentionDays): a manifest uploaded again after that runs as its job's next free run. Past
# this many runs the upload is refused with a notice, so a name is never probed without end.
MAX_RUNS = 100


RESUMED = "it was recorded and never started: started now"  # a duplicate event that started its job


@dataclass(frozen=True)
class SliceOutcome:
    status: Literal["started", "waiting", "duplicate", "rejected", "ignored", "batch"]
    job_id: str = ""
    execution_arn: str = ""
    reason: str = ""
    bytes_read: int = 0


@dataclass(frozen=True)
class Slicer:
    storage: Storage
    orchestrator: Orchestrator
    notifier: Notifier
    config: SlicerEnvironment
    capacity: GpuCapacity | None = None
    # Raises the render service for a new job at once (fusionfleet.fleet.wake); None: workers are not a service.
    waker: FleetWaker | None = None
    # Where the jobs' webhook events go (fusionfleet.webhooks.outbox); None: no `started` events from here.
    outbox: WebhookOutbox | None = None
    clock: Callable[[], float] = time.time  # seconds since the epoch (a simulation's virtual clock)

    @property
    def preparer(self) -> JobPreparer:
        return JobPreparer(self.storage, self.config)

    def handle(self, bucket: str, key: str) -> SliceOutcome:
        misnamed = _misnamed_tenant(key)
        if not layout.is_manifest_key(key) and misnamed is None:
            return SliceOutcome("ignored", reason=f"{key} is not a manifest (jobs/*.json or tenants/*/jobs/*.json)")
        try:
            info = self.storage.head(bucket, key)
        except ObjectMissing:
            # Deleted before we got to it: nothing to do, and nothing to tell anyone.
            return SliceOutcome("ignored", reason=f"s3://{bucket}/{key} no longer exists")
        job_id = derive_job_id(bucket, key, info.etag)
        manifest_ref = ObjectRef(bucket=bucket, key=key, etag=info.etag, size=info.size)
        if misnamed is not None:
            # Refused, not ignored: whoever dropped it would otherwise wait for ever (the operators hear).
            return self._reject(
                job_id,
                manifest_ref,
                JobRejected(
                    f"{misnamed!r} in {key!r} is not a tenant name: tenant names are 1 to 32 characters of a-z, "
                    "0-9 and '-', starting with a letter or digit; nothing was read or rendered"
                ),
                info.last_modified,
            )
        started = self._started_context(job_id)
        if started is not None:
            # A duplicate event, or the same manifest uploaded again: the same job, not a new one.
            return self._resume(started, info.last_modified.timestamp())
        tenant = layout.tenant_of(key)
        settings = read_settings(self.storage, self.config.work_bucket, tenant) if tenant is not None else None
        submitted_at = info.last_modified.isoformat()
        try:
            manifest = parse_manifest(self.storage.get_bytes(bucket, key), key, self.config.manifest_keys)
        except JobRejected as rejection:
            return self._reject(job_id, manifest_ref, rejection, info.last_modified)
        if manifest.is_batch:
            return self._batch(derive_batch_id(bucket, key, info.etag), manifest, manifest_ref, submitted_at)
        busy = self._busy(tenant)
        if busy:
            return self._reject(job_id, manifest_ref, JobRejected(busy), info.last_modified)
        run = self._free_run(job_id)
        if run is None:
            return self._reject(job_id, manifest_ref, JobRejected(
                f"job {job_id} has been run {MAX_RUNS} times, as many as one job id may; nothing was read or "
                "rendered: upload the manifest under another name to start it as a new job"
            ), info.last_modified)  # fmt: skip
        if run:
            # Uploaded again after its record expired. Files the earlier job wrote after its record
            # (checkpoints, notice, markers) expire later: none of them may leak into this run.
            logger.info("job %s ran before and its record expired: starting it again as run %s", job_id, run)
            self.storage.delete_prefix(self.config.work_bucket, layout.work_prefix(job_id))
        try:
            context, bytes_read = self.preparer.prepare(
                job_id, manifest, manifest_ref, submitted_at, run, tenant_settings=settings
            )
        except JobRejected as rejection:
            return self._reject(job_id, manifest_ref, rejection, info.last_modified)
        return self._start_job(context, settings, info.last_modified.timestamp(), bytes_read)

    def _resume(self, started: JobContext, uploaded_at: float) -> SliceOutcome:
        """A job already recorded: left as it is if it waits its turn or its execution exists; else recorded but
        never started (the start failed, or its slicer died first): started now, or queued for its tenant's turn
        as its first slicer would have (a cancel while it waited: neither)."""
        job_id = started.job_id
        if is_waiting(self.storage, self.config.work_bucket, job_id):
            # Queued for its tenant's turn: a duplicate event must not start it out of order.
            return SliceOutcome("duplicate", job_id, reason="it waits for its tenant's turn")
        name = execution_name(job_id, started.run)
        arn = execution_arn(self.config.state_machine_arn, name)
        try:
            self.orchestrator.describe(arn)
        except ExecutionMissing:
            if is_cancelled(self.storage, self.config.work_bucket, job_id):
                return SliceOutcome("duplicate", job_id, reason="it was cancelled before it started")
            then = read_settings(self.storage, self.config.work_bucket, started.tenant) if started.tenant else None
            if then is not None and self._queued(then):
                return self._queue(started, then, uploaded_at, 0)
            arn = self.orchestrator.start(self.config.state_machine_arn, name, self._execution_input(started, then))
            logger.info("job %s was recorded and never started: started as %s", job_id, arn)
            return SliceOutcome("duplicate", job_id, arn, reason=RESUMED)
        logger.info("job %s already started (%s): duplicate event ignored", job_id, arn)
        return SliceOutcome("duplicate", job_id, arn)

    def _start_job(
        self, context: JobContext, settings: TenantSettings | None = None, uploaded_at: float = 0.0,
        bytes_read: int = 0,
    ) -> SliceOutcome:  # fmt: skip
        """Record the prepared job and start its run's execution, or queue it for its tenant's turn."""
        job_id, run = context.job_id, context.run
        # Rejected before (say the target was not uploaded yet) and fine now: the old verdict goes,
        # before the job record: a delete that fails (DeleteFailed) then starts nothing, and the
        # retried event tries again, rather than a job that runs while `status` reads REJECTED.
        self.storage.delete_prefix(self.config.work_bucket, layout.rejection_key(job_id))
        if run:
            self._record_run(context)
        put_json(self.storage, self.config.work_bucket, layout.job_key(job_id), context.model_dump(mode="json"))
        bucket = self.config.work_bucket
        # A batch's item has a summary but no entry of its own in the job index: its batch's row lists it.
        submitted = summary.submitted_ms(context.submitted_at)
        summary.write(self.storage, bucket, summary.started(context), submitted, indexed=context.batch is None)
        if settings is not None and self._queued(settings):
            return self._queue(context, settings, uploaded_at, bytes_read)
        arn = self.orchestrator.start(
            self.config.state_machine_arn,
            execution_name(job_id, run),
            self._execution_input(context, settings),
        )
        logger.info("job %s started as %s with %s segments", job_id, arn, context.segment_count)
        if self.waker is not None:
            self.waker.wake(context.segment_count)
        self._started_event(context)
        return SliceOutcome("started", job_id, arn, bytes_read=bytes_read)

    # ------------------------------------------------------------------ batches
    @property
    def batches(self) -> Batches:
        channels = (TopicChannel(self.notifier, self.config.topic_arn),)
        return Batches(
            self.storage, self.orchestrator, self.config.work_bucket, self.config.state_machine_arn, channels,
            self._start_item, self._retry_item, self._resume_item, lambda: datetime.fromtimestamp(self.clock(), UTC),
        )  # fmt: skip

    def _batch(self, batch_id: str, manifest: Manifest, manifest_ref: ObjectRef, submitted_at: str) -> SliceOutcome:
        """Open the batch (or find it: a duplicate event) and start the items its window has room for."""
        uploaded = datetime.fromisoformat(submitted_at)
        try:
            self.batches.open(batch_id, manifest, manifest_ref, submitted_at)
        except JobRejected as rejection:
            return self._reject(batch_id, manifest_ref, rejection, uploaded)
        # One row in the job index for the whole batch (a duplicate event writes the same entry again).
        summary.index_entry(self.storage, self.config.work_bucket, batch_id, summary.submitted_ms(submitted_at))
        advanced = self.advance(batch_id)
        return SliceOutcome("batch", batch_id, reason=_told(advanced))

    def advance(self, batch_id: str, ended: str = "") -> Advanced:
        """Start what a batch's window has room for (an item ended, or the watchdog's tick). A tenant's
        items take their tenant's turn as its jobs do: an item that ended admits the tenant's next job
        (a quiet item publishes no notice for the notice follower to admit on)."""
        advanced = self.batches.advance(batch_id, self._batch_limits(), self._running_names, ended)
        tenant = tenant_of_job(batch_id)
        if ended and tenant is not None and self._queued(read_settings(self.storage, self.config.work_bucket, tenant)):
            self.admitter.admit(tenant)
        return advanced

    def _running_names(self) -> list[str]:
        return [execution.name for execution in self.orchestrator.running_executions(self.config.state_machine_arn)]

    def _batch_limits(self) -> Limits:
        if self.capacity is not None and self.capacity.refusal():
            return Limits(window=0)  # no GPU host can start now: the items wait, they are not refused
        window = self.config.batch_window
        if not window:
            fleet = fleet_view(self.storage, self.config.work_bucket, self.config.fleet_max_workers, time.time())
            window = batch_window(fleet.workers)
        return Limits(window, self.config.max_running_jobs, self.config.tenants.max_running_jobs)

    def _start_item(self, record: BatchRecord, target: BatchTarget) -> Literal["started", "rejected"]:
        """Prepare and start one item as a job of its own (quiet: its batch tells its user)."""
        job_id = record.item_id(target.index)
        quiet = not record.item_notices
        item = BatchItem(batch_id=record.batch_id, index=target.index, quiet=quiet)
        settings = read_settings(self.storage, self.config.work_bucket, record.tenant) if record.tenant else None
        try:
            context, _read = self.preparer.prepare(
                job_id, record.item_manifest(target), record.manifest, record.submitted_at, 0, item,
                output_stem=target.output_stem,
            )  # fmt: skip
        except JobRejected as rejection:
            self._reject(job_id, record.manifest, rejection, None, quiet=quiet)
            return "rejected"
        # A tenant's item takes a slot as its jobs do: queued in its line (at its batch's place), then admitted.
        self._start_job(context, settings, datetime.fromisoformat(record.submitted_at).timestamp())
        return "started"

    def _resume_item(self, record: BatchRecord, job_id: str) -> bool:
        """An item recorded by a slicer that died before queueing or starting it: resumed as a duplicate event
        resumes a job (True: it was started or queued now)."""
        started = self._started_context(job_id)
        if started is None:
            return False
        uploaded_at = datetime.fromisoformat(record.submitted_at).timestamp()
        resumed = self._resume(started, uploaded_at)
        return resumed.reason == RESUMED or resumed.status in ("started", "waiting")

    def _retry_item(self, job_id: str) -> None:
        JobRetry(self.storage, self.orchestrator, self.config, admit=self._admit).retry(job_id)

    def _admit(self, tenant: str) -> list[str]:
        return [admitted.job_id for admitted in self.admitter.admit(tenant)]

    def _queued(self, settings: TenantSettings) -> bool:
        """A tenant job waits its turn when the tenant, or the stack, has a job limit, or it has a budget."""
        return settings.limited or bool(self.config.tenants.max_running_jobs or self.config.max_running_jobs)

    @property
    def admitter(self) -> Admitter:
        """Starts a tenant's queued jobs in order, within its limits and budget (fusionfleet.services.admission)."""
        config = AdmissionConfig(
            self.config.work_bucket, self.config.state_machine_arn, stack_limits=self.config.tenants,
            max_running_jobs=self.config.max_running_jobs,
        )  # fmt: skip
        return Admitter(self.storage, self.orchestrator, config, self.outbox)

    def _queue(
        self, context: JobContext, settings: TenantSettings, uploaded_at: float, bytes_read: int
    ) -> SliceOutcome:
        """Queue the job for its tenant, then admit: it starts now if a slot is free and none waits before it."""
        assert context.tenant is not None
        job_id, run = context.job_id, context.run
        now = time.time()
        enqueue(
            self.storage, self.config.work_bucket,
            WaitingRecord(
                job_id=job_id, tenant=context.tenant, order=submission_order(uploaded_at, now), submitted_at=now,
                run=run, execution_name=execution_name(job_id, run),
                execution_input=self._execution_input(context, settings), waiting_since=datetime.now(UTC).isoformat(),
            ),
        )  # fmt: skip
        admitted = {item.job_id for item in self.admitter.admit(context.tenant)}
        if job_id in admitted:
            logger.info("job %s started with %s segments", job_id, context.segment_count)
            if self.waker is not None:
                self.waker.wake(context.segment_count)
            arn = execution_arn(self.config.state_machine_arn, execution_name(job_id, run))
            return SliceOutcome("started", job_id, arn, bytes_read=bytes_read)
        logger.info("job %s waits for its tenant %s's turn", job_id, context.tenant)
        return SliceOutcome("waiting", job_id, bytes_read=bytes_read)

    def _started_event(self, context: JobContext) -> None:
        if self.outbox is None:
            return
        event = WebhookEvent(
            event_id=event_id(context.job_id, context.run, "started"), job_id=context.job_id, run=context.run,
            kind="started", occurred_at=time.time(),
            data={"segments": segment_counts(0, 0, context.segment_count), "priority": context.priority},
        )  # fmt: skip
        self.outbox.emit_quietly(event)

    def _busy(self, tenant: str | None) -> str | None:
        """Why the stack, or this job's tenant, takes no new job now, or None."""
        if self.capacity is not None:
            refusal = self.capacity.refusal()
            if refusal:
                return refusal
        limit = self.config.max_running_jobs
        if not limit or tenant is not None:
            return None  # a tenant's job over a limit waits its turn (the admitter counts the stack too)
        running = len(self.orchestrator.running_executions(self.config.state_machine_arn))
        if not limit or running < limit:
            return None
        return (
            f"the stack is running {running} jobs, as many as it accepts at once ({limit}); "
            "nothing was read or rendered: upload the manifest again when some have finished"
        )

    def _free_run(self, job_id: str) -> int | None:
        """The first run number whose execution name is free (0 for a new job), or None past MAX_RUNS."""
        for run in range(MAX_RUNS):
            arn = execution_arn(self.config.state_machine_arn, execution_name(job_id, run))
            try:
                self.orchestrator.describe(arn)
            except ExecutionMissing:
                return run
        return None

    def _record_run(self, context: JobContext) -> None:
        """A later run's plan and run record, as a retry writes them; every segment renders again."""
        bucket, job_id, run = self.config.work_bucket, context.job_id, context.run
        plan = get_json(self.storage, bucket, layout.plan_key(job_id))
        put_json(self.storage, bucket, layout.run_plan_key(job_id, run), plan)
        started_at = datetime.now(UTC).isoformat()
        record_run(self.storage, bucket, job_id, RunRecord(run, tuple(range(context.segment_count)), started_at))

    def _started_context(self, job_id: str) -> JobContext | None:
        try:
            return JobContext.model_validate(get_json(self.storage, self.config.work_bucket, layout.job_key(job_id)))
        except ObjectMissing:
            return None

    def _execution_input(self, context: JobContext, settings: TenantSettings | None = None) -> dict[str, Any]:
        """Deterministic for a given manifest (and tenant settings), so a duplicate event's StartExecution matches."""
        concurrency = self.config.render_concurrency
        if context.tenant is not None:
            limits = settings.limits(self.config.tenants) if settings is not None else self.config.tenants
            concurrency = limits.render_concurrency(concurrency)
        if context.fleet_workers:
            # Within a priority a big job must not hold the queue ahead of a later small one.
            concurrency = min(concurrency, fair_concurrency(context.fleet_workers))
        return {
            "job": context.model_dump(mode="json"),
            "plan": {"bucket": self.config.work_bucket, "key": layout.run_plan_key(context.job_id, context.run)},
            "limits": {
                **job_timeouts(context.frame_count, _longest_segment(context), self.config.timeouts).as_limits(),
                "render_concurrency": concurrency,
            },
            # The notices' `tenant` attribute (the state machine cannot turn a null into "-" itself).
            "tenant": notice_tenant(context.tenant),
            # What its claim of the final notice needs (fusionfleet.jobs.final_notice).
            "final_notice": state_machine_claim(
                context.job_id, quiet=context.batch is not None and context.batch.quiet
            ),
            # A batch's item tells its batch when it ends (render.asl.json's TellBatch).
            **({"batch": {"batch_id": context.batch.batch_id, "index": context.batch.index}} if context.batch else {}),
        }

    def _reject(
        self, job_id: str, manifest_ref: ObjectRef, rejection: JobRejected, uploaded: datetime | None = None,
        quiet: bool = False,
    ) -> SliceOutcome:  # fmt: skip
        """`uploaded`: the manifest's upload, which ranks the job's index entry (as it does once it starts);
        none for a batch's item, which its batch's entry lists."""
        record_key = layout.rejection_key(job_id)
        notice = rejection_notice(
            job_id, manifest_ref, rejection.reason, rejection.problems, layout.tenant_of(manifest_ref.key)
        )
        kind = "input" if isinstance(rejection, InputRejected) else "manifest"
        logger.warning("job %s rejected (%s): %s", job_id, kind, rejection.reason)
        try:
            notified = bool(get_json(self.storage, self.config.work_bucket, record_key).get("notified"))
        except ObjectMissing:
            notified = False
        if notified:
            # A duplicated event must not notify twice.
            return SliceOutcome("rejected", job_id, reason=rejection.reason)
        # Recorded before and after publishing: a publish that fails leaves `notified` false, so the
        # retried event publishes again instead of finding a record and staying silent for ever.
        put_json(self.storage, self.config.work_bucket, record_key, {**notice, "notified": False})
        put_json(
            self.storage,
            self.config.work_bucket,
            layout.rejected_index_key(job_id),
            {"job_id": job_id, "manifest": manifest_ref.key, "rejected_at": datetime.now(UTC).isoformat()},
        )
        if uploaded is not None:
            summary.index_entry(self.storage, self.config.work_bucket, job_id, int(uploaded.timestamp() * 1000))
        if not quiet:  # a batch's quiet item: its batch's summary names it
            self.notifier.publish(self.config.topic_arn, notice_subject(job_id, NoticeStatus.FAILED), notice)
        put_json(self.storage, self.config.work_bucket, record_key, {**notice, "notified": True})
        return SliceOutcome("rejected", job_id, reason=rejection.reason)


def _told(advanced: Advanced) -> str:
    """What an advance did, for the log line."""
    done = f"{len(advanced.started)} items started, {len(advanced.rejected)} refused, {len(advanced.retried)} retried"
    waiting = f"; {advanced.waiting} waiting ({advanced.why_waiting})" if advanced.waiting else ""
    return done + waiting + (f"; summary {advanced.summary}" if advanced.summary else "")


def _misnamed_tenant(key: str) -> str | None:
    """The tenant part of `tenants/<x>/jobs/<name>.json` when <x> is no valid tenant name, else None."""
    if not key.startswith(layout.TENANTS_PREFIX) or not key.endswith(layout.MANIFEST_SUFFIX):
        return None
    tenant, _, rest = key[len(layout.TENANTS_PREFIX) :].partition("/")
    if not rest.startswith(layout.MANIFEST_PREFIX) or layout.is_tenant_name(tenant):
        return None
    return tenant


def _longest_segment(context: JobContext) -> int:
    """Segments are cut evenly, so none is longer than this (derived, so duplicates get the same input)."""
    return -(-context.frame_count // max(1, context.segment_count))
