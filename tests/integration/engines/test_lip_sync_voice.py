"""A lip-sync job's voice, extracted once by its analysis step, is the voice FaceFusion 3.8.1 extracts: the
frames cut from it are `read_static_voice`'s, bit for bit, and a frame lip-synced from it is the frame
rendered the old way (each segment extracting the voice itself), whichever segment renders it.

FaceFusion's code with the harness's stand-in models (tests/support/lip_sync.py's jobs and segments).
Skipped with the reason where the harness cannot run.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmarks.parity.clips import write_voice
from gpu_worker.engines.facefusion import WarmFaceFusionEngine
from tests.support import facefusion_harness as harness
from tests.support.lip_sync import FRAMES, in_segments, lip_job, mouths, segment

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("facefusion_harness"),  # skipped where the harness is missing, failed in CI
]

# In FaceFusion's interpreter and folder: its state as its CLI sets it, then read_static_voice beside the
# frames FaceFusion's own extract_audio_frames cuts from the stored spectrogram.
COMPARE = """
import json, sys
import numpy
from facefusion import audio, state_manager
from facefusion.args import apply_args
from facefusion.program import create_program
voice, stored, rates = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sys.argv = ['facefusion.py', 'headless-run', '--execution-providers', 'cpu']
apply_args(vars(create_program().parse_args(sys.argv[1:])), state_manager.init_item)
spectrogram = numpy.load(stored)
found = {}
for fps in rates:
    theirs = audio.read_static_voice(voice, fps)
    ours = audio.extract_audio_frames(spectrogram, fps)
    found[str(fps)] = {'count': len(theirs), 'same_count': len(theirs) == len(ours),
                       'equal': all(a.dtype == b.dtype and a.shape == b.shape and numpy.array_equal(a, b)
                                    for a, b in zip(theirs, ours)),
                       'heard': int(sum(bool(numpy.any(a)) for a in theirs))}
print(json.dumps(found))
"""


def test_the_stored_voice_cuts_into_facefusions_own_voice_frames_bit_for_bit(
    home: harness.Harness, warm: WarmFaceFusionEngine, tmp_path: Path
) -> None:
    # GIVEN the harness's voice, extracted once as the analysis step does
    voice = write_voice(tmp_path / "voice.wav", 3.0)
    stored = tmp_path / "voice-spectrogram.npy"
    shape = warm.extract_voice(lip_job(tmp_path, voice), stored)
    assert shape[0] == 80 and np.load(stored).shape == shape
    # WHEN FaceFusion reads the voice itself, at the job's rate and at others
    done = subprocess.run(
        [home.python, "-c", COMPARE, str(voice), str(stored), json.dumps([25.0, 30.0, 29.97])],
        cwd=home.home, env=home.env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # THEN every frame cut from the stored voice is read_static_voice's frame, value for value
    for fps, seen in found.items():
        assert seen["same_count"] and seen["equal"], (fps, seen)
        assert seen["count"] >= 70 and seen["heard"] == seen["count"], (fps, seen)


def test_a_frame_lip_synced_from_the_stored_voice_is_the_frame_rendered_the_old_way(
    warm: WarmFaceFusionEngine, tmp_path: Path
) -> None:
    voice = write_voice(tmp_path / "voice.wav", 3.0)
    stored = tmp_path / "voice-spectrogram.npy"
    warm.extract_voice(lip_job(tmp_path, voice), stored)
    whole = segment(0, FRAMES)
    # GIVEN the old way: one segment, its engine extracting the voice itself
    old = mouths(list(warm.render(lip_job(tmp_path, voice), whole)), whole)
    # WHEN the job renders from the stored voice, in three segments (each with its lead-in)
    parts = in_segments(warm, replace(lip_job(tmp_path, voice), voice=stored), [(0, 13), (13, 27), (27, FRAMES)])
    # THEN every frame is the old way's, and the voice made a difference
    assert sorted(parts) == list(range(FRAMES))
    assert all(np.array_equal(parts[index], old[index]) for index in range(FRAMES))
    assert len({old[index].tobytes() for index in range(FRAMES)}) > FRAMES // 2
    # AND what is heard is the stored voice: another voice's (one frame late) moves the mouths
    late = tmp_path / "late-spectrogram.npy"
    warm.extract_voice(lip_job(tmp_path, write_voice(tmp_path / "late.wav", 3.0, late=1)), late)
    wrong = mouths(list(warm.render(replace(lip_job(tmp_path, voice), voice=late), whole)), whole)
    assert sum(not np.array_equal(wrong[index], old[index]) for index in range(FRAMES)) > FRAMES // 2
    # AND a trimmed job hears the stored voice from the trim's start, as it heard its own
    frames = segment(10, 30)
    trimmed_old = mouths(list(warm.render(lip_job(tmp_path, voice, start=10), frames)), frames)
    trimmed = mouths(list(warm.render(replace(lip_job(tmp_path, voice, start=10), voice=stored), frames)), frames)
    assert all(np.array_equal(trimmed[index], trimmed_old[index]) for index in range(10, 30))
    assert any(not np.array_equal(trimmed[index], old[index]) for index in range(10, 30))
