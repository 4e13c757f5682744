"""No option is refused after a job was accepted, judged by FaceFusion 3.8.1 itself: every option set the
submit-time validation accepts goes through what the warm process does before a segment's first frame
(FaceFusion's own parser, validation, apply_args and each processor's pre_process) and none is refused.

Options that change how faces are found are pre-processed with the face debugger instead of the default
face swapper: the swapper's pre-processing looks for a face in the source, and with the stand-in detector
(one fixed face, its brightness as its score) that says nothing about the option. A source in which
FaceFusion's real detector finds no face is the job's input, refused as such on its first segment
(InputRejected: no retries, FaceFusion's words in the notice); validation cannot run FaceFusion's models.

Needs the FaceFusion harness (tests/support/facefusion_harness.py); skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import subprocess
import wave
from pathlib import Path

import cv2
import numpy as np
import pytest

from gpu_worker.engines.facefusion import warm_server
from gpu_worker.engines.facefusion.warm import _segment_paths, segment_argv
from tests.support import facefusion_harness as harness
from tests.support.option_walk import accepted

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("facefusion_harness"),  # skipped where the harness is missing, failed in CI
]
CHECKER = Path(__file__).resolve().parents[2] / "support" / "facefusion_option_check.py"
EXECUTION = ["--execution-providers", "cpu", "--execution-thread-count", "1"]


def write_tone(path: Path, seconds: float = 2.0, rate: int = 48000) -> None:
    samples = (np.sin(np.arange(int(seconds * rate)) * 2 * np.pi * 220 / rate) * 8000).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())


FACE_FINDING = ("face_detector_", "face_landmarker_")


def _without_source_detection(options: dict[str, object]) -> dict[str, object]:
    if "processors" in options or not any(name.startswith(FACE_FINDING) for name in options):
        return options
    return {**options, "processors": ["face_debugger"]}


def verdicts(home: harness.Harness, argvs: list[list[str]]) -> list[str | None]:
    done = subprocess.run(
        [home.python, str(CHECKER), str(warm_server.__file__)],
        input=json.dumps(argvs), capture_output=True, text=True, cwd=home.home, env=home.env, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    answer: list[str | None] = json.loads(done.stdout)
    return answer


def test_facefusion_takes_every_option_set_validation_accepts(home: harness.Harness, tmp_path: Path) -> None:
    # GIVEN FaceFusion's code with the stand-in models, and a job's inputs as the warm engine lays them out:
    # a face image and an audio file as sources, the reference frame as the target
    folder = tmp_path / "inputs"
    audio = tmp_path / "job" / "source-audio.wav"
    audio.parent.mkdir()
    write_tone(audio)
    paths = _segment_paths(folder, 1, audio)
    cv2.imwrite(str(paths.sources[0]), harness.face_image())
    cv2.imwrite(str(paths.target), harness.face_image())
    # AND every option set of the catalogue walk that validation accepts for the facefusion engine
    cases = accepted("facefusion")
    argvs = [segment_argv(paths, _without_source_detection(case.options), EXECUTION) for case in cases]
    # WHEN the warm process configures and pre-processes each THEN FaceFusion refuses none of them
    late = [f"{case.label}: {verdict}" for case, verdict in zip(cases, verdicts(home, argvs), strict=True) if verdict]
    assert not late, f"{len(late)} of {len(cases)} accepted option sets refused by FaceFusion: " + "; ".join(late)


def test_the_walk_would_see_a_refusal(home: harness.Harness, tmp_path: Path) -> None:
    # The judge is not blind: without the audio file, FaceFusion's lip syncer refuses (as validation does).
    paths = _segment_paths(tmp_path / "inputs", 1)
    cv2.imwrite(str(paths.sources[0]), harness.face_image())
    cv2.imwrite(str(paths.target), harness.face_image())
    (verdict,) = verdicts(home, [segment_argv(paths, {"processors": ["lip_syncer"]}, EXECUTION)])
    assert verdict is not None and "audio" in verdict.lower()
