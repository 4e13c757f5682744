"""The job's content-analysis verdict: made once over the whole target and kept beside the job, or read there.

The analysis step before the Map (gpu_worker/delivery/analysis_task.py) makes it: it decodes the whole
target, hands every sampled frame (fusionfleet.facefusion.content_analysis.sampled_frames: FaceFusion's
rate) to the engine's content analyser, judges with FaceFusion's threshold and writes the verdict with
create-if-absent, saying how far it has read as it goes. Every segment then reads it. Only an
execution started before the step existed finds no verdict: its first segment makes it the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from fusionfleet import layout
from fusionfleet.adapters.storage import S3RangeSource, Storage, get_json, put_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.facefusion.content_analysis import AnalysisProgress, ContentVerdict, judge, sample_step
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.reader import RangeReader
from fusionfleet.messages import JobContext
from gpu_worker.engines.base import ContentAnalyser, Engine, EngineError, Image
from gpu_worker.engines.pool import EnginePool

logger = logging.getLogger(__name__)

READ_BLOCK = 2 * 1024 * 1024
PROGRESS_EVERY_S = 5.0

# Called with the frames read so far and the frames sampled so far.
OnProgress = Callable[[int, int], None]


def analyse_whole_target(
    analyser: ContentAnalyser, reader: RangeReader, job: JobContext, threads: int = 0,
    on_progress: OnProgress | None = None,
) -> ContentVerdict:  # fmt: skip
    """FaceFusion's verdict over every frame the job renders (its trimmed range), sampled at its rate: frame
    numbers of the whole target that are multiples of int(fps) (content_analyser.analyse_video)."""
    step = sample_step(job.video.fps)
    line = job.frames
    frames = iter_frames(reader, job.video, line.start, line.end, f"target {job.target.key!r}", threads)

    def sampled() -> Iterator[Image]:
        count = 0
        last = time.monotonic()
        for index, image in frames:
            if index % step == 0:
                count += 1
                yield image
            if on_progress is not None and time.monotonic() - last >= PROGRESS_EVERY_S:
                last = time.monotonic()
                on_progress(index + 1 - line.start, count)

    return judge(analyser.analyse_content(sampled()), step)


def stored_verdict(storage: Storage, job: JobContext) -> ContentVerdict | None:
    """The job's verdict where it is kept, or None when none was made yet (or the job makes none)."""
    where = job.content_analysis
    if where is None:
        return None
    try:
        return ContentVerdict.model_validate(get_json(storage, where.bucket, where.key))
    except ObjectMissing:
        return None


def make_verdict(
    storage: Storage, job: JobContext, analyser: ContentAnalyser, threads: int = 0, worker: str = ""
) -> ContentVerdict:
    """Analyse the whole target now and keep the verdict (the first write stands: two equal verdicts can race)."""
    assert job.content_analysis is not None
    where = job.content_analysis
    started, clock = time.monotonic(), time.time()
    reader = RangeReader(
        S3RangeSource(storage, job.target.bucket, job.target.key, job.target.size),
        what=f"target {job.target.key!r}",
        block_size=READ_BLOCK,
        cached_blocks=4,
    )

    def progress(read: int, sampled: int) -> None:
        record = AnalysisProgress(
            frames_read=read, frame_count=job.frames.frames, sampled=sampled, worker=worker,
            started_at=clock, updated_at=time.time(),
        )  # fmt: skip
        try:
            put_json(storage, job.work_bucket, layout.content_analysis_progress_key(job.job_id), record.model_dump())
        except Exception:
            logger.warning("%s: analysis progress not written", job.job_id, exc_info=True)  # for people only

    verdict = analyse_whole_target(analyser, reader, job, threads, progress)
    stored = storage.create(where.bucket, where.key, verdict.model_dump_json().encode())
    logger.info(
        "%s: content analysis over the whole target: %s of %s sampled frames flagged (%s) in %.1f s%s",
        job.job_id, verdict.flagged, verdict.sampled, "refused" if verdict.refused else "passed",
        time.monotonic() - started, "" if stored else "; another worker's equal verdict was kept",
    )  # fmt: skip
    if not stored:
        kept = stored_verdict(storage, job)
        return kept if kept is not None else verdict
    return verdict


def job_content_verdict(storage: Storage, job: JobContext, engine: Engine, threads: int = 0) -> ContentVerdict | None:
    """The job's verdict for a segment, or None where the job or the engine does not make it once per job."""
    if job.content_analysis is None or not isinstance(engine, ContentAnalyser):
        return None
    verdict = stored_verdict(storage, job)
    if verdict is not None:
        return verdict
    # An execution started before the analysis step existed (a deploy while it ran): made here, once.
    logger.warning("%s: no content-analysis verdict kept: this segment makes it", job.job_id)
    return make_verdict(storage, job, engine, threads)


def analyse_job(
    storage: Storage, engines: EnginePool, job: JobContext, threads: int = 0, worker: str = ""
) -> ContentVerdict:
    """The analysis step's work, where the engine lives: the kept verdict, or one made now (a redelivered
    step whose verdict was written before its answer was lost finds it kept)."""
    kept = stored_verdict(storage, job)
    if kept is not None:
        return kept
    engine = engines.get(job.engine)
    if not isinstance(engine, ContentAnalyser):
        raise EngineError(f"the {job.engine} engine has no content analyser to make the job's verdict with")
    return make_verdict(storage, job, engine, threads, worker)
