"""The parity judge's negative controls: what it must call different, and what it must call equal.

Each control is a pair of encoded videos made here from the harness's scene (two people, each face and
the frame's foot carrying the frame number): a "render" in which person a is swapped (its face negated
and tinted, as the stand-in swapper does), and a candidate that is either a faithful re-encode of it or
the same render with one defect the judge must find — a face carrying the next frame's code in a few
frames, the sound one video frame late, a swap from the wrong source, the wrong person swapped, a frame
dropped. The judge reads the files as it reads the parity tool's (benchmarks/parity/judge.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from benchmarks.parity.clips import ClipSpec, faces_at, layout, write_clip
from benchmarks.parity.judge import (
    CODE_TOLERANCE,
    FACE_COLOUR_TOLERANCE,
    PSNR_GOAL,
    Allowance,
    Difference,
    Layout,
    Verdict,
    judge,
    unexplained,
)
from fleetctl.harness.geometry import FACE_HEIGHT, FACE_WIDTH
from fleetctl.harness.pictures import Image, Placed, background, draw_code, draw_face
from fusionfleet.media.runner import ffmpeg_exe

SPEC = ClipSpec(seconds=3.0, scene="two")  # 75 frames, a moving and b still, 320×240
DEFECT_FRAMES = (30, 32, 34)  # even: the next number differs in one bit, one cell of the code
GRAIN = 4.0  # levels (standard deviation) of noise over the background
TINT = np.array([-4.0, 6.0, -10.0])  # BGR: the stand-in swap's tint for source a, roughly, in levels


def swapped(placed: Placed, number: int, image: Image, sign: float = 1.0, code: int | None = None) -> None:
    """Person `placed` swapped the way the stand-in swapper does it: the face negated, then tinted."""
    draw_face(image, placed, number if code is None else code)
    region = image[placed.y : placed.y + FACE_HEIGHT, placed.x : placed.x + FACE_WIDTH].astype(np.float64)
    image[placed.y : placed.y + FACE_HEIGHT, placed.x : placed.x + FACE_WIDTH] = np.clip(
        255 - region + sign * TINT, 0, 255
    ).astype(np.uint8)


def render(
    number: int, *, who: str = "a", sign: float = 1.0, next_code_at: tuple[int, ...] = (), drop: int | None = None
) -> Image:
    """Frame `number` of a render that swaps `who` (tint sign `sign`); the frames in `next_code_at` carry the
    next frame's code in the swapped face; a `drop` makes every frame from it on show the next one."""
    if drop is not None and number >= drop:
        number += 1
    image = background(*SPEC.size, shade=(number // 5) % 8)
    # Grain, as footage has: the encoder's loss on it brings a faithful re-encode's PSNR near the old 40 dB bar.
    grain = np.random.default_rng(number).normal(0.0, GRAIN, image.shape)
    image[...] = np.clip(image + grain, 0, 255).astype(np.uint8)
    for placed in faces_at(SPEC, number):
        if placed.person == who:
            swapped(placed, number, image, sign, code=number + 1 if number in next_code_at else None)
        else:
            draw_face(image, placed, number)
    draw_code(image, 4, SPEC.size[1] - 24, number)
    return image


def encode(path: Path, draw: Callable[[int], Image]) -> Path:
    return write_clip(path, SPEC, draw)


def ffmpeg(*args: str) -> None:
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", *args], check=True, timeout=120)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("judge-controls")


@pytest.fixture(scope="module")
def reference(folder: Path) -> Path:
    return encode(folder / "reference.mp4", render)


@pytest.fixture(scope="module")
def where() -> Layout:
    return layout(SPEC)


def verdict(reference: Path, candidate: Path, where: Layout) -> Verdict:
    return judge(reference, candidate, where)


def kinds(found: Verdict) -> set[str]:
    return {item.kind for item in found.found}


@pytest.mark.parametrize(("crf", "preset"), [(6, "medium"), (18, "veryfast")])
def test_a_faithful_re_encode_is_equal(reference: Path, folder: Path, where: Layout, crf: int, preset: str) -> None:
    # GIVEN the render re-encoded by x264 (a second encode, as the farm's output is; crf 18 brings every
    # frame near the PSNR bar), the sound copied
    again = folder / f"re-encoded-{crf}.mp4"
    ffmpeg("-i", str(reference), "-c:v", "libx264", "-crf", str(crf), "-preset", preset, "-c:a", "copy", str(again))
    # WHEN judged THEN equal, with every strip and every face read, the codes and colours well inside the bounds
    found = verdict(reference, again, where)
    assert found.equal, found.differences
    assert found.content["strips_read"] == 75 and found.content["faces_read"] == 150, found.content
    assert found.content["most_code_moved"] < CODE_TOLERANCE / 2, found.content
    assert found.content["most_face_colour_moved"] < FACE_COLOUR_TOLERANCE / 2, found.content
    assert found.audio["offset_samples"] == 0


def test_a_face_from_the_next_frame_is_a_difference_psnr_cannot_see(
    reference: Path, folder: Path, where: Layout
) -> None:
    # GIVEN the same render but for three frames whose swapped face carries the next frame's code
    candidate = encode(folder / "next-face.mp4", lambda number: render(number, next_code_at=DEFECT_FRAMES))
    found = verdict(reference, candidate, where)
    # THEN not equal: the faces' codes, in exactly those frames, though every frame passes the PSNR bar
    assert not found.equal
    assert kinds(found) == {"face_code"}, found.differences
    assert next(item.value for item in found.found if item.kind == "face_code") == len(DEFECT_FRAMES)
    assert found.min_psnr is not None and found.min_psnr >= PSNR_GOAL


def test_sound_one_video_frame_late_is_a_difference(reference: Path, folder: Path, where: Layout) -> None:
    # GIVEN the render with its sound delayed by one video frame (40 ms), the picture copied
    late = folder / "late.mp4"
    ffmpeg("-i", str(reference), "-c:v", "copy", "-af", "adelay=40:all=1", "-c:a", "aac", "-b:a", "192k",
           "-t", "3", str(late))  # fmt: skip
    found = verdict(reference, late, where)
    # THEN not equal, and the offset found is one frame's samples (1,920 at 48 kHz), within an AAC frame's slack
    assert "audio_offset" in kinds(found), found.differences
    assert found.audio["offset_samples"] == pytest.approx(1920, abs=48)


def test_a_swap_from_the_wrong_source_is_a_difference(reference: Path, folder: Path, where: Layout) -> None:
    # GIVEN the render whose swap took the other source (its tint the other way)
    candidate = encode(folder / "wrong-source.mp4", lambda number: render(number, sign=-1.0))
    found = verdict(reference, candidate, where)
    # THEN the faces' colour says so in every frame (their codes are right: the frames are)
    assert "face_colour" in kinds(found) and "face_code" not in kinds(found), found.differences
    assert next(item.value for item in found.found if item.kind == "face_colour") == 75


def test_the_wrong_person_swapped_is_a_difference(reference: Path, folder: Path, where: Layout) -> None:
    # GIVEN a render that swapped person b instead of person a (a reference taken from the wrong face)
    candidate = encode(folder / "wrong-person.mp4", lambda number: render(number, who="b"))
    found = verdict(reference, candidate, where)
    # THEN both faces differ, in code (one negated, one not) and in colour
    assert {"face_code", "face_colour"} <= kinds(found), found.differences


def test_a_dropped_frame_is_a_difference(reference: Path, folder: Path, where: Layout) -> None:
    # GIVEN a render that lost frame 40 (every later frame shows the next one; the last repeats a frame past the end)
    candidate = encode(folder / "dropped.mp4", lambda number: render(number, drop=40))
    found = verdict(reference, candidate, where)
    # THEN the numbers at the foot differ from frame 40 on
    assert "strip_code" in kinds(found), found.differences
    assert next(item.value for item in found.found if item.kind == "strip_code") == 75 - 40


def test_a_deliberate_difference_excuses_only_itself() -> None:
    # GIVEN a case that documents its sound as 1,024 samples late
    allowed = (Allowance("audio_offset", 1024, 8), Allowance("audio_samples"))
    offset = Difference("audio_offset", "late", 1024.0)
    # THEN that offset is excused, another offset is not, and a face from another frame never is
    assert unexplained([offset, Difference("audio_samples", "snr", 3.0)], allowed) == []
    other = Difference("audio_offset", "late", 1920.0)
    face = Difference("face_code", "frame 30", 1.0)
    assert unexplained([other, face], allowed) == [other, face]
