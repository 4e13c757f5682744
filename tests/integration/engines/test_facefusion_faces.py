"""`faces` on FaceFusion's engine (issue 44): two people swapped as two chained passes inside the warm
FaceFusion process, frame by frame in memory, equal to FaceFusion's own headless-run done twice by hand
(the second run on the first one's output, its reference face taken from the original frame).

Needs FaceFusion's checkout and interpreter (tests/support/facefusion_harness.py); skipped with the reason
otherwise, failed in CI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.parity.clips import ClipSpec, faces_at, picture
from fleetctl.harness.geometry import FACE_HEIGHT, FACE_WIDTH
from fleetctl.harness.pictures import face_image
from gpu_worker.engines.base import EngineJob, Frame, Image, Person
from gpu_worker.engines.facefusion import FaceFusionEngine, WarmFaceFusionEngine
from gpu_worker.engines.facefusion.settings import EngineSettings
from tests.support import facefusion_harness as harness

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.usefixtures("facefusion_harness")]

SPEC = ClipSpec(seconds=1.0, scene="two")  # a moving, b standing at the right
FRAMES = 7
OPTIONS: dict[str, Any] = {"face_selector_mode": "reference", "reference_face_distance": 0.3}
# The per-segment engine's lossless round trip and the warm one's differ by at most 1 level a run
# (test_facefusion_harness); two runs chained may each add it.
CHAIN_TOLERANCE = 2


def _frames() -> list[Frame]:
    return [Frame(number, picture(SPEC, number)) for number in range(FRAMES)]


def _changed(before: Image, after: Image, number: int) -> list[float]:
    """How much each face of frame `number` changed, in levels, person by person (a, then b)."""
    means = []
    for placed in faces_at(SPEC, number):
        box = (slice(placed.y, placed.y + FACE_HEIGHT), slice(placed.x, placed.x + FACE_WIDTH))
        means.append(float(np.abs(after[box].astype(int) - before[box].astype(int)).mean()))
    return means


def _job(job_id: str, tmp_path: Path, **fields: Any) -> EngineJob:
    return EngineJob(job_id=job_id, fps=25.0, work_dir=tmp_path / "work", **fields)


# With the tracker on, a pass sees the pass before's outputs as a frame's neighbours (frames wait in waves).
@pytest.mark.parametrize("extra", [{}, {"face_tracker_score": 0.3}], ids=["tracker-off", "tracker-on"])
def test_two_people_are_two_passes_equal_to_facefusion_run_twice_by_hand(
    home: harness.Harness, warm: WarmFaceFusionEngine, tmp_path: Path, extra: dict[str, Any]
) -> None:
    # GIVEN a clip of two people and a job mapping b's face on the face at position 0 of the first frame,
    # a's on the one at position 1 (each person named by the ORIGINAL first frame)
    frames, reference = _frames(), picture(SPEC, 0)
    first, second = face_image(person="b"), face_image(person="a")
    people = (Person((first,), reference, 0, reference_is_frame=True), Person((second,), reference, 1, True))
    options = {**OPTIONS, **extra}
    job = _job("faces", tmp_path, sources=(first, second), options=options, people=people)
    # WHEN the warm engine renders it
    chained = list(warm.render(job, frames))
    # AND FaceFusion's own headless-run swaps the same two people by hand, one run on the other's output
    by_hand = FaceFusionEngine(EngineSettings(home=home.home, python=home.python), harness.CPU_FACTS, env=home.env)
    by_hand.prepare()
    try:
        step = {**options, "reference_face_position": 0}
        once = list(by_hand.render(_job("hand-1", tmp_path, sources=(first,), options=step, reference=reference,
                                        reference_is_frame=True), frames))  # fmt: skip
        remixed = [Frame(frame.index, image) for frame, image in zip(frames, once, strict=True)]
        step = {**options, "reference_face_position": 1}
        twice = list(by_hand.render(_job("hand-2", tmp_path, sources=(second,), options=step, reference=reference,
                                         reference_is_frame=True), remixed))  # fmt: skip
    finally:
        by_hand.close()
    # THEN both people are swapped in every frame
    assert len(chained) == FRAMES
    for frame, image in zip(frames, chained, strict=True):
        assert min(_changed(frame.image, image, frame.index)) > 20, frame.index
    # AND the frames are FaceFusion's own two runs'
    worst = max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in zip(chained, twice, strict=True))
    assert worst <= CHAIN_TOLERANCE, worst


def test_one_mapping_swaps_only_the_person_its_reference_names(warm: WarmFaceFusionEngine, tmp_path: Path) -> None:
    # GIVEN a job with one mapping, naming the face at position 1 of the first frame
    frames, reference = _frames(), picture(SPEC, 0)
    source = face_image(person="b")
    job = _job("one-person", tmp_path, sources=(source,), options=OPTIONS,
               people=(Person((source,), reference, 1, reference_is_frame=True),))  # fmt: skip
    # WHEN the warm engine renders it
    out = list(warm.render(job, frames))
    # THEN exactly one of the two people is swapped in every frame, the same one throughout
    swapped = []
    for frame, image in zip(frames, out, strict=True):
        changes = _changed(frame.image, image, frame.index)
        assert sorted(change > 20 for change in changes) == [False, True], (frame.index, changes)
        assert min(changes) == 0, (frame.index, changes)
        swapped.append(changes.index(max(changes)))
    assert len(set(swapped)) == 1


def test_swap_then_enhance_are_two_passes_each_with_its_own_options_equal_to_two_runs_by_hand(
    home: harness.Harness, warm: WarmFaceFusionEngine, tmp_path: Path
) -> None:
    # GIVEN a job file's chain as one job: step 1 swaps b's face onto the face at position 0 of frame 0, step 2
    # enhances the face at position 0 of ITS target's frame 0 (step 1's output: the swapped face), each step
    # with options of its own
    frames, reference = _frames(), picture(SPEC, 0)
    source = face_image(person="b")
    swap = {**OPTIONS, "processors": ["face_swapper"]}
    enhance = {**OPTIONS, "processors": ["face_enhancer"]}
    people = (Person((source,), reference, 0, True, swap), Person((source,), reference, 0, True, enhance))
    job = _job("swap-enhance", tmp_path, sources=(source, source), options=enhance, people=people)
    # WHEN the warm engine renders it
    chained = list(warm.render(job, frames))
    # AND FaceFusion's own headless-run does the two steps by hand, as job-run does: the second on the first's
    # output, its reference face read from the first's output of frame 0
    by_hand = FaceFusionEngine(EngineSettings(home=home.home, python=home.python), harness.CPU_FACTS, env=home.env)
    by_hand.prepare()
    try:
        step = {**swap, "reference_face_position": 0}
        once = list(by_hand.render(_job("hand-swap", tmp_path, sources=(source,), options=step, reference=reference,
                                        reference_is_frame=True), frames))  # fmt: skip
        remixed = [Frame(frame.index, image) for frame, image in zip(frames, once, strict=True)]
        step = {**enhance, "reference_face_position": 0}
        twice = list(by_hand.render(_job("hand-enhance", tmp_path, sources=(source,), options=step,
                                         reference=once[0], reference_is_frame=True), remixed))  # fmt: skip
    finally:
        by_hand.close()
    # THEN the enhancer changed the swapped face in every frame (its channels rotated: not the swap's alone)
    for swapped, image, frame in zip(once, chained, frames, strict=True):
        assert max(_changed(swapped, image, frame.index)) > 20, frame.index
    # AND the frames are FaceFusion's own two runs'
    worst = max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in zip(chained, twice, strict=True))
    assert worst <= CHAIN_TOLERANCE, worst


def test_without_its_reference_after_the_swap_the_enhancer_finds_nobody(
    warm: WarmFaceFusionEngine, tmp_path: Path
) -> None:
    # The negative control of the test above: a mapping of `faces` (no options of its own) reads its reference
    # face from the ORIGINAL frame, whose face the swap has replaced, so an enhance pass named so enhances nothing.
    frames, reference = _frames(), picture(SPEC, 0)
    source = face_image(person="b")
    swap = {**OPTIONS, "processors": ["face_swapper"]}
    enhance = {**OPTIONS, "processors": ["face_enhancer"]}
    after = (Person((source,), reference, 0, True, swap), Person((source,), reference, 0, True, enhance))
    original = (Person((source,), reference, 0, True, swap), Person((source,), reference, 0, False, enhance))
    both = list(warm.render(_job("after", tmp_path, sources=(source, source), options=enhance, people=after), frames))
    swapped_only = list(
        warm.render(_job("original", tmp_path, sources=(source, source), options=enhance, people=original), frames)
    )
    for frame, plain, enhanced in zip(frames, swapped_only, both, strict=True):
        assert max(_changed(plain, enhanced, frame.index)) > 20, frame.index  # the control's enhancer did nothing
        assert sorted(change > 20 for change in _changed(frame.image, plain, frame.index)) == [False, True]
