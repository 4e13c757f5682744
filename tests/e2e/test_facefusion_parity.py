"""FaceFusion on the farm is FaceFusion: the parity tool's small matrix, run as `make test` runs it.

The tool (benchmarks/parity) renders a generated clip twice with the same options and the harness's
stand-in models: with FaceFusion 3.8.1's own `headless-run` on this machine, and through a local farm
of its own (LocalStack over HTTP, warm FaceFusion workers, segments); then judges the two frame by
frame, in duration, audio samples and colour tags. The full matrix is `make bench-parity`. Skipped
with the reason where the harness cannot run (no FaceFusion checkout or no `.venv-facefusion`); in CI
(`CI=true`) it fails instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.parity.clips import layout, write_clip, write_source
from benchmarks.parity.farm import Farm
from benchmarks.parity.judge import AUDIO_SNR_GOAL, PSNR_GOAL
from benchmarks.parity.run import run_case
from benchmarks.parity_matrix import MatrixCase, matrix
from tests.support import facefusion_harness as harness

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("facefusion_harness"),  # skipped where the harness is missing, failed in CI
]

QUICK_CASES = [item for item in matrix() if item.quick]
SECONDS = 6.0  # two segments of the farm's fixed plan (4 s each, at least 2)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> harness.Harness:
    return harness.prepare(tmp_path_factory.mktemp("parity-home"))


@pytest.fixture(scope="module")
def farm(home: harness.Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with Farm(home, tmp_path_factory.mktemp("parity-farm")) as started:
        yield started


@pytest.mark.parametrize("item", QUICK_CASES, ids=[item.case.name for item in QUICK_CASES])
def test_facefusion_on_the_farm_gives_what_facefusion_gives_on_one_machine(
    farm: Farm, home: harness.Harness, item: MatrixCase, tmp_path: Path
) -> None:
    # GIVEN a 6 s clip of the harness's person moving, its frame number drawn into every frame, with
    # audio whose loudness changes, and a case of the parity tool's small matrix
    spec = replace(item.clip, seconds=SECONDS)
    clip = write_clip(tmp_path / "clip.mp4", spec)
    face = write_source(tmp_path / "face.png")
    # WHEN the tool renders it with FaceFusion's own headless-run and through the farm, in 2 segments
    outcome = run_case(replace(item.case, segments=2), home, farm, [face], clip, tmp_path, layout(spec))
    line = outcome.line()
    # THEN the two are equal: every frame (PSNR at least the goal; the same number read at its foot and
    # in its face), frame count and duration, the audio (no offset, the same samples) and the colour tags
    assert line["equal"], outcome.account()
    assert line["frames"] == [150, 150] and line["min_psnr"] >= PSNR_GOAL and line["segments"] >= 2, line
    assert line["content"]["strips_read"] == 150 and line["content"]["faces_read"] == 150, line["content"]
    assert line["audio"]["tracks"] == [1, 1] and line["audio"]["snr_db"] >= AUDIO_SNR_GOAL, line
    assert line["audio"]["offset_samples"] == 0, line
