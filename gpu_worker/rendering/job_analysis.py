"""The job's content-analysis verdict: made once over the whole target and kept beside the job, or read there.

The analysis step before the Map (gpu_worker/delivery/analysis_task.py) makes it: it decodes the whole
target, hands every sampled frame (fusionfleet.facefusion.content_analysis.sampled_frames: FaceFusion's
rate) to the engine's content analyser, judges with FaceFusion's threshold and writes the verdict with
create-if-absent, saying how far it has read as it goes. Every segment then reads it. Only an
execution started before the step existed finds no verdict: its first segment makes it the same way.

A lip-sync job's voice is extracted in the same step, once: FaceFusion's lip syncer clears its voice
cache after every run (lip_syncer.post_process), so each segment re-extracted the whole audio file.
The step keeps the spectrogram FaceFusion's read_voice cuts its frames from at `work/<job>/voice-
spectrogram.npy` (create-if-absent); each segment's engine cuts the same frames from it. Where none is
kept (an execution analysed before this), the segment extracts the voice itself, as before.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MappingProxyType

from fusionfleet import layout
from fusionfleet.adapters.storage import S3RangeSource, Storage, get_json, put_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.facefusion.content_analysis import AnalysisProgress, ContentVerdict, judge, sample_step
from fusionfleet.facefusion.requirements import processors_of
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.ranges import RangeReader
from fusionfleet.messages import JobContext
from gpu_worker.engines.base import ContentAnalyser, Engine, EngineError, EngineJob, Image, VoiceExtractor
from gpu_worker.engines.pool import EnginePool

logger = logging.getLogger(__name__)

READ_BLOCK = 2 * 1024 * 1024
LIP_SYNCER = "lip_syncer"  # FaceFusion's only processor that hears the voice
VOICE_FILE = "voice-spectrogram.npy"
PROGRESS_EVERY_S = 5.0

# Called with the frames read so far and the frames sampled so far.
OnProgress = Callable[[int, int], None]


def analyse_whole_target(
    analyser: ContentAnalyser, reader: RangeReader, job: JobContext, threads: int = 0,
    on_progress: OnProgress | None = None,
) -> ContentVerdict:  # fmt: skip
    """FaceFusion's verdict over every frame the job renders (its trimmed range), sampled at its rate: frame
    numbers of the whole target that are multiples of int(fps) (content_analyser.analyse_video). A test
    render's is over its own frames (`analyse_trial_frames`)."""
    if job.trial_frames:
        return analyse_trial_frames(analyser, reader, job, threads)
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


def analyse_trial_frames(
    analyser: ContentAnalyser, reader: RangeReader, job: JobContext, threads: int = 0
) -> ContentVerdict:
    """A test render's verdict over the frames it renders, each analysed as FaceFusion's preview analyses the
    frame it shows (analyse_frame): each read alone, from its keyframe, never the whole target."""
    frames = tuple(sorted(job.trial_frames))

    def images() -> Iterator[Image]:
        for number in frames:
            for _index, image in iter_frames(
                reader, job.video, number, number + 1, f"target {job.target.key!r}", threads
            ):
                yield image

    return judge(analyser.analyse_content(images()), every=1).model_copy(update={"frames": frames})


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

    progress(0, 0)  # started: what the dashboards show (and a benchmark times) before the first 5 s report
    verdict = analyse_whole_target(analyser, reader, job, threads, progress)
    stored = storage.create(where.bucket, where.key, verdict.model_dump_json().encode())
    logger.info(
        "%s: content analysis over %s: %s of %s sampled frames flagged (%s) in %.1f s%s",
        job.job_id, "the test render's frames" if verdict.frames else "the whole target", verdict.flagged,
        verdict.sampled, "refused" if verdict.refused else "passed", time.monotonic() - started,
        "" if stored else "; another worker's equal verdict was kept",
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
    storage: Storage, engines: EnginePool, job: JobContext, threads: int = 0, worker: str = "",
    audio: Callable[[], Path | None] | None = None,
) -> ContentVerdict:  # fmt: skip
    """The analysis step's work, where the engine lives: the kept verdict, or one made now (a redelivered
    step whose verdict was written before its answer was lost finds it kept); then, for a lip-sync job,
    its voice (`audio`: the job's audio source on this worker's disk, fetched only when needed)."""
    verdict = stored_verdict(storage, job)
    if verdict is None:
        engine = engines.get(job.engine)
        if not isinstance(engine, ContentAnalyser):
            raise EngineError(f"the {job.engine} engine has no content analyser to make the job's verdict with")
        verdict = make_verdict(storage, job, engine, threads, worker)
    # A redelivered step may find the verdict kept and the voice not yet: the voice is checked on its own.
    if not verdict.refused and audio is not None and needs_voice(job) and not has_voice(storage, job):
        extractor = engines.get(job.engine)
        path = audio()
        if isinstance(extractor, VoiceExtractor) and path is not None:
            make_voice(storage, job, extractor, path)
    return verdict


def needs_voice(job: JobContext) -> bool:
    """A job whose lip syncer hears an audio source: its voice is extracted once, in the analysis step."""
    return job.audio is not None and LIP_SYNCER in processors_of(job.options)


def has_voice(storage: Storage, job: JobContext) -> bool:
    try:
        storage.head(job.work_bucket, layout.voice_key(job.job_id))
    except ObjectMissing:
        return False
    return True


def make_voice(storage: Storage, job: JobContext, engine: VoiceExtractor, audio: Path) -> bool:
    """Extract the job's voice from `audio` and keep it; False where another worker's was kept first
    (create-if-absent: two extractions of one file with one model are the same voice)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="voice-", dir=audio.parent) as folder:
        out = Path(folder) / "voice.npy"
        engine_job = EngineJob(
            job_id=job.job_id, sources=(), options=MappingProxyType(dict(job.options)), fps=float(job.video.fps),
            work_dir=Path(folder), audio=audio, timeline=job.frames,
        )  # fmt: skip
        shape = engine.extract_voice(engine_job, out)
        data = out.read_bytes()
    stored = storage.create(job.work_bucket, layout.voice_key(job.job_id), data, "application/octet-stream")
    logger.info(
        "%s: voice extracted once for every segment: spectrogram %s (%s bytes) in %.1f s%s",
        job.job_id, "×".join(map(str, shape)), len(data), time.monotonic() - started,
        "" if stored else "; another worker's was kept",
    )  # fmt: skip
    return stored


def job_voice(storage: Storage, job: JobContext, audio: Path | None) -> Path | None:
    """The job's voice for a segment, fetched once per job beside its audio source (and gone with it);
    None where the job has none kept (no lip syncer, or analysed before the step extracted it)."""
    if audio is None or not needs_voice(job):
        return None
    path = audio.parent / VOICE_FILE
    if path.is_file():
        return path
    partial = path.with_name(f"{VOICE_FILE}.{os.getpid()}.part")
    try:
        storage.download_file(job.work_bucket, layout.voice_key(job.job_id), partial)
    except ObjectMissing:
        partial.unlink(missing_ok=True)
        logger.warning("%s: no voice kept for the job: this segment extracts it", job.job_id)
        return None
    partial.replace(path)  # whole or absent: another segment may look for it at once
    return path
