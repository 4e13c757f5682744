"""Render one segment: decode its frames from S3 ranges, run the engine, encode, check, upload."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import cv2

from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.storage import S3Storage, Storage, get_json, put_json
from fusionfleet.errors import DeleteFailed, InputRejected, MediaError, ObjectMissing, SegmentFailed
from fusionfleet.facefusion.content_analysis import ContentVerdict, refusal_reason
from fusionfleet.jobs import summary as job_summary
from fusionfleet.jobs.states import Recorded
from fusionfleet.media.ffmpeg import concat_argv
from fusionfleet.media.gpu_media import is_nvenc
from fusionfleet.media.inspect import summarize
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.runner import run_ffmpeg
from fusionfleet.messages import AnalysisTask, JobContext, RenderTask, SegmentRecord, SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.config import HostConfig
from gpu_worker.engines.base import CarriesState, EngineError, EngineJob, EngineUnavailable, Image, LooksAhead
from gpu_worker.engines.pool import EnginePool
from gpu_worker.errors import Drained, GivenBack
from gpu_worker.lifecycle.liveness import Liveness
from gpu_worker.rendering.checkpoints import Checkpoints
from gpu_worker.rendering.commit import commit, drop_output, result_of, winner
from gpu_worker.rendering.decode_ahead import DecodeAhead
from gpu_worker.rendering.encoded_segment import Finish, RenderedFrames
from gpu_worker.rendering.faults import FaultyEngine
from gpu_worker.rendering.faults import load as load_faults
from gpu_worker.rendering.frames import LEAD_IN_FRAMES, Carry, PendingRange, chunk_grid, start_range
from gpu_worker.rendering.job_analysis import analyse_job, job_content_verdict, job_voice
from gpu_worker.rendering.media_probe import GpuMedia, probe_gpu_media
from gpu_worker.rendering.prefetch import Prefetcher, target_reader
from gpu_worker.rendering.sources import AudioSources, SourceCache
from gpu_worker.rendering.stills import STILL_SUFFIX, render_still

logger = logging.getLogger(__name__)


@dataclass
class RenderDeps:
    storage: Storage
    engines: EnginePool
    sources: SourceCache
    limits: MediaLimits
    scratch: Path
    worker_id: str
    cpu_threads: int = 0
    faults_file: Path | None = None
    # Starts the next segment's decoder while this one renders (gpu_worker.rendering.prefetch); None: never.
    prefetch: Prefetcher | None = None
    # What this worker decodes and encodes on the GPU (gpu_worker.rendering.media_probe); the CPU by default.
    media: GpuMedia = field(default_factory=GpuMedia)
    audio: AudioSources | None = None  # each job's audio source on disk (None: built on first use)
    # The render loop's liveness record for the container's health check (lifecycle/liveness.py); None: off.
    liveness: Liveness | None = None


def build_render_deps(config: HostConfig) -> RenderDeps:
    """The render dependencies a process builds for itself (the engine child, or an inline worker)."""
    if config.cpu_threads:
        # Several workers share a host's cores: each keeps to its share.
        cv2.setNumThreads(config.cpu_threads)
    storage = S3Storage(AwsTarget(region=config.region, endpoint_url=config.endpoint_url).client("s3"))
    limits = MediaLimits()
    config.scratch.mkdir(parents=True, exist_ok=True)
    media = probe_gpu_media(config.scratch)
    liveness = Liveness(config.liveness_file) if config.liveness_file is not None else None
    if liveness is not None:
        liveness.starting()  # idle once its engine is loaded (the engine process, or the worker inline)
    return RenderDeps(
        storage,
        EnginePool(dict(config.engine_env)),
        SourceCache(storage, limits),
        limits,
        config.scratch,
        config.worker_name,
        config.cpu_threads,
        config.faults_file,
        Prefetcher(storage, LEAD_IN_FRAMES, config.cpu_threads, media.hwaccel()),
        media,
        liveness=liveness,
    )


@contextlib.contextmanager
def busy(liveness: Liveness | None, analysing: bool = False) -> Iterator[None]:
    """The render loop's phase around one request: rendering (each frame renews it) or analysing, then idle."""
    if liveness is not None and analysing:
        liveness.analysing()
    elif liveness is not None:
        liveness.rendering()
    try:
        yield
    finally:
        if liveness is not None:
            liveness.idle()


class InlineRenderer:
    """Renders in the worker's own process: no isolation from the engine; for tests and debugging."""

    def __init__(self, deps: RenderDeps) -> None:
        self.deps = deps

    def render(self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event) -> Finish:
        with busy(self.deps.liveness):
            try:
                done = start_frames(task, self.deps, cancel, attempt, stopping)
            except Drained as stopped:
                raise GivenBack(
                    f"segment {task.segment.index} of {task.job.job_id}: checkpointed before frame {stopped.next_frame}"
                ) from stopped
        # The encoder's tail is waited for in the finish, which may run beside the next segment's engine.
        return lambda: finish_segment(done.settle(), self.deps.storage, self.deps.worker_id, attempt).output

    def expect(self, task: RenderTask) -> None:
        """`task` is this worker's next: start decoding it now (gpu_worker.rendering.prefetch)."""
        if self.deps.prefetch is not None:
            self.deps.prefetch.prepare(task)

    def analyse(
        self, task: AnalysisTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> ContentVerdict:
        deps = self.deps
        job = task.job
        with busy(deps.liveness, analysing=True):
            return analyse_job(
                deps.storage, deps.engines, job, deps.cpu_threads, deps.worker_id, lambda: job_audio(deps, job)
            )

    def close(self) -> None:
        if self.deps.prefetch is not None:
            self.deps.prefetch.close()
        self.deps.engines.close()


@dataclass(frozen=True)
class RenderResult:
    output: SegmentResult
    record: SegmentRecord


@dataclass(frozen=True)
class EngineDone:
    """A segment whose engine part is done; its encoder may still be encoding and saving the last
    chunks (`tail`), so the engine can start the next segment meanwhile."""

    frames: RenderedFrames
    tail: PendingRange | None = None

    def settle(self) -> RenderedFrames:
        """Wait for the encoder: the frames with every chunk on disk and the render's stages complete.
        On the encoder's failure the work folder goes (nothing of it is finished)."""
        if self.tail is None:
            return self.frames
        try:
            stats = self.tail.settle()
        except BaseException:
            shutil.rmtree(self.frames.workdir, ignore_errors=True)
            raise
        return replace(self.frames, stages=tuple(stats.stages.items()))


def start_frames(
    task: RenderTask,
    deps: RenderDeps,
    cancel: threading.Event,
    attempt: Attempt,
    drain: threading.Event | None = None,
) -> EngineDone:
    """The engine's part: render the chunks no earlier attempt saved into a work folder of their own, returning
    when the engine has made the last frame (the encoder may still be busy; `settle()` waits for it)."""
    job, segment = task.job, task.segment
    started_at = time.time()
    engine = analyser = deps.engines.get(job.engine)
    faults = load_faults(deps.faults_file, job.job_id, segment.index, attempt.number, task.copy_number)
    if faults:
        engine = FaultyEngine(engine, faults, segment.start_frame)
    sources, reference = deps.sources.get(job)
    reference_is_frame = job.reference is None and job.reference_frame is not None
    workdir = Path(tempfile.mkdtemp(prefix=f"{job.job_id[:40]}-{segment.index:05d}-", dir=deps.scratch))
    what = f"segment {segment.index} of {job.job_id}"
    ahead: DecodeAhead | None = None
    try:
        # Job-level: FaceFusion's verdict over the whole video, made once, never per segment.
        verdict = job_content_verdict(deps.storage, job, analyser, deps.cpu_threads)
        if verdict is not None and verdict.refused:
            raise InputRejected(refusal_reason(verdict))
        audio = job_audio(deps, job)
        engine_job = EngineJob(
            job_id=job.job_id,
            sources=sources,
            options=MappingProxyType(dict(job.options)),
            quality=job.quality,
            reference=reference,
            reference_is_frame=reference_is_frame,
            fps=float(job.video.fps),
            work_dir=workdir,
            content_decided=verdict is not None,
            audio=audio,
            voice=job_voice(deps.storage, job, audio),  # extracted once by the job's analysis step
            timeline=job.frames,
            people=deps.sources.people(job),
            # FaceFusion's matte kept as the output's alpha (decided at planning, fusionfleet.jobs.encoding)
            alpha=job.image.alpha if job.image is not None else job.encoder.alpha,
        )
        try:
            engine.validate(engine_job)
        except EngineError as error:
            if isinstance(error, EngineUnavailable):
                raise
            # The job's inputs cannot work with this engine: the same on every attempt.
            raise InputRejected(error.reason) from error
        if job.renders_stills:
            # One picture: nothing to checkpoint or resume (gpu_worker.rendering.stills).
            reader = target_reader(deps.storage, task)
            # A test render's frame sees the tracker's lead-out as the full render's frame does.
            looked = analyser.lead_out_frames(engine_job) if isinstance(analyser, LooksAhead) else 0
            still = render_still(
                engine, engine_job, task, deps.storage, reader, deps.limits, workdir, cancel, what, lead_out=looked
            )
            span = (segment.start_frame, segment.end_frame)
            return EngineDone(RenderedFrames(
                task=task, workdir=workdir, grid=(span,), resumed_from=-1, frames_rendered=still.frames_fed,
                engine_s=still.engine_s, started_at=started_at, rendered_at=time.time(),
                bytes_read=reader.bytes_fetched, suffix=STILL_SUFFIX,
            ))  # fmt: skip
        if is_nvenc(job.encoder.codec) and not deps.media.encode:
            # The job's encoder is fixed for all its segments: another worker renders this one.
            raise SegmentFailed(
                f"{what}: this worker cannot encode with {job.encoder.codec} ({deps.media.encode_why}); "
                "the job's segments must all come from the same encoder"
            )
        grid = chunk_grid(segment.start_frame, segment.end_frame, job.encoder.chunk_frames or None, job.frames)
        checkpoints = Checkpoints(deps.storage, job.work_bucket, job.job_id, segment.index)
        saved = checkpoints.restore_with_state(grid, workdir, analyser.name, job.frames.output_frames)
        restored = saved.chunks
        remaining = grid[len(restored) :]
        carry = None
        if isinstance(analyser, CarriesState):
            name = analyser.name

            def save_state(first: int, end: int, state: bytes) -> None:
                if end < segment.end_frame:
                    checkpoints.save_state(name, first, end, state)

            carry = Carry(analyser, save_state, saved.state)
        if restored:
            logger.info(
                "%s: resuming at frame %s (%s chunks saved earlier)",
                what,
                remaining[0][0] if remaining else segment.end_frame,
                len(restored),
            )
        # The decoder started while the segment before this one rendered, when there was one.
        ahead = deps.prefetch.take(task) if deps.prefetch is not None else None
        reader = ahead.reader if ahead is not None else target_reader(deps.storage, task)

        def save_chunk(path: Path, first: int, end: int) -> None:
            # The segment's last chunk is not checkpointed: the whole segment is uploaded right after it
            # (and its checkpoints cleared), so saving it too would only keep the engine from the next one.
            if end < segment.end_frame:
                checkpoints.save(path, first, end)

        lead_out = analyser.lead_out_frames(engine_job) if isinstance(analyser, LooksAhead) else 0
        tail = None
        if remaining:
            tail = start_range(
                engine, engine_job, reader, job.video, remaining, job.encoder, workdir, cancel, what,
                on_chunk=save_chunk, drain=drain, decode_threads=deps.cpu_threads, carry=carry,
                on_preview=lambda image: write_preview(deps.storage, job.work_bucket, job.job_id, image), ahead=ahead,
                hwaccel=deps.media.hwaccel(), lead_out=lead_out, timeline=job.frames,
                on_frame=deps.liveness.advanced if deps.liveness is not None else None,  # the health check's sign
            )  # fmt: skip
        elif ahead is not None:
            ahead.close()
        frames = RenderedFrames(
            task=task,
            workdir=workdir,
            grid=tuple(grid),
            resumed_from=remaining[0][0] if restored and remaining else (segment.end_frame if restored else -1),
            frames_rendered=sum(end - first for first, end in remaining),
            engine_s=tail.engine_s if tail is not None else 0.0,
            started_at=started_at,
            rendered_at=time.time(),
            bytes_read=reader.bytes_fetched,
        )
        return EngineDone(frames, tail)
    except BaseException:
        if ahead is not None:
            ahead.close()  # (closed already when the render adopted it: closing twice is harmless)
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def _audio_sources(deps: RenderDeps) -> AudioSources:
    if deps.audio is None:
        deps.audio = AudioSources(deps.storage)
    return deps.audio


def job_audio(deps: RenderDeps, job: JobContext) -> Path | None:
    """The job's audio source on this worker's disk (None: it has none)."""
    return _audio_sources(deps).get(job, deps.scratch)


def finish_segment(frames: RenderedFrames, storage: Storage, worker: str, attempt: Attempt) -> RenderResult:
    """Join the chunks, check the segment, upload it and commit its record; the work folder goes either way.

    No engine is needed, so a worker may run this while its engine renders the next segment
    (gpu_worker.delivery.lookahead).
    """
    task = frames.task
    job, segment = task.job, task.segment
    what = f"segment {segment.index} of {job.job_id}"
    began = time.monotonic()
    try:
        parts = [frames.workdir / f"{first:07d}-{end:07d}.{frames.suffix}" for first, end in frames.grid]
        output_path = _join(parts, frames.workdir, what, job.encoder.codec)
        summary = (
            _check_still(output_path, task) if frames.suffix == STILL_SUFFIX else _check_segment(output_path, task)
        )
        earlier = winner(storage, job.work_bucket, job.job_id, segment.index, job.run)
        if earlier is not None:
            # The other copy finished while this one rendered: nothing of this one is uploaded.
            logger.info("%s: copy %s finished first; this copy's output is dropped", what, earlier.copy_number)
            return RenderResult(output=result_of(earlier), record=earlier)
        key = layout.copy_segment_key(job.job_id, segment.index, task.copy_number, frames.suffix, attempt.number)
        storage.upload_file(
            job.work_bucket, key, output_path, "image/png" if frames.suffix == STILL_SUFFIX else "video/mp4"
        )
        finished_at = time.time()
        record = SegmentRecord(
            job_id=job.job_id,
            index=segment.index,
            status=Recorded.SUCCEEDED,
            frames=summary,
            key=key,
            attempt=attempt.number,
            worker=worker,
            resumed_from=frames.resumed_from,
            frames_rendered=frames.frames_rendered,
            queued_s=attempt.queued_s,
            engine_s=round(frames.engine_s, 3),
            total_s=round(finished_at - frames.started_at, 3),
            started_at=frames.started_at,
            finished_at=finished_at,
            copy_number=task.copy_number,
            rendered_at=frames.rendered_at,
            stages=dict(frames.stages),
            bytes_read=frames.bytes_read,
        )
        committed = commit(storage, job.work_bucket, job.run, record)
        if committed.key != key:
            # Another copy, or another delivery of this one, committed first: its result is the answer.
            logger.info(
                "%s: copy %s (attempt %s) committed first; this output is dropped",
                what, committed.copy_number, committed.attempt,
            )  # fmt: skip
            drop_output(
                storage, job.work_bucket, job.job_id, segment.index, task.copy_number, committed, attempt.number
            )
            return RenderResult(output=result_of(committed), record=committed)
        try:
            Checkpoints(storage, job.work_bucket, job.job_id, segment.index).clear()
        except DeleteFailed as error:
            # The segment is rendered and recorded: leftover chunks cost storage (the work prefix's
            # lifecycle rule removes them), never the segment. Said loudly, with the keys.
            logger.error("%s: rendered, but its checkpoints stay: %s", what, error.reason)
        logger.info(
            "%s: %s frames in %.2f s (engine %.2f s, finish %.2f s, %s frames rendered, read %s bytes; stages: %s)",
            what, summary, record.total_s, frames.engine_s, time.monotonic() - began, record.frames_rendered,
            frames.bytes_read, ", ".join(f"{name} {seconds:.2f}" for name, seconds in frames.stages if seconds),
        )  # fmt: skip
        return RenderResult(output=result_of(record), record=record)
    finally:
        shutil.rmtree(frames.workdir, ignore_errors=True)


PREVIEW_WIDTH = 320
PREVIEW_QUALITY = 80


def preview_jpeg(image: Image, width: int = PREVIEW_WIDTH) -> bytes:
    """One frame as a small JPEG (at most `width` pixels wide), for the dashboard's preview."""
    height, current = image.shape[:2]
    small: Any = image
    if current > width:
        small = cv2.resize(image, (width, max(1, round(height * width / current))), interpolation=cv2.INTER_AREA)
    ok, encoded = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, PREVIEW_QUALITY])
    if not ok:
        raise MediaError("the preview frame could not be encoded as JPEG")
    return bytes(encoded.tobytes())


def write_preview(storage: Storage, bucket: str, job_id: str, image: Image) -> None:
    """The job's latest rendered frame, overwritten after each chunk; a failure never fails the render."""
    try:
        storage.put_bytes(bucket, layout.frame_preview_key(job_id), preview_jpeg(image), "image/jpeg")
    except Exception:
        logger.warning("preview of %s not written", job_id, exc_info=True)


def _join(parts: list[Path], workdir: Path, what: str, codec: str) -> Path:
    """One chunk is the segment; several are joined by stream copy (in the container `codec`'s segments use)."""
    if len(parts) == 1:
        return parts[0]
    listing = workdir / "chunks.txt"
    listing.write_text("".join(f"file '{part.name}'\n" for part in parts))
    output = workdir / "segment.mp4"
    run_ffmpeg(concat_argv(listing, output, codec), timeout_s=300, what=f"{what}: joining chunks")
    return output


def _check_segment(path: Path, task: RenderTask) -> int:
    """Decodable, exactly the planned frame count, the job's size: or the attempt fails."""
    try:
        summary = summarize(path)
    except MediaError as error:
        raise SegmentFailed(f"segment {task.segment.index} does not decode: {error.reason}") from error
    expected = task.job.output_frames(task.segment)
    if summary.frame_count != expected:
        raise SegmentFailed(f"segment {task.segment.index} has {summary.frame_count} frames, planned {expected}")
    settings = task.job.encoder
    if (summary.width, summary.height) != (settings.width, settings.height):
        raise SegmentFailed(
            f"segment {task.segment.index} is {summary.width}×{summary.height}, "
            f"the job's size is {settings.width}×{settings.height}"
        )
    return summary.frame_count


def _check_still(path: Path, task: RenderTask) -> int:
    """A picture of the size the job renders at: or the attempt fails."""
    picture = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if picture is None:
        raise SegmentFailed(f"segment {task.segment.index}: its picture does not decode")
    job = task.job
    expected = job.image.work_size if job.image is not None else job.video.display_size
    if (picture.shape[1], picture.shape[0]) != expected:
        raise SegmentFailed(
            f"segment {task.segment.index} is {picture.shape[1]}×{picture.shape[0]}, the job's size is "
            f"{expected[0]}×{expected[1]}"
        )
    return 1


def record_failure(storage: Storage, task: RenderTask, error: str, reason: str, attempt: int, worker: str) -> None:
    """The merge gate reads this when the segment never succeeds.

    A success already recorded by another delivery of the same segment is never overwritten.
    """
    key = layout.segment_record_key(task.job.job_id, task.segment.index)
    try:
        if get_json(storage, task.job.work_bucket, key).get("status") == Recorded.SUCCEEDED:
            return
    except ObjectMissing:
        pass
    record = SegmentRecord(
        job_id=task.job.job_id,
        index=task.segment.index,
        status=Recorded.FAILED,
        error=error,
        reason=reason,
        attempt=attempt,
        worker=worker,
    )
    put_json(storage, task.job.work_bucket, key, record.model_dump())
    change = job_summary.segment_failed(task.segment.index, worker, attempt)
    job_summary.try_update(storage, task.job.work_bucket, task.job.job_id, change)
