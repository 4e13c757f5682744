"""No option is refused after a job was accepted: every option set the submit-time validation accepts, the
worker's engine takes too, for every engine and every mix of sources. FaceFusion's own parser and
pre-processing are walked the same way in tests/integration/engines/test_no_late_refusal_facefusion.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.requirements import SourceKind
from fusionfleet.jobs.engine_options import check_sources
from fusionfleet.jobs.manifest import parse_manifest
from gpu_worker.engines.base import EngineError, EngineJob
from gpu_worker.engines.classic.engine import job_settings
from gpu_worker.engines.facefusion.job_options import check_options, option_args
from tests.support.option_walk import accepted, cases, submit_verdict

FACE = np.zeros((8, 8, 3), np.uint8)
MIXES: list[tuple[SourceKind, ...]] = [("image",), ("audio",), ("image", "audio"), ("image", "image", "audio")]


def _job(options: dict[str, object], kinds: tuple[SourceKind, ...]) -> EngineJob:
    return EngineJob(
        job_id="walk",
        sources=tuple(FACE for kind in kinds if kind == "image"),
        audio=Path("source-audio.wav") if "audio" in kinds else None,
        options=MappingProxyType(dict(options)),
    )


@pytest.mark.parametrize("kinds", MIXES, ids="+".join)
def test_every_option_set_validation_accepts_the_facefusion_worker_takes(kinds: tuple[SourceKind, ...]) -> None:
    # GIVEN every catalogue option with each value worth trying, and a job's sources of these kinds
    taken = accepted("facefusion", kinds)
    assert taken, "the walk found nothing validation accepts"
    # WHEN the worker's engine checks each option set validation accepted THEN it refuses none
    late = []
    for case in taken:
        try:
            check_options(_job(case.options, kinds))
            option_args(case.options)
        except EngineError as error:
            late.append(f"{case.label}: {error.reason}")
    assert not late, "refused by the worker after validation accepted: " + "; ".join(late[:10])


def test_every_option_set_validation_accepts_the_classic_worker_takes() -> None:
    for case in accepted("classic", ("image",)):
        job_settings(_job(case.options, ("image",)))  # EngineError would be a late refusal


def test_the_walk_covers_every_processor_and_both_ways_of_saying_no() -> None:
    # Every processor alone is accepted with a face image and an audio file…
    walked = {json.dumps(case.value) for case in accepted("facefusion") if case.name == "processors"}
    for processor in ("lip_syncer", "expression_restorer", "frame_enhancer", "deep_swapper", "face_swapper"):
        assert json.dumps([processor]) in walked
    # …and the walk meets refusals too (a model the image lacks is one), so it judges, not rubber-stamps.
    assert any(submit_verdict("facefusion", case.options) for case in cases())


@pytest.mark.parametrize(
    ("options", "kinds", "reason"),
    [
        ({"processors": ["lip_syncer"]}, ("image",), "source: lip_syncer needs an audio file among the sources"),
        ({"processors": ["face_swapper", "lip_syncer"]}, ("audio",), "face_swapper needs a face image"),
        ({}, ("audio", "audio", "image"), "2 audio files given; FaceFusion hears only the first"),
        ({"temp_frame_format": "jpeg", "workflow_strategy": "disk"}, ("image",), "'jpeg' with the disk workflow"),
    ],
)
def test_what_the_worker_used_to_refuse_after_analysis_is_refused_at_submit_with_the_reason(
    options: dict[str, object], kinds: tuple[SourceKind, ...], reason: str
) -> None:
    # GIVEN a FaceFusion job the worker could not render WHEN it is validated THEN the reason comes at once
    verdict = submit_verdict("facefusion", options, kinds)
    assert verdict is not None and reason in verdict
    # AND the worker, were it to get the job anyway, says the same (a job carries one audio file to it)
    if kinds.count("audio") > 1:
        return
    with pytest.raises(EngineError, match=reason.split(": ", 1)[-1][:30]):
        check_options(_job(options, kinds))


def test_a_built_in_engine_needs_a_face_image_and_takes_an_audio_file() -> None:
    raw = json.dumps({"source": ["a.wav"], "target": "c.mp4", "engine": "classic"}).encode()
    manifest = parse_manifest(raw, "jobs/a.json")
    with pytest.raises(JobRejected, match="the classic engine swaps faces and needs a face image"):
        check_sources("classic", manifest.options, ("audio",))
    check_sources("classic", manifest.options, ("image", "audio"))
    check_sources("copy", manifest.options, ("audio",))
