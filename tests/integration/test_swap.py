"""`fusionfleet swap`: one video on this machine, no cloud, through the workers' own pipeline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from fleetctl.samples import grace_hopper_path, read_stamp
from tests.support.media import decode_all, ffmpeg, write_video

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
    outputs = {}
    for engine in ("classic", "copy"):
        outputs[engine] = tmp_path / f"{engine}.mp4"
        result = swap(
            "--source", str(grace_hopper_path()), "--target", str(target), "--output", str(outputs[engine]),
            "--engine", engine, "--quality", "realtime", "--face-selector-mode", "one",
        ) if engine == "classic" else swap(
            "--source", str(grace_hopper_path()), "--target", str(target), "--output", str(outputs[engine]),
            "--engine", engine,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    (_, frames), (_, copied) = decode_all(outputs["classic"]), decode_all(outputs["copy"])
    assert len(frames) == len(copied) == 25
    # Against the same frames encoded without a swap (the copy engine), the frame's edges do not change
    # beyond encoder noise, and the face region changed far more.
    difference = np.abs(frames[12].astype(np.int16) - copied[12]).mean(axis=2)
    edges = max(difference[:, :60].mean(), difference[:, -60:].mean(), difference[:40].mean(), difference[-40:].mean())
    assert edges < 0.1, edges
    assert difference[80:200, 200:400].mean() > max(5.0, 10 * edges)


def _audio_of(path: Path) -> tuple[str, np.ndarray]:
    """The first audio track's codec and its decoded samples, read with PyAV (not the merge's ffmpeg)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        samples = [frame.to_ndarray() for frame in container.decode(stream)]
        return stream.codec_context.name, np.concatenate(samples, axis=1)


def test_audio_options_are_applied_as_facefusion_applies_them(clip: Path, tmp_path: Path) -> None:
    # GIVEN the clip, whose AAC sine tone is audible
    _, original = _audio_of(clip)
    assert np.abs(original).max() > 0.05
    # WHEN it is swapped with FaceFusion's audio options: Opus, and volume 0
    output = tmp_path / "muted.mp4"
    result = swap(
        "--source", str(grace_hopper_path()), "--target", str(clip), "--output", str(output), "--engine", "copy",
        "--output-audio-encoder", "libopus", "--output-audio-quality", "50", "--output-audio-volume", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # THEN the track is Opus, as long as the source's, and silent (FaceFusion's volume 0 mutes)
    codec, samples = _audio_of(output)
    info, frames = decode_all(output)
    assert codec == "opus" and len(frames) == 100
    assert abs(info.audio[0].duration_s - 4.0) < 0.05
    assert np.abs(samples).max() == 0


def test_an_option_the_engine_would_ignore_is_refused_before_anything_renders(clip: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.mp4"
    result = swap(
        "--source", str(grace_hopper_path()), "--target", str(clip), "--output", str(output), "--engine", "copy",
        "--face-enhancer-model", "gfpgan_1.4",
    )  # fmt: skip
    assert result.returncode != 0
    assert "options.face_enhancer_model: the copy engine does not apply it" in result.stderr
    assert not output.exists()


def test_a_model_the_worker_image_does_not_carry_is_refused_before_anything_renders(clip: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.mp4"
    result = swap(
        "--source", str(grace_hopper_path()), "--target", str(clip), "--output", str(output), "--engine", "facefusion",
        "--processors", "deep_swapper", "--deep-swapper-model", "druuzil/adam_levine_320",
    )  # fmt: skip
    assert result.returncode != 0
    assert "options.deep_swapper_model: the worker image does not carry the model 'druuzil/adam_levine_320'" in (
        result.stderr
    )
    assert not output.exists()


def test_swap_renders_a_trim_slowed_down_with_an_audio_source_and_refuses_lip_sync_without_one(
    clip: Path, tmp_path: Path
) -> None:
    # GIVEN frames 10..59 of the clip wanted at 12.5 fps, and a 2 s voice (an Ogg file named like nothing)
    voice = tmp_path / "voice"
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=300:duration=2", "-c:a", "libvorbis", "-f", "ogg", str(voice))
    output = tmp_path / "out.mp4"
    result = swap(
        "--source", str(grace_hopper_path()), "--source", str(voice), "--target", str(clip), "--output", str(output),
        "--engine", "copy", "--trim-frame-start", "10", "--trim-frame-end", "60", "--output-video-fps", "12.5",
    )  # fmt: skip
    # THEN it renders every frame of the range, slower (FaceFusion's memory workflow), with the voice as audio
    assert result.returncode == 0, result.stderr
    info, frames = decode_all(output)
    assert [read_stamp(frame) for frame in frames] == list(range(10, 60))
    assert info.fps == 12.5 and abs(info.duration_s - 4.0) < 0.08
    assert len(info.audio) == 1 and abs(info.audio[0].duration_s - 2.0) < 0.05
    # AND a lip sync without an audio source is refused before anything renders, saying why
    refused = swap(
        "--source", str(grace_hopper_path()), "--target", str(clip), "--output", str(tmp_path / "no.mp4"),
        "--engine", "facefusion", "--processors", "lip_syncer",
    )  # fmt: skip
    assert refused.returncode == 1 and "lip_syncer needs an audio file among the sources" in refused.stderr
