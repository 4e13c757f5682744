"""Chained passes on FaceFusion's engine (issue 44): `faces` as one FaceFusion run per person, in order, each
with the person's sources and reference face, and how far a chain's last pass looks ahead. Pure."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_worker.engines.base import EngineError, EngineJob, Person
from gpu_worker.engines.facefusion import FaceFusionEngine
from gpu_worker.engines.facefusion.chain import chain_look_ahead, passes_of
from gpu_worker.engines.facefusion.warm_chain import WAVE_BYTES, ready_until, wave_size


def _picture(level: int) -> np.ndarray:
    return np.full((4, 4, 3), level, np.uint8)


def test_each_person_is_a_pass_of_their_own_in_order_with_their_sources_and_reference() -> None:
    # GIVEN a job with two mappings: a's two sources on the face at position 1 of a frame, b's on position 0
    frame, image = _picture(1), _picture(2)
    a, a2, b = _picture(3), _picture(4), _picture(5)
    options = {"face_selector_mode": "reference", "face_swapper_model": "inswapper_128"}
    people = (Person((a, a2), frame, position=1, reference_is_frame=True), Person((b,), image))
    job = EngineJob("j", (a, a2, b), options=options, people=people)
    # WHEN it is cut into passes
    first, second = passes_of(job, options)
    # THEN each pass is one person's: their sources (FaceFusion averages several), their reference picture
    assert first.sources == (a, a2) and first.reference is frame
    assert second.sources == (b,) and second.reference is image
    # AND the job's options with the person's own position in their reference
    assert dict(first.options) == {**options, "reference_face_position": 1}
    assert dict(second.options) == {**options, "reference_face_position": 0}


def test_a_job_without_faces_is_one_ordinary_run() -> None:
    assert passes_of(EngineJob("j", (_picture(1),)), {}) == ()


def test_the_last_pass_looks_ahead_each_passs_tracker_window() -> None:
    tracked = {"face_tracker_score": 0.3, "target_frame_amount": 2}
    people = tuple(Person((_picture(3),), _picture(1)) for _ in range(3))
    assert chain_look_ahead(EngineJob("j", (), options=tracked, people=people)) == 6
    assert chain_look_ahead(EngineJob("j", (), options=tracked)) == 2  # an ordinary run: one window
    assert chain_look_ahead(EngineJob("j", (), options={}, people=people)) == 0  # the tracker off: none after
    # passes with options of their own: each its own window (one tracks 4 each way, one does not track)
    own = (Person((_picture(3),), _picture(1), options={**tracked, "target_frame_amount": 4}),
           Person((_picture(3),), _picture(1), options={}))  # fmt: skip
    assert chain_look_ahead(EngineJob("j", (), options=tracked, people=own)) == 4


def test_a_pass_with_options_of_its_own_runs_them_and_reads_its_reference_after_the_passes_before() -> None:
    # GIVEN swap, then enhance, each naming a face of a frame of the target (a job file's remix chain)
    frame = _picture(1)
    swap, enhance = {"processors": ["face_swapper"]}, {"processors": ["face_enhancer"], "face_enhancer_blend": 70}
    people = (Person((_picture(3),), frame, 0, True, swap), Person((_picture(3),), frame, 1, True, enhance))
    first, second = passes_of(EngineJob("j", (), options={"processors": ["face_enhancer"]}, people=people), {})
    # THEN each pass runs its own options, with its person's position
    assert dict(first.options) == {**swap, "reference_face_position": 0}
    assert dict(second.options) == {**enhance, "reference_face_position": 1}
    # AND a step's reference is read as job-run reads it: the frame after the passes before (the first: none)
    assert first.after_passes and second.after_passes
    # AND a person of `faces` without options keeps the original frame's face, as before
    plain = passes_of(EngineJob("j", (), people=(Person((_picture(3),), frame, 0, True),)), {})
    assert not plain[0].after_passes


def test_a_pass_takes_a_frame_once_its_neighbours_after_it_are_known() -> None:
    # the tracker 2 frames each way: of 10 frames known, the first 8 have both neighbours after them
    assert ready_until(2, 10, ended=False) == 8
    assert ready_until(2, 1, ended=False) == 0
    # the segment's last frames have no more to wait for
    assert ready_until(2, 10, ended=True) == 10
    assert ready_until(0, 10, ended=False) == 10


def test_a_wave_is_eight_frames_a_thread_within_its_memory_and_at_least_two() -> None:
    # small frames: 8 a thread, so the threads seldom wait at a switch between passes
    assert wave_size(2, 320 * 240 * 3) == 16
    # 4K frames on a GPU's 8 threads: what WAVE_BYTES holds (21), more than 2 a thread
    assert wave_size(8, 3840 * 2160 * 3) == WAVE_BYTES // (3840 * 2160 * 3) == 21
    # frames too large for even 2 a thread within it: still 2 a thread; and never none
    assert wave_size(4, WAVE_BYTES) == 8
    assert wave_size(0, 1) == 1


def test_the_per_segment_engine_refuses_faces_rather_than_render_them_as_absent() -> None:
    job = EngineJob("j", (_picture(3),), people=(Person((_picture(3),), _picture(1)),))
    with pytest.raises(EngineError, match="not one pass per person of `faces`"):
        FaceFusionEngine(env={}).validate(job)


def test_passes_that_differ_only_in_whom_they_pick_keep_the_faces_found() -> None:
    # FaceFusion's face store holds what face_creator.get_many_faces found, which reads only the detector's and
    # the landmarker's options: switching between two people's passes (another reference_face_position, another
    # selector) must not clear it, or each switch finds the sources' and the reference's faces again (the chain
    # benchmark's first run: 1.62x job-run's time); another detector must.
    from gpu_worker.engines.facefusion.warm_server import face_options

    first = {"face_detector_model": "yolo_face", "face_selector_mode": "reference", "reference_face_position": 0}
    assert face_options(first) == face_options({**first, "reference_face_position": 1, "face_selector_mode": "one"})
    assert face_options(first) != face_options({**first, "face_detector_model": "retinaface"})
    assert face_options(first) != face_options({**first, "face_landmarker_score": 0.2})
