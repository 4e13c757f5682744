"""The merge of a job whose segments are pictures: an image target's one picture, a test render's frames.

The same gate as a video's merge (every planned segment recorded and present), then, for an image
target, FaceFusion's finalize step: the picture written at the output's size, in its format and
quality (fusionfleet.jobs.image_output); for a test render, each frame's picture as the lossless PNG
the engine made, under the job's output prefix as `frame-<number>.png`. Every written file is decoded
again and checked before the job is told it succeeded.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path

from fusionfleet import layout
from fusionfleet.adapters.links import DOWNLOAD_LINK_SECONDS
from fusionfleet.errors import InputRejected, SegmentFailed
from fusionfleet.jobs.attempts import read_attempts
from fusionfleet.jobs.cost import job_cost
from fusionfleet.jobs.image_output import IMAGE_CONTENT_TYPES, ImageOutput
from fusionfleet.jobs.plan import Segment
from fusionfleet.media.ffmpeg import finalize_image_argv
from fusionfleet.media.image import check_image
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.runner import run_ffmpeg
from fusionfleet.messages import JobContext, MergeResult, MergeTask, MergeTimings, OutputLocation, SegmentRecord
from gpu_worker.merging.merge import MergeDeps, gate, load_plan, output_keys

logger = logging.getLogger(__name__)

# The output's own limits: it is ours, but at most 8× the target per side (output_image_scale).
OUTPUT_LIMITS = MediaLimits(max_image_bytes=1024**3, max_image_pixels=64 * 40_000_000)


def merge_stills(task: MergeTask, deps: MergeDeps) -> MergeResult:
    job = task.job
    started, started_at = time.monotonic(), time.time()
    plan = load_plan(deps.storage, job)
    records = gate(deps.storage, job, plan)
    workdir = Path(tempfile.mkdtemp(prefix=f"merge-{job.job_id[:40]}-", dir=deps.scratch))
    try:
        keys = output_keys(job, plan, records)
        if job.image is not None:
            written = [_finalize(deps, job, job.image, keys[0], workdir)]
        else:
            written = [_copy_frame(deps, job, segment, key, workdir) for segment, key in zip(plan, keys, strict=True)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    merge_s = time.monotonic() - started
    link = deps.storage.presign_link(job.output.bucket, written[0], DOWNLOAD_LINK_SECONDS, download=True)
    logger.info("job %s merged: %s picture(s) in %.2f s", job.job_id, len(written), merge_s)
    return MergeResult(
        output=OutputLocation(
            bucket=job.output.bucket, key=job.output.key, uri=f"s3://{job.output.bucket}/{job.output.key}"
        ),
        download_url=link.url,
        download_url_expires_at=link.expires_at_iso,
        frames=len(written),
        duration_s=0.0,
        audio_tracks=0,
        timings=_timings(records, merge_s, started_at),
        # Every attempt, as a video's merge counts them (gpu_worker.merging.merge): never over the bill.
        cost=job_cost(
            read_attempts(deps.storage, job.work_bucket, job.job_id), deps.prices, time.time(), stale_after_s=0.0
        ),
    )


def _finalize(deps: MergeDeps, job: JobContext, image: ImageOutput, key: str, workdir: Path) -> str:
    picture = workdir / "picture.png"
    deps.storage.download_file(job.work_bucket, key, picture)
    output = workdir / f"output.{image.format}"
    run_ffmpeg(finalize_image_argv(picture, output, image), timeout_s=300, what=f"the output of {job.job_id}")
    _verify(output, image.format, (image.width, image.height))
    deps.storage.upload_file(
        job.output.bucket, job.output.key, output, IMAGE_CONTENT_TYPES[image.format],
        tags=dict([layout.OUTPUT_RETENTION_TAG]),
    )  # fmt: skip
    return job.output.key


def _copy_frame(deps: MergeDeps, job: JobContext, segment: Segment, key: str, workdir: Path) -> str:
    path = workdir / f"{segment.index:05d}.png"
    deps.storage.download_file(job.work_bucket, key, path)
    _verify(path, "png", job.video.display_size)
    destination = layout.trial_frame_key(job.output.key, segment.start_frame)
    deps.storage.upload_file(
        job.output.bucket, destination, path, "image/png", tags=dict([layout.OUTPUT_RETENTION_TAG])
    )
    return destination


def _verify(path: Path, image_format: str, size: tuple[int, int]) -> None:
    try:
        info = check_image(path.read_bytes(), f"the output {path.name}", OUTPUT_LIMITS)
    except InputRejected as error:
        raise SegmentFailed(f"the written picture does not decode: {error.reason}") from error
    if info.format != image_format or (info.width, info.height) != size:
        raise SegmentFailed(
            f"the written picture is a {info.width}×{info.height} {info.format}, not the job's "
            f"{size[0]}×{size[1]} {image_format}"
        )


def _timings(records: list[SegmentRecord], merge_s: float, started_at: float) -> MergeTimings:
    return MergeTimings(
        render_s=round(max(r.finished_at for r in records) - min(r.started_at for r in records), 3),
        worker_s=round(sum(record.total_s for record in records), 3),
        engine_s=round(sum(record.engine_s for record in records), 3),
        merge_s=round(merge_s, 3),
        merge_started_at=round(started_at, 3),
    )
