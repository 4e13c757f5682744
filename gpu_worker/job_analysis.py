"""The job's content-analysis verdict: read where the job keeps it, or made once and kept there.

The first segment that needs it (any worker, any segment) decodes the whole target, hands every
sampled frame (fusionfleet.facefusion.content_analysis.sampled_frames: FaceFusion's rate) to the engine's content
analyser, judges with FaceFusion's threshold and writes the verdict with create-if-absent; every
other segment reads it. Two workers that both find it missing make the same verdict from the same
frames, and the first write stands.
"""

from __future__ import annotations

import logging
import time

from fusionfleet.adapters.storage import S3RangeSource, Storage, get_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.facefusion.content_analysis import ContentVerdict, judge, sample_step
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.reader import RangeReader
from fusionfleet.messages import JobContext
from gpu_worker.engines.base import ContentAnalyser, Engine

logger = logging.getLogger(__name__)

READ_BLOCK = 2 * 1024 * 1024


def analyse_whole_target(
    analyser: ContentAnalyser, reader: RangeReader, job: JobContext, threads: int = 0
) -> ContentVerdict:
    """FaceFusion's verdict over every frame of the target, sampled at its rate."""
    step = sample_step(job.video.fps)
    frames = iter_frames(reader, job.video, 0, job.video.frame_count, f"target {job.target.key!r}", threads)
    return judge(analyser.analyse_content(image for index, image in frames if index % step == 0), step)


def job_content_verdict(storage: Storage, job: JobContext, engine: Engine, threads: int = 0) -> ContentVerdict | None:
    """The job's verdict, or None where the job or the engine does not make it once per job."""
    where = job.content_analysis
    if where is None or not isinstance(engine, ContentAnalyser):
        return None
    try:
        return ContentVerdict.model_validate(get_json(storage, where.bucket, where.key))
    except ObjectMissing:
        pass
    started = time.monotonic()
    reader = RangeReader(
        S3RangeSource(storage, job.target.bucket, job.target.key, job.target.size),
        what=f"target {job.target.key!r}",
        block_size=READ_BLOCK,
        cached_blocks=4,
    )
    verdict = analyse_whole_target(engine, reader, job, threads)
    stored = storage.create(where.bucket, where.key, verdict.model_dump_json().encode())
    logger.info(
        "%s: content analysis over the whole target: %s of %s sampled frames flagged (%s) in %.1f s%s",
        job.job_id, verdict.flagged, verdict.sampled, "refused" if verdict.refused else "passed",
        time.monotonic() - started, "" if stored else "; another worker's equal verdict was kept",
    )  # fmt: skip
    return verdict
