"""A lip-sync job's voice is extracted once, in its analysis step, and every segment fetches that one."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np

from fusionfleet import layout
from fusionfleet.adapters.storage import put_json
from fusionfleet.facefusion.content_analysis import judge
from fusionfleet.media.info import AudioInfo
from fusionfleet.messages import AudioSource, JobContext, ObjectRef
from gpu_worker.engines.base import EngineJob
from gpu_worker.engines.pool import EnginePool
from gpu_worker.rendering.job_analysis import analyse_job, job_voice, needs_voice
from tests.support.fakes import FakeStorage
from tests.support.jobs import MEDIA, WORK, job_context


class Voices:
    """An engine that extracts a made-up voice and counts how often (and analyses nothing it is given)."""

    name = "facefusion"

    def __init__(self) -> None:
        self.extracted: list[EngineJob] = []

    def analyse_content(self, images: Any) -> list[bool]:
        return []

    def extract_voice(self, job: EngineJob, out: Path) -> tuple[int, ...]:
        self.extracted.append(job)
        spectrogram = np.arange(80 * 40, dtype=np.float64).reshape(80, 40)
        np.save(out, spectrogram, allow_pickle=False)
        return spectrogram.shape


class Pool:
    def __init__(self, engine: Voices) -> None:
        self.engine = engine

    def get(self, name: str) -> Voices:
        return self.engine


def lip_job(processors: list[str]) -> JobContext:
    audio = AudioSource(
        file=ObjectRef(bucket=MEDIA, key="inputs/voice.wav", size=10), info=AudioInfo("wav", "pcm_s16le", 48000, 2, 3.0)
    )
    verdict = ObjectRef(bucket=WORK, key=layout.content_analysis_key("clip-0123456789abcdef"))
    return job_context(engine="facefusion", audio=audio, options={"processors": processors}, content_analysis=verdict)


def audio_file(tmp_path: Path) -> Path:
    folder = tmp_path / "audio-sources" / "job"
    folder.mkdir(parents=True)
    path = folder / "voice.wav"
    path.write_bytes(b"RIFF")
    return path


def test_the_analysis_step_extracts_a_lip_sync_jobs_voice_once_and_every_segment_reads_that_one(tmp_path: Path) -> None:
    storage, engine = FakeStorage(), Voices()
    job, audio = lip_job(["lip_syncer"]), audio_file(tmp_path)
    pool = cast(EnginePool, Pool(engine))
    # GIVEN a redelivered step: the verdict was kept before its answer was lost, the voice was not
    assert job.content_analysis is not None
    put_json(storage, WORK, job.content_analysis.key, judge([False], 25).model_dump())
    # WHEN the step runs (twice: a second delivery)
    for _ in range(2):
        assert not analyse_job(storage, pool, job, audio=lambda: audio).refused
    # THEN the voice was extracted once, from the job's audio at its processing rate, and kept beside the job
    assert len(engine.extracted) == 1 and engine.extracted[0].audio == audio
    kept = storage.get_bytes(WORK, layout.voice_key(job.job_id))
    # AND a segment fetches it once per job, beside the job's audio (so it goes with it)
    reads = storage.reads.get(layout.voice_key(job.job_id), 0)
    first, second = job_voice(storage, job, audio), job_voice(storage, job, audio)
    assert first == second == audio.parent / "voice-spectrogram.npy"
    assert first.read_bytes() == kept
    assert storage.reads.get(layout.voice_key(job.job_id), 0) == reads + 1


def test_no_voice_is_extracted_without_a_lip_syncer_or_for_a_refused_target(tmp_path: Path) -> None:
    storage, engine = FakeStorage(), Voices()
    audio = audio_file(tmp_path)
    pool = cast(EnginePool, Pool(engine))
    swap = lip_job(["face_swapper"])
    assert not needs_voice(swap) and needs_voice(lip_job(["face_swapper", "lip_syncer"]))
    analyse_job(storage, pool, swap, audio=lambda: audio)
    refused = lip_job(["lip_syncer"]).model_copy(update={"job_id": "refused-job"})
    assert refused.content_analysis is not None
    refused = refused.model_copy(
        update={"content_analysis": ObjectRef(bucket=WORK, key=layout.content_analysis_key("refused-job"))}
    )
    assert refused.content_analysis is not None
    put_json(storage, WORK, refused.content_analysis.key, judge([True], 25).model_dump())
    assert analyse_job(storage, pool, refused, audio=lambda: audio).refused
    assert engine.extracted == []
    # A segment of a job analysed before the step extracted voices hears it extracted there, as before.
    assert job_voice(storage, lip_job(["lip_syncer"]), audio) is None
