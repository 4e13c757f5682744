"""The classic engine with several faces on several people (issue 32), on real frames and dlib models:
each person is swapped with their own mapping's source, a face near nobody's reference is left alone,
and a mapping that cannot work is refused naming which one."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.clips import crossing_pair, pair_positions
from fleetctl import samples
from gpu_worker.engines.base import EngineError, EngineJob, Frame, Image, Person
from gpu_worker.engines.classic.engine import ClassicEngine

FRAMES = 8


@pytest.fixture(scope="module")
def pair() -> list[Image]:
    return list(crossing_pair(FRAMES))


def changed(before: Image, after: Image, place: tuple[float, float]) -> float:
    x, y = round(place[0]), round(place[1])
    region = (slice(max(0, y - 35), y + 35), slice(max(0, x - 35), x + 35))
    return float(np.abs(after[region].astype(np.int16) - before[region]).mean())


def render(engine: ClassicEngine, job: EngineJob, frames: list[Image]) -> list[Image]:
    return list(engine.render(job, [Frame(index, image) for index, image in enumerate(frames)]))


def test_each_person_gets_their_own_mappings_face(engine: ClassicEngine, pair: list[Image], grace: Image) -> None:
    astronaut = samples.astronaut()
    both = EngineJob("both", (astronaut, grace), people=(Person((astronaut,), grace), Person((grace,), astronaut)))
    # A mapping whose reference is Grace Hopper only: the astronaut is near nobody's reference.
    grace_only = EngineJob("grace-only", (astronaut,), people=(Person((astronaut,), grace),))
    engine.validate(both)
    out_both, out_grace = render(engine, both, pair), render(engine, grace_only, pair)
    for index in range(2, FRAMES):  # past the fade-in of faces found on the first frames
        places = pair_positions(index)
        assert changed(pair[index], out_both[index], places["grace"]) > 8, index
        assert changed(pair[index], out_both[index], places["astronaut"]) > 8, index
        assert changed(pair[index], out_grace[index], places["grace"]) > 8, index
        assert changed(pair[index], out_grace[index], places["astronaut"]) == 0, index
    # AND each person's swap is their own mapping's: Grace Hopper's place is the same in both jobs
    # (the astronaut's face on her), whatever the other mapping is
    last = pair_positions(FRAMES - 1)["grace"]
    assert changed(out_grace[-1], out_both[-1], last) < 1.0


def test_a_mapping_that_cannot_work_is_refused_naming_it(engine: ClassicEngine, grace: Image) -> None:
    blank = np.full((200, 200, 3), 128, np.uint8)
    no_reference = EngineJob("x", (grace,), people=(Person((grace,), grace), Person((grace,), blank)))
    with pytest.raises(EngineError, match=r"faces\[1\]: the reference image has no detectable face"):
        engine.validate(no_reference)
    no_source = EngineJob("y", (blank,), people=(Person((blank,), grace),))
    with pytest.raises(EngineError, match=r"faces\[0\]: "):
        engine.validate(no_source)
    many = EngineJob("z", (grace,), options={"face_selector_mode": "many"}, people=(Person((grace,), grace),))
    with pytest.raises(EngineError, match="face_selector_mode must be reference"):
        engine.validate(many)
