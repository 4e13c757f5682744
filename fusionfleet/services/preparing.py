"""One job prepared from its manifest: media checked, target probed, job-level decisions made, plan written.

The slicer's part of a job that reads media (`fusionfleet.services.slicing` decides whether a manifest
starts anything; a batch's items are prepared the same way, one by one). A target is a video or an
image, told apart by its bytes: an image goes through the same path as a one-segment video (its plan
is one frame; `fusionfleet.jobs.image_output` decides its output), and a test render's plan is its
frames (`fusionfleet.jobs.trial`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from fusionfleet import layout
from fusionfleet.adapters.storage import S3RangeSource, Storage, put_json
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.errors import InputRejected, JobRejected, MediaError, ObjectMissing
from fusionfleet.facefusion.reference import reference_frame_problem, reference_frame_wanted
from fusionfleet.facefusion.requirements import SourceKind, alpha_problems, target_workflow_problems
from fusionfleet.fleet.presence import fleet_view
from fusionfleet.fleet.tenant_settings import TenantSettings
from fusionfleet.jobs.decisions import CONTENT_ANALYSIS, context_frames, job_level
from fusionfleet.jobs.encoding import encoder_settings, output_size_problem
from fusionfleet.jobs.engine_options import check_engine_options, check_sources, faces_problem, selects_faces
from fusionfleet.jobs.image_output import (
    ImageOutput,
    image_output,
    image_output_problem,
    output_kind_problem,
    output_suffix,
)
from fusionfleet.jobs.manifest import Manifest, PlanRequest, invalid_manifest
from fusionfleet.jobs.output_format import DEFAULT_CONTAINER, container_of_key, default_video_suffix
from fusionfleet.jobs.plan import Segment, cut_at_frames, cut_segments, plan_segments, requested_plan_problem
from fusionfleet.jobs.sizing import engine_cost, plan_for_fleet
from fusionfleet.jobs.timeline import Timeline, timeline, trim_problem
from fusionfleet.jobs.trial import frames_problem, spread_frames, trial_plan, trimmed_frames_problem
from fusionfleet.media.image import check_image, image_as_video
from fusionfleet.media.probe import VideoInfo, probe_video
from fusionfleet.media.ranges import RangeReader
from fusionfleet.media.sniff import IMAGE, SNIFF_BYTES, sniff_source, sniff_target
from fusionfleet.media.source_audio import probe_audio
from fusionfleet.media.still import encode_png, frame_at
from fusionfleet.messages import AudioSource, BatchItem, FaceRef, JobContext, ObjectRef
from fusionfleet.webhooks.events import EVENT_KINDS, WebhookSubscription
from fusionfleet.webhooks.outbox import write_subscription

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """What the target turned out to be: a video, or an image as a one-frame video."""

    ref: ObjectRef
    video: VideoInfo
    image_format: str | None  # None: a video
    bytes_read: int


@dataclass(frozen=True)
class JobPreparer:
    storage: Storage
    config: SlicerEnvironment

    def prepare(
        self,
        job_id: str,
        manifest: Manifest,
        manifest_ref: ObjectRef,
        submitted_at: str,
        run: int = 0,
        batch: BatchItem | None = None,
        output_stem: str | None = None,
        tenant_settings: TenantSettings | None = None,
    ) -> tuple[JobContext, int]:
        """The job's context (its plan written beside it) and how many bytes of the target were read.

        `output_stem`: a batch item's output key but its extension, which follows the target's kind."""
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
        if problem := faces_problem(engine, manifest.faces):
            raise invalid_manifest([problem])
        bucket = manifest_ref.bucket
        named: list[tuple[str, str]] = [("source", key) for key in manifest.all_sources]
        named.append(("target", manifest.target))
        if manifest.reference:
            named.append(("reference", manifest.reference))
        named += [(f"faces[{i}].reference", face.reference) for i, face in enumerate(manifest.faces) if face.reference]
        # Every object HEADed at once, so a rejection names all the missing ones.
        found = self._refs(bucket, named)
        sources, target_ref = found[: len(manifest.all_sources)], found[len(manifest.all_sources)]
        rest = iter(found[len(manifest.all_sources) + 1 :])
        reference = next(rest) if manifest.reference else None
        face_images = {index: next(rest) for index, face in enumerate(manifest.faces) if face.reference}
        # The sources first: a bad one is cheaper to find than a probe of the target.
        images, audio, kinds = self._check_sources(
            sources, [("reference", reference)] if reference else [], face_images
        )
        check_sources(engine, manifest.options, kinds)
        target = self._target(target_ref)
        # A video's output keeps the target's container (as FaceFusion's does), where the farm writes it.
        suffix = (
            output_suffix(target.ref.key, target.image_format)
            if target.image_format
            else default_video_suffix(target.ref.key)
        )
        output_key = manifest.output or (
            f"{output_stem}{suffix}" if output_stem else layout.default_output_key(manifest_ref.key, suffix)
        )
        if engine == "facefusion" and (
            mismatch := target_workflow_problems(manifest.options, target.image_format is not None)
        ):
            raise invalid_manifest(mismatch)
        problem = frames_problem(manifest.frames, target.video.frame_count) if manifest.frames else None
        if manifest.is_try and target.image_format:
            problem = "frames: a test render renders frames of a video; an image target is rendered whole"
        if problem:
            raise invalid_manifest([problem])
        # A test render's output is a prefix of pictures (checked with the manifest), never the video's MP4.
        image = None if manifest.is_try else self._image_output(manifest, target, output_key)
        video = target.video
        trimmed = trim_problem(manifest.options, video.frame_count)
        if trimmed:
            raise invalid_manifest([trimmed])
        frames = timeline(manifest.options, video.frame_count, video.fps)
        if manifest.frames and (problem := trimmed_frames_problem(manifest.frames, frames.start, frames.end)):
            raise invalid_manifest([problem])
        # The frames a test render renders: those asked, or (a poster strip) spread over the frames it would.
        wanted = manifest.frames or spread_frames(manifest.spread_frames, frames.start, frames.end)
        reference_frame = None
        if selects_faces(engine) and not manifest.faces:
            reference_frame = self._reference_frame(job_id, manifest, target)
        faces = self._faces(job_id, manifest, target, face_images)
        full_plan, fleet_workers = self._plan(frames, engine, manifest.plan)
        plan = full_plan
        if wanted:
            # Each frame from the frames its engine's output for it depends on (its segment's start for one
            # that carries state): a test render answers in the time of a few frames, not of a segment.
            needed = context_frames(engine, manifest.options)
            plan = trial_plan(wanted, full_plan, video.fps_num, video.fps_den, needed)
        width, height = video.display_size
        settings = encoder_settings(
            width, height, frames.output_fps, manifest.options, max(s.frame_count for s in full_plan),
            self.config.encoder_threads, self.config.video_encoder_device, engine,
            (container_of_key(output_key) if target.image_format is None else None) or DEFAULT_CONTAINER,
        )  # fmt: skip
        if problem := output_size_problem(settings.width, settings.height):
            raise invalid_manifest([problem])
        if engine == "facefusion" and (
            alpha := alpha_problems(
                manifest.options,
                settings.codec if target.image_format is None else None,
                (target.image_format, image.format) if target.image_format and image is not None else None,
            )
        ):
            raise invalid_manifest(alpha)
        put_json(self.storage, self.config.work_bucket, layout.plan_key(job_id), [s.to_dict() for s in plan])
        context = JobContext(
            job_id=job_id,
            tenant=layout.tenant_of(manifest_ref.key),
            manifest=manifest_ref,
            sources=tuple(images),
            audio=audio,
            target=target.ref,
            reference=reference,
            reference_frame=reference_frame,
            content_analysis=ObjectRef(bucket=self.config.work_bucket, key=layout.content_analysis_key(job_id))
            if CONTENT_ANALYSIS in job_level(engine)
            else None,
            output=ObjectRef(bucket=bucket, key=output_key),
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
            image=image,
            trial_frames=wanted,
            faces=faces,
            batch=batch,
        )
        return context, target.bytes_read

    # ------------------------------------------------------------------ the target
    def _target(self, ref: ObjectRef) -> Target:
        what = f"target {ref.key!r}"
        reader = RangeReader(
            S3RangeSource(self.storage, ref.bucket, ref.key, ref.size),
            what=what,
            deadline_s=self.config.limits.probe_timeout_s,
        )
        if ref.size == 0:
            raise InputRejected(f"{what} is empty (0 bytes)")
        kind, _format = sniff_target(reader.head(SNIFF_BYTES), what)
        if kind == IMAGE:
            limits = self.config.limits
            if ref.size > limits.max_image_bytes:
                raise InputRejected(f"{what} is {ref.size} bytes, over the limit of {limits.max_image_bytes} bytes")
            info = check_image(self.storage.get_bytes(ref.bucket, ref.key), what, limits)
            return Target(ref, image_as_video(info, ref.size), info.format, ref.size)
        reader.seek(0)
        video = probe_video(reader, what, self.config.limits)
        return Target(ref, video, None, reader.bytes_fetched)

    def _image_output(self, manifest: Manifest, target: Target, output_key: str) -> ImageOutput | None:
        kind_problem = output_kind_problem("image" if target.image_format else "video", output_key)
        if kind_problem:
            raise invalid_manifest([kind_problem])
        if target.image_format is None:
            return None
        size = (target.video.width, target.video.height)
        scale_problem = image_output_problem(size, manifest.options)
        if scale_problem:
            raise invalid_manifest([scale_problem])
        return image_output(target.image_format, size, manifest.options, output_key)

    def _plan(self, frames: Timeline, engine: str, asked: PlanRequest | None = None) -> tuple[tuple[Segment, ...], int]:
        """The job's segments over its range, and the fleet they were sized for (0: a fixed or asked-for plan)."""
        fps = frames.source_fps
        if asked is not None and (asked.segments is not None or asked.cut_at):
            problem = requested_plan_problem(asked.segments, asked.cut_at, frames.frames, frames.start)
            if problem:
                raise invalid_manifest([problem])
            if asked.cut_at:
                return cut_at_frames(asked.cut_at, frames.frames, fps, frames.start), 0
            assert asked.segments is not None
            return cut_segments(frames.frames, fps, asked.segments, frames.start), 0
        if not self.config.fleet_max_workers or frames.frames == 1:
            return plan_segments(frames.frames, fps, self.config.segments, frames.start), 0
        fleet = fleet_view(self.storage, self.config.work_bucket, self.config.fleet_max_workers, time.time())
        plan = plan_for_fleet(frames.frames, fps, engine_cost(engine), fleet, self.config.sizing, frames.start)
        logger.info("plan of %s segments for a fleet of %s (%s running)", len(plan), fleet.workers, fleet.running)
        return plan, fleet.workers

    # ------------------------------------------------------------------ inputs and references
    def _refs(self, bucket: str, named: list[tuple[str, str]]) -> list[ObjectRef]:
        """HEAD every named object, in order; report all the missing ones together."""
        refs: list[ObjectRef] = []
        missing = []
        for name, key in named:
            try:
                info = self.storage.head(bucket, key)
            except ObjectMissing:
                missing.append(f"{name}: s3://{bucket}/{key} does not exist")
                continue
            refs.append(ObjectRef(bucket=bucket, key=key, etag=info.etag, size=info.size))
        if missing:
            raise JobRejected("the manifest names objects that do not exist: " + "; ".join(missing), tuple(missing))
        return refs

    def _check_sources(
        self, sources: list[ObjectRef], others: list[tuple[str, ObjectRef]], face_images: dict[int, ObjectRef]
    ) -> tuple[list[ObjectRef], AudioSource | None, list[SourceKind]]:
        """Sniff every source (a face image or an audio file for the lip syncer) and check each as what it
        is, and every reference image; report all the bad ones together. Returns the face images, the audio
        source (FaceFusion hears the first) and each source's kind, in order."""
        images: list[ObjectRef] = []
        audio: AudioSource | None = None
        kinds: list[SourceKind] = []
        refused: list[InputRejected] = []
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
                    audio = audio or AudioSource(file=ref, info=info)
                    kinds.append("audio")
            except InputRejected as rejection:
                refused.append(rejection)
        named = [(f"{name} {ref.key!r}", ref) for name, ref in others]
        named += [(f"faces[{index}].reference {ref.key!r}", ref) for index, ref in face_images.items()]
        for what, image in named:
            try:
                check_image(self.storage.get_bytes(image.bucket, image.key), what, self.config.limits)
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

    def _reference_frame(self, job_id: str, manifest: Manifest, target: Target) -> ObjectRef | None:
        """Decode the job's reference frame once and store it beside the job (None when the job needs none).

        For an image target FaceFusion takes the reference face from the image itself."""
        index = reference_frame_wanted(manifest.options, manifest.reference is not None)
        if index is None:
            return None
        return self._frame_png(job_id, target, 0 if target.image_format else index, layout.reference_frame_key(job_id))

    def _faces(
        self, job_id: str, manifest: Manifest, target: Target, face_images: dict[int, ObjectRef]
    ) -> tuple[FaceRef, ...]:
        """Each person's sources and reference face; a reference frame is decoded once, here, for every segment."""
        faces = []
        first = 0
        for index, face in enumerate(manifest.faces):
            sources = tuple(range(first, first + len(face.source)))
            first += len(face.source)
            if face.reference_frame is None:
                faces.append(
                    FaceRef(sources=sources, reference=face_images[index], position=face.reference_face_position,
                            options=face.options)
                )  # fmt: skip
                continue
            frame = face.reference_frame
            if target.image_format and frame != 0:
                raise invalid_manifest([f"faces[{index}].reference_frame: an image target has one frame, 0"])
            ref = self._frame_png(job_id, target, frame, layout.face_reference_key(job_id, index), f"faces[{index}]")
            faces.append(FaceRef(sources=sources, reference=ref, position=face.reference_face_position, frame=frame,
                                 options=face.options))  # fmt: skip
        return tuple(faces)

    def _frame_png(self, job_id: str, target: Target, index: int, key: str, field: str = "options") -> ObjectRef:
        """Frame `index` of the target, stored losslessly at `key` in the work bucket."""
        problem = reference_frame_problem(index, target.video.frame_count)
        if problem and field != "options":
            problem = (
                f"{field}.reference_frame: {index} is past the target's last frame ({target.video.frame_count - 1})"
            )
        if problem:
            raise invalid_manifest([problem])
        ref = target.ref
        reader = RangeReader(
            S3RangeSource(self.storage, ref.bucket, ref.key, ref.size),
            what=f"target {ref.key!r}",
            deadline_s=self.config.limits.probe_timeout_s,
        )
        try:
            image = frame_at(reader, target.video, index, f"target {ref.key!r}")
        except MediaError as error:
            raise InputRejected(f"the reference frame {index} could not be decoded: {error.reason}") from error
        data = encode_png(image)
        etag = self.storage.put_bytes(self.config.work_bucket, key, data, "image/png")
        return ObjectRef(bucket=self.config.work_bucket, key=key, etag=etag, size=len(data))
