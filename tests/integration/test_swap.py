"""`fusionfleet swap`: one video on this machine, no cloud, through the workers' own pipeline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from fleetctl.samples import grace_hopper_path, read_stamp
from tests.support.media import decode_all, write_video

ROOT = Path(__file__).resolve().parents[2]


def swap(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetctl.cli", "swap", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_swap_renders_a_frame_exact_video_with_its_audio(clip: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.mp4"
    result = swap(
        "--source", str(grace_hopper_path()), "--target", str(clip), "--output", str(output), "--engine", "copy"
    )
    assert result.returncode == 0, result.stderr
    info, frames = decode_all(output)
    assert [read_stamp(frame) for frame in frames] == list(range(100))
    assert len(info.audio) == 1 and abs(info.audio[0].duration_s - 4.0) < 0.05
    assert "100 frames" in result.stderr


def test_swap_with_the_built_in_engine_changes_the_face_only(tmp_path: Path) -> None:
    target = write_video(tmp_path / "astronaut.mp4", seconds=1, fps=25, width=640, height=360)
    output = tmp_path / "out.mp4"
    result = swap(
        "--source", str(grace_hopper_path()), "--target", str(target), "--output", str(output),
        "--engine", "classic", "--quality", "realtime", "--face-selector-mode", "one",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (_, source_frames), (_, frames) = decode_all(target), decode_all(output)
    assert len(frames) == 25
    difference = np.abs(frames[12].astype(np.int16) - source_frames[12]).mean(axis=2)
    # The face region changed far more than the frame's edges, which differ only by re-encoding.
    edges = max(difference[:, :60].mean(), difference[:, -60:].mean())
    assert difference[80:200, 200:400].mean() > max(5.0, 3 * edges)


def test_swap_refuses_bad_options_and_inputs_clearly(tmp_path: Path) -> None:
    notes = tmp_path / "notes.mp4"
    notes.write_text("not a video")
    bad_option = swap("--source", str(grace_hopper_path()), "--target", str(notes), "--output", "o.mp4",
                      "--face-selector-mode", "several")  # fmt: skip
    assert bad_option.returncode == 2 and "--face-selector-mode: 'several' is not one of" in bad_option.stderr
    bad_input = swap(
        "--source", str(grace_hopper_path()), "--target", str(notes), "--output", "o.mp4", "--engine", "copy"
    )
    assert bad_input.returncode == 1 and "is not a video in an accepted container" in bad_input.stderr
