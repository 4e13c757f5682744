"""The slicer's domain logic: manifest → validated job → plan in S3 → one execution per job.

A rejected job gets a record in the work bucket and a failure notification; the manifest and the
media are left exactly where the user put them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from fusionfleet import layout
from fusionfleet.adapters.notify import Notifier, notice_subject
from fusionfleet.adapters.orchestrator import ExecutionMissing, Orchestrator, execution_arn
from fusionfleet.adapters.storage import S3RangeSource, Storage, get_json, put_json
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.errors import InputRejected, JobRejected, MediaError, ObjectMissing
from fusionfleet.facefusion.reference import reference_frame_problem, reference_frame_wanted
from fusionfleet.facefusion.requirements import SourceKind
from fusionfleet.fleet.fairness import fair_concurrency
from fusionfleet.fleet.presence import fleet_view
from fusionfleet.fleet.quotas import GpuCapacity
from fusionfleet.fleet.tenant_settings import TenantSettings, read_settings
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.fleet.wake import FleetWaker
from fusionfleet.jobs import summary
from fusionfleet.jobs.decisions import CONTENT_ANALYSIS, job_level
from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.jobs.engine_options import check_engine_options, check_sources, selects_faces
from fusionfleet.jobs.final_notice import state_machine_claim
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.jobs.manifest import Manifest, invalid_manifest, parse_manifest
from fusionfleet.jobs.plan import Segment, plan_segments
from fusionfleet.jobs.runs import RunRecord, execution_name, record_run
from fusionfleet.jobs.sizing import engine_cost, plan_for_fleet
from fusionfleet.jobs.timeline import Timeline, timeline, trim_problem
from fusionfleet.jobs.timeouts import job_timeouts
from fusionfleet.jobs.waiting import WaitingRecord, enqueue, is_waiting, submission_order
from fusionfleet.media.image import check_image
from fusionfleet.media.probe import VideoInfo, probe_video
from fusionfleet.media.reader import RangeReader
from fusionfleet.media.sniff import SNIFF_BYTES, sniff_source
from fusionfleet.media.source_audio import probe_audio
from fusionfleet.media.still import encode_png, frame_at
from fusionfleet.messages import AudioSource, JobContext, ObjectRef, rejection_notice
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.webhooks.events import EVENT_KINDS, WebhookEvent, WebhookSubscription, event_id
from fusionfleet.webhooks.outbox import WebhookOutbox, write_subscription

logger = logging.getLogger(__name__)

# Step Functions keeps an ended execution's name for 90 days, longer than the job's record lives
# (WorkRetentionDays): a manifest uploaded again after that runs as its job's next free run. Past
# this many runs the upload is refused with a notice, so a name is never probed without end.
MAX_RUNS = 100


@dataclass(frozen=True)
class SliceOutcome:
    status: Literal["started", "waiting", "duplicate", "rejected", "ignored"]
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
        if started is not None and is_waiting(self.storage, self.config.work_bucket, job_id):
            # Queued for its tenant's turn: a duplicate event must not start it out of order.
            return SliceOutcome("duplicate", job_id, reason="it waits for its tenant's turn")
        if started is not None:
            # A duplicate event, or the same manifest uploaded again: the same job, not a new one.
            name = execution_name(job_id, started.run)
            arn = execution_arn(self.config.state_machine_arn, name)
            try:
                self.orchestrator.describe(arn)
            except ExecutionMissing:
                # Recorded but never started (the start failed, or its slicer died first): start it now.
                then = read_settings(self.storage, self.config.work_bucket, started.tenant) if started.tenant else None
                arn = self.orchestrator.start(self.config.state_machine_arn, name, self._execution_input(started, then))
            logger.info("job %s already started (%s): duplicate event ignored", job_id, arn)
            return SliceOutcome("duplicate", job_id, arn)
        tenant = layout.tenant_of(key)
        settings = read_settings(self.storage, self.config.work_bucket, tenant) if tenant is not None else None
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
            context, bytes_read = self._prepare(job_id, manifest_ref, info.last_modified.isoformat(), run, settings)
        except JobRejected as rejection:
            return self._reject(job_id, manifest_ref, rejection, info.last_modified)
        # Rejected before (say the target was not uploaded yet) and fine now: the old verdict goes,
        # before the job record: a delete that fails (DeleteFailed) then starts nothing, and the
        # retried event tries again, rather than a job that runs while `status` reads REJECTED.
        self.storage.delete_prefix(self.config.work_bucket, layout.rejection_key(job_id))
        if run:
            self._record_run(context)
        put_json(self.storage, self.config.work_bucket, layout.job_key(job_id), context.model_dump(mode="json"))
        bucket = self.config.work_bucket
        summary.write(self.storage, bucket, summary.started(context), summary.submitted_ms(context.submitted_at))
        if settings is not None and self._queued(settings):
            return self._queue(context, settings, info.last_modified.timestamp(), bytes_read)
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
            data={"segments": {"done": 0, "failed": 0, "total": context.segment_count}, "priority": context.priority},
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
        running = len(self.orchestrator.list_executions(self.config.state_machine_arn, "RUNNING"))
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
            "final_notice": state_machine_claim(context.job_id),
        }

    def _prepare(
        self, job_id: str, manifest_ref: ObjectRef, submitted_at: str, run: int = 0,
        tenant_settings: TenantSettings | None = None,
    ) -> tuple[JobContext, int]:  # fmt: skip
        """The job's context and how many bytes of the target the probe read."""
        manifest = parse_manifest(
            self.storage.get_bytes(manifest_ref.bucket, manifest_ref.key), manifest_ref.key, self.config.manifest_keys
        )
        if manifest.webhook is not None or manifest.metadata is not None:
            # Before any other check: a job refused from here on still tells its webhook.
            write_subscription(self.storage, self.config.work_bucket, WebhookSubscription(
                job_id=job_id, tenant=layout.tenant_of(manifest_ref.key), url=manifest.webhook,
                events=manifest.webhook_events or EVENT_KINDS, metadata=manifest.metadata or {},
            ))  # fmt: skip
        if tenant_settings is not None and (problem := tenant_settings.priority_problem(manifest.priority)):
            raise JobRejected(problem + "; nothing was read or rendered")
        engine = manifest.engine or self.config.default_engine
        check_engine_options(engine, manifest.options)
        refs = self._media_refs(manifest, manifest_ref.bucket)
        reference = refs["reference"][0] if refs["reference"] else None
        images, audio, kinds = self._check_sources(refs["sources"], reference)
        check_sources(engine, manifest.options, kinds)
        target = refs["target"][0]
        video, bytes_read = self._probe(target)
        trimmed = trim_problem(manifest.options, video.frame_count)
        if trimmed:
            raise invalid_manifest([trimmed])
        frames = timeline(manifest.options, video.frame_count, video.fps)
        reference_frame = self._reference_frame(job_id, manifest, target, video) if selects_faces(engine) else None
        width, height = video.display_size
        plan, fleet_workers = self._plan(frames, engine)
        settings = encoder_settings(
            width, height, frames.output_fps, manifest.options, max(s.frame_count for s in plan),
            self.config.encoder_threads, self.config.video_encoder_device, engine,
        )  # fmt: skip
        put_json(self.storage, self.config.work_bucket, layout.plan_key(job_id), [s.to_dict() for s in plan])
        assert manifest.output is not None
        context = JobContext(
            job_id=job_id,
            tenant=layout.tenant_of(manifest_ref.key),
            manifest=manifest_ref,
            sources=tuple(images),
            audio=audio,
            target=target,
            reference=reference,
            reference_frame=reference_frame,
            content_analysis=ObjectRef(bucket=self.config.work_bucket, key=layout.content_analysis_key(job_id))
            if CONTENT_ANALYSIS in job_level(engine)
            else None,
            output=ObjectRef(bucket=manifest_ref.bucket, key=manifest.output),
            work_bucket=self.config.work_bucket,
            priority=manifest.priority,
            engine=engine,
            quality=manifest.quality,
            options=manifest.options,
            video=video,
            encoder=settings,
            segment_count=len(plan),
            frame_count=frames.frames,
            timeline=frames,
            submitted_at=submitted_at,
            fleet_workers=fleet_workers,
            run=run,
        )
        return context, bytes_read

    def _plan(self, frames: Timeline, engine: str) -> tuple[tuple[Segment, ...], int]:
        """The job's segments over its range, and the fleet they were sized for (0: the fixed plan)."""
        fps = frames.source_fps
        if not self.config.fleet_max_workers:
            return plan_segments(frames.frames, fps, self.config.segments, frames.start), 0
        fleet = fleet_view(self.storage, self.config.work_bucket, self.config.fleet_max_workers, time.time())
        plan = plan_for_fleet(frames.frames, fps, engine_cost(engine), fleet, self.config.sizing, frames.start)
        logger.info("plan of %s segments for a fleet of %s (%s running)", len(plan), fleet.workers, fleet.running)
        return plan, fleet.workers

    def _media_refs(self, manifest: Manifest, bucket: str) -> dict[str, list[ObjectRef]]:
        """HEAD every referenced object; report all the missing ones together."""
        named = {
            "sources": list(manifest.source),
            "target": [manifest.target],
            "reference": [manifest.reference] if manifest.reference else [],
        }
        refs: dict[str, list[ObjectRef]] = {name: [] for name in named}
        missing = []
        for name, keys in named.items():
            for key in keys:
                try:
                    info = self.storage.head(bucket, key)
                except ObjectMissing:
                    missing.append(f"{name if name != 'sources' else 'source'}: s3://{bucket}/{key} does not exist")
                    continue
                refs[name].append(ObjectRef(bucket=bucket, key=key, etag=info.etag, size=info.size))
        if missing:
            raise JobRejected("the manifest names objects that do not exist: " + "; ".join(missing), tuple(missing))
        return refs

    def _check_sources(
        self, sources: list[ObjectRef], reference: ObjectRef | None
    ) -> tuple[list[ObjectRef], AudioSource | None, list[SourceKind]]:
        """Sniff every source (a face image or an audio file) and check each as what it is; report all the
        bad ones together. Returns the face images, the audio source and each source's kind, in order."""
        refused: list[InputRejected] = []
        images: list[ObjectRef] = []
        audio: AudioSource | None = None
        kinds: list[SourceKind] = []
        for index, ref in enumerate(sources):
            what = f"source[{index}] {ref.key!r}"
            try:
                head = self.storage.get_range(ref.bucket, ref.key, 0, min(SNIFF_BYTES, ref.size))
                if sniff_source(head, what) == "image":
                    check_image(self.storage.get_bytes(ref.bucket, ref.key), what, self.config.limits)
                    images.append(ref)
                    kinds.append("image")
                else:
                    info = probe_audio(self._reader(ref, what), what, self.config.limits)
                    audio = audio or AudioSource(file=ref, info=info)  # FaceFusion hears the first
                    kinds.append("audio")
            except InputRejected as rejection:
                refused.append(rejection)
        if reference:
            what = f"reference {reference.key!r}"
            try:
                check_image(self.storage.get_bytes(reference.bucket, reference.key), what, self.config.limits)
            except InputRejected as rejection:
                refused.append(rejection)
        if len(refused) == 1:
            raise refused[0]
        if refused:
            problems = tuple(problem for rejection in refused for problem in rejection.problems)
            raise InputRejected("; ".join(rejection.reason for rejection in refused), problems)
        return images, audio, kinds

    def _reader(self, ref: ObjectRef, what: str) -> RangeReader:
        return RangeReader(
            S3RangeSource(self.storage, ref.bucket, ref.key, ref.size), what=what,
            deadline_s=self.config.limits.probe_timeout_s,
        )  # fmt: skip

    def _reference_frame(
        self, job_id: str, manifest: Manifest, target: ObjectRef, video: VideoInfo
    ) -> ObjectRef | None:
        """Decode the job's reference frame once and store it beside the job (None when the job needs none)."""
        index = reference_frame_wanted(manifest.options, manifest.reference is not None)
        if index is None:
            return None
        problem = reference_frame_problem(index, video.frame_count)
        if problem:
            raise invalid_manifest([problem])
        reader = RangeReader(
            S3RangeSource(self.storage, target.bucket, target.key, target.size),
            what=f"target {target.key!r}",
            deadline_s=self.config.limits.probe_timeout_s,
        )
        try:
            image = frame_at(reader, video, index, f"target {target.key!r}")
        except MediaError as error:
            raise InputRejected(f"the reference frame {index} could not be decoded: {error.reason}") from error
        key = layout.reference_frame_key(job_id)
        data = encode_png(image)
        etag = self.storage.put_bytes(self.config.work_bucket, key, data, "image/png")
        return ObjectRef(bucket=self.config.work_bucket, key=key, etag=etag, size=len(data))

    def _probe(self, target: ObjectRef) -> tuple[VideoInfo, int]:
        reader = self._reader(target, f"target {target.key!r}")
        return probe_video(reader, f"target {target.key!r}", self.config.limits), reader.bytes_fetched

    def _reject(self, job_id: str, manifest_ref: ObjectRef, rejection: JobRejected, uploaded: datetime) -> SliceOutcome:
        """`uploaded`: the manifest's upload, which ranks the job's index entry (as it does once it starts)."""
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
        summary.index_entry(self.storage, self.config.work_bucket, job_id, int(uploaded.timestamp() * 1000))
        self.notifier.publish(self.config.topic_arn, notice_subject(job_id, "failed"), notice)
        put_json(self.storage, self.config.work_bucket, record_key, {**notice, "notified": True})
        return SliceOutcome("rejected", job_id, reason=rejection.reason)


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
