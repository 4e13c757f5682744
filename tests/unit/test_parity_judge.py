"""The parity tool's pure parts: FaceFusion's flags spelt independently of the farm, the judge's measures."""

from __future__ import annotations

import numpy as np

from benchmarks.parity.judge import IDENTICAL, psnr, snr
from benchmarks.parity.reference import flags
from benchmarks.parity.run import Case, Outcome
from benchmarks.parity_matrix import matrix


def test_options_become_facefusions_own_flags() -> None:
    # GIVEN options in FaceFusion's names WHEN spelt for its CLI THEN each is its flag, lists give one value an item
    argv = flags(
        {"processors": ["face_swapper", "face_enhancer"], "face_tracker_score": 0.3, "output_video_scale": 0.5}
    )
    assert argv == ["--processors", "face_swapper", "face_enhancer", "--face-tracker-score", "0.3",
                    "--output-video-scale", "0.5"]  # fmt: skip


def test_psnr_and_snr_say_how_far_apart_and_cap_what_is_equal() -> None:
    # GIVEN a picture, itself, and the same picture one level brighter everywhere
    image = np.full((4, 4, 3), 100, np.uint8)
    # THEN identical pictures are capped (PSNR is infinite), and a one-level shift is 48.13 dB
    assert psnr(image, image) == IDENTICAL
    assert round(psnr(image, image + 1), 2) == 48.13
    # AND sound: the same samples are capped, a tenth of the signal as noise is 20 dB
    tone = np.sin(np.linspace(0, 20, 1000)).astype(np.float32)
    assert snr(tone, tone) == IDENTICAL
    assert round(snr(tone, tone * 0.9), 1) == 20.0


def test_an_outcome_without_a_verdict_is_not_equal_and_says_why() -> None:
    # GIVEN a case the farm refused WHEN its line is written THEN it is not equal and names the refusal
    outcome = Outcome(Case("trim", {"trim_frame_start": 30}), problems=["the farm's job failed: refused"])
    line = outcome.line()
    assert line["equal"] is False and line["differences"] == ["the farm's job failed: refused"]
    assert outcome.unrendered


def test_the_matrix_covers_every_processor_and_names_why_a_case_differs_on_purpose() -> None:
    cases = {item.case.name: item for item in matrix()}
    processors = {name for item in cases.values() for name in item.case.options.get("processors", [])}
    assert len(processors) == 11
    assert {"trim", "output_video_fps", "output_video_scale", "hlg", "pq", "tracker", "lip_syncer"} <= set(cases)
    assert all(len(item.deliberate) > 40 for item in cases.values() if item.deliberate)
    # a deliberate case names the differences it excuses, so any other still fails it
    assert all(item.allowed for item in cases.values() if item.deliberate)
    assert sum(item.quick for item in cases.values()) >= 1
