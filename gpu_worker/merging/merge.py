"""The merge role: the job's gate and its last step.

It checks every planned segment's record (a Distributed Map may end SUCCEEDED with failed items on
some emulators), concatenates the segments by stream copy in plan order, muxes the original audio
once over the whole timeline (as the job's engine would: fusionfleet.jobs.audio.audio_plan),
verifies the result against the source, and uploads it.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fusionfleet import layout
from fusionfleet.adapters.links import DOWNLOAD_LINK_SECONDS
from fusionfleet.adapters.storage import S3RangeSource, Storage, get_json
from fusionfleet.errors import MediaError, ObjectMissing, SegmentFailed
from fusionfleet.jobs.attempts import read_attempts
from fusionfleet.jobs.audio import AudioCut, AudioPlan, audio_cut, audio_plan
from fusionfleet.jobs.cost import GpuPrices, job_cost
from fusionfleet.jobs.failures import segment_failure, segment_label
from fusionfleet.jobs.loss import JobFailedMarker, mark_job_failed
from fusionfleet.jobs.output_format import CONTENT_TYPES, DEFAULT_CONTAINER
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.states import Recorded
from fusionfleet.jobs.timeline import Timeline
from fusionfleet.media.ffmpeg import merge_argv
from fusionfleet.media.info import AudioInfo
from fusionfleet.media.inspect import MediaSummary, summarize
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import VideoInfo, probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.runner import run_ffmpeg
from fusionfleet.media.source_audio import copy_audio
from fusionfleet.messages import (
    AudioSource,
    JobContext,
    MergeResult,
    MergeTask,
    MergeTimings,
    OutputLocation,
    Preview,
    SegmentRecord,
)
from gpu_worker.merging.audio import extract_audio
from gpu_worker.merging.preview import render_preview

logger = logging.getLogger(__name__)


@dataclass
class MergeDeps:
    storage: Storage
    scratch: Path
    download_threads: int = 4
    # Dollars per GPU-hour by capacity type, for attempts whose worker did not stamp its own price.
    prices: GpuPrices = field(default_factory=GpuPrices)


def load_plan(storage: Storage, job: JobContext) -> list[Segment]:
    return [Segment.from_dict(item) for item in get_json(storage, job.work_bucket, layout.plan_key(job.job_id))]


def gate(storage: Storage, job: JobContext, plan: list[Segment]) -> list[SegmentRecord]:
    """Every planned segment succeeded with its planned frame count, or SegmentFailed naming each one that did not.

    Segments that failed come first, then those with no result: when a Map stops a job early (AWS
    stops its other children at the first failure) the cause is not buried under the ones it stopped.
    """
    records: list[SegmentRecord] = []
    failed: list[str] = []
    missing: list[str] = []
    # (segment, attempts) of the first that failed, else of the first with no result: the marker's.
    first_failed: tuple[int, int] | None = None
    first_missing: tuple[int, int] | None = None
    for segment in plan:
        label = segment_label(segment.index, segment.start_frame, segment.end_frame)
        try:
            record = SegmentRecord.model_validate(
                get_json(storage, job.work_bucket, layout.segment_record_key(job.job_id, segment.index))
            )
        except ObjectMissing:
            missing.append(f"{label}: no result")
            first_missing = first_missing or (segment.index, 0)
            continue
        if record.status != Recorded.SUCCEEDED:
            failed.append(segment_failure(label, record.attempt, record.error, record.reason))
            first_failed = first_failed or (segment.index, record.attempt)
        elif record.frames != job.output_frames(segment):
            failed.append(f"segment {segment.index}: {record.frames} frames, planned {job.output_frames(segment)}")
            first_failed = first_failed or (segment.index, record.attempt)
        records.append(record)
    problems = failed + missing
    if problems:
        shown = "; ".join(problems[:20]) + (f"; and {len(problems) - 20} more" if len(problems) > 20 else "")
        reason = f"{len(problems)} of {len(plan)} segments did not render: {shown}"
        segment_index, attempts = first_failed or first_missing or (None, 0)
        _mark_lost(storage, job, segment_index, attempts, reason)
        # A segment's record of its last failed attempt stays what it is: retrying the merge would only
        # hold the job's failure back until the merge task times out. A missing record may still come.
        raise SegmentFailed(reason, final=bool(failed))
    return records


def _mark_lost(storage: Storage, job: JobContext, segment: int | None, attempts: int, cause: str) -> None:
    """The gate knows the job is lost: segments of it still queued (AWS stops the Map, not the queue;
    a run's backup copies) are dropped unrendered. A marker already there (its first knower's) stands."""
    marker = JobFailedMarker(
        job_id=job.job_id, run=job.run, segment=segment, attempts=attempts, error=SegmentFailed.__name__,
        cause=cause, by="merge gate", at=time.time(),
    )  # fmt: skip
    try:
        if mark_job_failed(storage, job.work_bucket, marker):
            logger.warning("job %s marked failed by the merge gate: %s", job.job_id, cause)
    except Exception:
        # The marker only saves engine time: the job's failure still goes out with the gate's reason.
        logger.warning("job %s: failed marker not written", job.job_id, exc_info=True)


def output_keys(job: JobContext, plan: list[Segment], records: list[SegmentRecord]) -> list[str]:
    """One output per planned segment, in plan order: the key its record names (the copy that won),
    or the segment's own key for records written before copies existed. Pure."""
    named = {record.index: record.key for record in records}
    return [named.get(segment.index) or layout.segment_key(job.job_id, segment.index) for segment in plan]


def assemble(
    parts: list[Path],
    audio: Path | None,
    video: VideoInfo,
    output: Path,
    what: str,
    plan: AudioPlan | None = None,
    frames: Timeline | None = None,
    source: AudioInfo | None = None,
    container: str = DEFAULT_CONTAINER,
) -> MediaSummary:
    """Concatenate `parts` (same folder) by stream copy into `container`, mux the audio once as the job's
    audio plan says (copied, or encoded), check against the source.

    `frames`: the job's timeline (the whole target at its rate by default). `source`: `audio` is the
    job's audio source (its copy), not the target's: it replaces the target's sound, from its start.
    """
    plan = plan or AudioPlan()
    frames = frames or whole_target(video)
    workdir = parts[0].parent
    segment_list = workdir / "segments.txt"
    segment_list.write_text("".join(f"file '{part.name}'\n" for part in parts))
    offset = (min(track.start_s for track in video.audio) - video.start_s) if audio and source is None else 0.0
    codecs = [source.codec] if source is not None else [t.codec for t in video.audio]
    cut = audio_cut(frames, video.frame_count, plan, replaced=source is not None)
    run_ffmpeg(
        merge_argv(
            segment_list,
            audio,
            codecs,
            offset,
            output,
            plan=plan,
            duration_s=float(frames.duration_s),
            cut=cut,
            container=container,
        ),
        timeout_s=max(300.0, frames.output_frames() / 50),
        what=f"merge of {what}",
    )
    try:
        summary = summarize(output, decode=False)
    except MediaError as error:
        raise SegmentFailed(f"the merged video does not decode: {error.reason}") from error
    verify_output(summary, video, plan if audio is not None else AudioPlan(keep=False), frames, source, cut)
    return summary


def whole_target(video: VideoInfo) -> Timeline:
    return Timeline(0, video.frame_count, video.fps_num, video.fps_den, video.fps_num, video.fps_den, "same")


def verify_output(
    summary: MediaSummary,
    video: VideoInfo,
    plan: AudioPlan | None = None,
    frames: Timeline | None = None,
    source: AudioInfo | None = None,
    cut: AudioCut | None = None,
) -> None:
    """Frame count exact, duration within one frame, the audio tracks the plan keeps, each as long as
    the source's (or the video, where the plan cuts it so; or the part of it the job's trim keeps)."""
    plan = plan or AudioPlan()
    frames = frames or whole_target(video)
    cut = cut or (AudioCut(None, float(frames.duration_s)) if plan.cut_to_video else AudioCut())
    frame_s = 1 / float(frames.output_fps)
    expected_s = float(frames.duration_s)
    problems = []
    if summary.frame_count != frames.output_frames():
        problems.append(f"{summary.frame_count} frames, the job's are {frames.output_frames()}")
    if abs(summary.duration_s - expected_s) > frame_s + 1e-6:
        problems.append(f"lasts {summary.duration_s:.3f} s, the job's video {expected_s:.3f} s")
    if source is not None:
        available = {"the audio source": source.duration_s} if plan.keep else {}
    else:
        kept = list(video.audio[:1] if plan.first_track_only else video.audio) if plan.keep else []
        available = {f"audio track {track.index}": _kept_s(track.duration_s, cut) for track in kept}
    if len(summary.audio_durations_s) != len(available):
        problems.append(f"{len(summary.audio_durations_s)} audio tracks, {len(available)} expected")
    for (name, length), duration in zip(available.items(), summary.audio_durations_s, strict=False):
        wanted = min(length, cut.length_s) if cut.length_s is not None else length
        # AAC frames are ~21 ms; a re-encode may pad by one of them.
        if abs(duration - wanted) > max(frame_s, 0.05):
            problems.append(f"{name} lasts {duration:.3f} s, expected {wanted:.3f} s")
    if problems:
        raise SegmentFailed("the merged video does not match its source: " + "; ".join(problems))


def _kept_s(track_s: float, cut: AudioCut) -> float:
    """How much of a target's audio track the cut's window keeps."""
    if cut.window is None:
        return track_s
    start, end = cut.window
    return max(0.0, min(end, track_s) - start)


def merge_job(task: MergeTask, deps: MergeDeps) -> MergeResult:
    job = task.job
    started = time.monotonic()
    started_at = time.time()
    plan = load_plan(deps.storage, job)
    records = gate(deps.storage, job, plan)
    workdir = Path(tempfile.mkdtemp(prefix=f"merge-{job.job_id[:40]}-", dir=deps.scratch))
    try:
        names = [f"{segment.index:05d}.mp4" for segment in plan]
        # The committed output of each segment: the winner's, where a straggler had a backup copy.
        keys = output_keys(job, plan, records)
        reader = RangeReader(
            S3RangeSource(deps.storage, job.target.bucket, job.target.key, job.target.size),
            what=f"target {job.target.key!r}",
        )
        with ThreadPoolExecutor(max_workers=deps.download_threads + 1) as pool:
            # The audio comes out of the target (or the job's audio source) while the segments download.
            audio: Future[Path | None] = (
                pool.submit(source_audio, deps.storage, job.audio, workdir)
                if job.audio is not None
                else pool.submit(extract_audio, reader, job.video, workdir, job.job_id)
            )
            list(
                pool.map(
                    lambda item: deps.storage.download_file(job.work_bucket, item[0], workdir / item[1]),
                    zip(keys, names, strict=True),
                )
            )
            audio_path = audio.result()
        # The container the job's output key names (its settings, planned from that key).
        container = job.encoder.container
        output_path = workdir / f"output.{container}"
        summary = assemble(
            [workdir / name for name in names],
            audio_path,
            job.video,
            output_path,
            job.job_id,
            audio_plan(job.engine, job.options, container),
            job.frames,
            job.audio.info if job.audio is not None else None,
            container,
        )
        deps.storage.upload_file(
            job.output.bucket, job.output.key, output_path, CONTENT_TYPES[container],
            tags=dict([layout.OUTPUT_RETENTION_TAG]),
        )  # fmt: skip
        merge_s = time.monotonic() - started
        preview = make_preview(deps.storage, job, reader, output_path)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    # Signed with this task's role session: the notice says when the link really ends (the
    # session's end, if sooner than 24 h); `fusionfleet status` signs a fresh one at any time.
    link = deps.storage.presign_link(job.output.bucket, job.output.key, DOWNLOAD_LINK_SECONDS, download=True)
    logger.info(
        "job %s merged: %s frames, %.3f s, in %.2f s", job.job_id, summary.frame_count, summary.duration_s, merge_s
    )
    return MergeResult(
        output=OutputLocation(
            bucket=job.output.bucket, key=job.output.key, uri=f"s3://{job.output.bucket}/{job.output.key}"
        ),
        download_url=link.url,
        download_url_expires_at=link.expires_at_iso,
        frames=summary.frame_count,
        duration_s=round(summary.duration_s, 6),
        audio_tracks=len(summary.audio_durations_s),
        timings=MergeTimings(
            render_s=round(max(r.finished_at for r in records) - min(r.started_at for r in records), 3),
            worker_s=round(sum(record.total_s for record in records), 3),
            engine_s=round(sum(record.engine_s for record in records), 3),
            merge_s=round(merge_s, 3),
            merge_started_at=round(started_at, 3),
        ),
        # Every attempt so far, failed, killed and backup copies included. An attempt not ended by now is
        # a losing copy still running or one whose worker died, maybe seconds ago: each counts to its last
        # sign of life (never over the bill; `fusionfleet status` and the ledger count it to its end).
        cost=job_cost(
            read_attempts(deps.storage, job.work_bucket, job.job_id), deps.prices, time.time(), stale_after_s=0.0
        ),
        preview=preview,
    )


def source_audio(storage: Storage, audio: AudioSource, folder: Path) -> Path | None:
    """The job's audio source, copied packet for packet from the user's upload (fusionfleet.media.source_audio)."""
    what = f"audio source {audio.file.key!r}"
    reader = RangeReader(S3RangeSource(storage, audio.file.bucket, audio.file.key, audio.file.size), what=what)
    return copy_audio(reader, audio.info, folder, what)


def make_preview(storage: Storage, job: JobContext, target: RangeReader, output_path: Path) -> Preview | None:
    """The before/after contact sheet, stored beside the output; None (logged) when it cannot be made.

    A preview is a courtesy: the job's video is already written, so a failure here never fails the job.
    """
    key = layout.preview_key(job.output.key)
    try:
        output = RangeReader(FileRangeSource(output_path), what="merged output")
        output_info = probe_video(output, "merged output", MediaLimits(max_bytes=output.size))
        data, (width, height), frames = render_preview(target, job.video, output, output_info)
        # A frame of the swapped face: tagged to expire with the output (OutputRetentionDays).
        preview_path = output_path.with_name(output_path.name + ".preview.jpg")
        preview_path.write_bytes(data)
        storage.upload_file(
            job.output.bucket, key, preview_path, "image/jpeg", tags=dict([layout.OUTPUT_RETENTION_TAG])
        )
    except Exception as error:  # a courtesy: whatever went wrong (decoder, S3), the job's video stands
        logger.warning("job %s: no preview (%s)", job.job_id, getattr(error, "reason", error), exc_info=True)
        return None
    link = storage.presign_link(job.output.bucket, key, DOWNLOAD_LINK_SECONDS)
    return Preview(
        bucket=job.output.bucket,
        key=key,
        url=link.url,
        url_expires_at=link.expires_at_iso,
        width=width,
        height=height,
        frames=frames,
    )
