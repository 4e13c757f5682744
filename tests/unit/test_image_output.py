"""An image target's output decided with FaceFusion 3.8.1's rules; sniffing image targets; a test render's plan."""

from __future__ import annotations

import pytest

from fusionfleet.errors import InputRejected
from fusionfleet.jobs.image_output import (
    image_output,
    image_output_problem,
    output_kind_problem,
    output_suffix,
    scale_resolution,
    work_resolution,
)
from fusionfleet.jobs.plan import plan_segments
from fusionfleet.jobs.trial import frames_problem, trial_plan
from fusionfleet.media.ffmpeg import image_quality
from fusionfleet.media.sniff import IMAGE, VIDEO, sniff_target


@pytest.mark.parametrize(
    ("size", "scale", "expected"),
    [
        ((300, 300), 1.0, (300, 300)),
        ((301, 203), 0.5, (150, 100)),  # int(150.5) = 150; int(101.5) = 101 → round(50.5) × 2 = 100 (halves to even)
        ((333, 333), 1.0, (332, 332)),  # odd sides come out even, as FaceFusion's normalize_resolution makes them
        ((301, 203), 2.0, (602, 406)),
        ((3, 3), 0.25, (0, 0)),  # no pixel left
    ],
)
def test_the_output_size_is_facefusions(size: tuple[int, int], scale: float, expected: tuple[int, int]) -> None:
    assert scale_resolution(*size, scale) == expected


def test_the_picture_is_processed_at_the_smaller_of_the_two_sizes_by_facefusions_tuple_order() -> None:
    assert work_resolution((300, 300), (600, 600)) == (300, 300)  # scaled up: processed at the target's size
    assert work_resolution((300, 300), (150, 150)) == (150, 150)  # scaled down: shrunk first
    assert work_resolution((333, 333), (332, 332)) == (332, 332)


def test_an_image_output_keeps_the_target_format_unless_its_key_names_another() -> None:
    kept = image_output("png", (301, 203), {"output_image_scale": 0.5}, "outputs/a.png")
    assert (kept.format, kept.width, kept.height, kept.work_size, kept.quality) == ("png", 150, 100, (150, 100), 80)
    other = image_output("png", (301, 203), {"output_image_quality": 90}, "outputs/a.webp")
    assert (other.format, other.quality) == ("webp", 90)
    assert output_suffix("inputs/a.jpeg", "jpeg") == ".jpeg" and output_suffix("inputs/a.mp4", "png") == ".png"
    assert image_output_problem((3, 3), {"output_image_scale": 0.25}) is not None


def test_an_output_key_must_suit_its_target() -> None:
    assert (
        output_kind_problem("video", "outputs/a.mp4") is None and output_kind_problem("image", "outputs/a.tif") is None
    )
    assert "the target is a video" in (output_kind_problem("video", "outputs/a.png") or "")
    assert "the target is an image" in (output_kind_problem("image", "outputs/a.mp4") or "")


def test_image_quality_is_facefusions_mapping() -> None:
    assert image_quality("jpeg", 80) == ["-q:v", "6"] and image_quality("jpeg", 100) == ["-q:v", "0"]
    assert image_quality("webp", 80) == ["-q:v", "80"]


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00", (VIDEO, "mov")),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", (IMAGE, "jpeg")),
        (b"BM" + b"\x00" * 12 + (40).to_bytes(4, "little"), (IMAGE, "bmp")),
        (b"II*\x00\x08\x00\x00\x00", (IMAGE, "tiff")),
        (b"MM\x00*\x00\x00\x00\x08", (IMAGE, "tiff")),
    ],
)
def test_a_target_is_told_by_its_bytes(head: bytes, expected: tuple[str, str]) -> None:
    assert sniff_target(head, "target") == expected


def test_a_target_that_is_neither_is_named() -> None:
    with pytest.raises(
        InputRejected,
        match=r"neither a video in an accepted container .* nor a JPEG, PNG, WebP, BMP or TIFF image: it is a GIF",
    ):
        sniff_target(b"GIF89a", "target 'x.gif'")


def test_a_test_render_warms_each_frame_from_its_full_plan_segment() -> None:
    from fractions import Fraction

    full = plan_segments(750, Fraction(25))  # 30 s: 8 segments of 93 or 94 frames
    plan = trial_plan([0, 120, 749], full, 25, 1)
    assert [(s.index, s.start_frame, s.end_frame, s.warm_from) for s in plan] == [
        (0, 0, 1, 0),
        (1, 120, 121, 94),
        (2, 749, 750, 657),
    ]
    assert plan[1].engine_start == 94 and full[0].engine_start == 0
    assert frames_problem([0, 750], 750) is not None and frames_problem([749], 750) is None
