"""background_remover's matte carried as FaceFusion 3.8.1 carries it: where its output keeps alpha (rules read from
its source), the argv that pipes BGRA frames to VP9, the wire and the picture that keep it, and the refusal of a
background_remover that would change nothing."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fusionfleet.errors import SegmentFailed
from fusionfleet.facefusion.requirements import alpha_problems, image_keeps_alpha, video_keeps_alpha
from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.jobs.image_output import image_output
from fusionfleet.media.ffmpeg import concat_argv, encode_segment_argv, finalize_image_argv
from gpu_worker.engines.facefusion.wire import frame_bytes, frame_from, frame_shape, output_frame
from gpu_worker.rendering.frames import _checked_shape
from gpu_worker.rendering.stills import as_webp_temp, matte_alpha

REMOVER = {"processors": ["background_remover"]}
DISK = {**REMOVER, "workflow_strategy": "disk"}
BGRA = {**REMOVER, "temp_pixel_format": "bgra"}
GREEN = {"background_remover_fill_color": [0, 255, 0, 255]}


def _settings(options: dict[str, Any], container: str = "webm", engine: str = "facefusion") -> Any:
    return encoder_settings(64, 48, Fraction(25), options, 50, engine=engine, container=container)


@pytest.mark.parametrize(
    ("options", "encoder", "kept"),
    [
        (DISK, "libvpx-vp9", True),  # PNG temp frames (FaceFusion's default) read and written with their alpha
        ({**DISK, "temp_frame_format": "bmp"}, "libvpx-vp9", True),
        ({**DISK, "temp_frame_format": "tiff"}, "libvpx-vp9", True),
        (BGRA, "libvpx-vp9", True),  # the memory writer's bgra pipe
        (REMOVER, "libvpx-vp9", False),  # the memory writer's default bgr24 pipe drops it
        ({**REMOVER, "temp_pixel_format": "bgr24"}, "libvpx-vp9", False),
        ({**DISK, "temp_frame_format": "jpeg"}, "libvpx-vp9", False),  # cv2.imwrite's JPEG drops it
        (DISK, "libx264", False),  # yuv420p
        (BGRA, "libx265", False),
        (BGRA, "rawvideo", False),  # rgb24
        (BGRA, "libx264rgb", False),
        ({"processors": ["face_swapper"], "temp_pixel_format": "bgra"}, "libvpx-vp9", False),  # no matte at all
    ],
)
def test_a_video_keeps_alpha_only_where_facefusions_frames_and_encoder_carry_it(
    options: dict[str, Any], encoder: str, kept: bool
) -> None:
    assert video_keeps_alpha(options, encoder) is kept


@pytest.mark.parametrize(
    ("target", "output", "kept"),
    [
        ("png", "png", True),
        ("png", "webp", True),
        ("webp", "webp", True),
        ("webp", "png", True),
        ("bmp", "bmp", True),
        ("tiff", "tiff", True),
        ("png", "jpeg", False),  # the output drops it
        ("jpeg", "png", False),  # FaceFusion's temp image is in the target's format: a JPEG holds none
        ("jpeg", "jpeg", False),
    ],
)
def test_an_image_keeps_alpha_where_its_target_and_output_formats_both_hold_it(
    target: str, output: str, kept: bool
) -> None:
    assert image_keeps_alpha(REMOVER, target, output) is kept
    assert image_keeps_alpha({"processors": ["face_swapper"]}, target, output) is False


def test_a_background_remover_that_would_change_nothing_is_refused_with_what_would_make_it_work() -> None:
    # GIVEN the default fill colour (alpha 0: FaceFusion leaves the colours as they are) and no alpha kept
    (problem,) = alpha_problems(REMOVER, "libx264", None)
    assert "would change nothing" in problem and "background_remover_fill_color" in problem
    assert "temp_pixel_format bgra" in problem
    (image,) = alpha_problems(REMOVER, None, ("png", "jpeg"))
    assert "JPEG output of a PNG target" in image
    # THEN anything that makes it do something is taken: alpha kept, a fill or despill colour with alpha, a
    # colour given in fewer than four values (FaceFusion's normalize_color makes it opaque), a recolouring model
    assert alpha_problems(BGRA, "libvpx-vp9", None) == []
    assert alpha_problems(REMOVER, None, ("png", "webp")) == []
    assert alpha_problems({**REMOVER, **GREEN}, "libx264", None) == []
    assert alpha_problems({**REMOVER, "background_remover_fill_color": [0, 255, 0]}, "libx264", None) == []
    assert alpha_problems({**REMOVER, "background_remover_despill_color": [0, 255, 0, 128]}, "libx264", None) == []
    assert alpha_problems({**REMOVER, "background_remover_model": "corridor_key_1024"}, "libx264", None) == []
    assert alpha_problems({"processors": ["face_swapper"]}, "libx264", None) == []


def test_the_jobs_settings_say_alpha_where_facefusion_would_write_it_and_only_for_its_engine() -> None:
    assert _settings(DISK).alpha and _settings(BGRA, "mkv").alpha is False  # an MKV's default encoder is x264
    assert _settings({**BGRA, "output_video_encoder": "libvpx-vp9"}, "mkv").alpha
    assert _settings({**DISK, **GREEN}, "mp4").alpha is False
    assert _settings(REMOVER).alpha is False  # WebM, memory workflow, bgr24: FaceFusion writes it opaque
    assert _settings(DISK, engine="classic").alpha is False


def test_alpha_frames_are_piped_as_bgra_to_vp9_in_yuva420p_and_joined_by_copy_in_matroska() -> None:
    # GIVEN a job that keeps alpha and one that does not
    kept, opaque = _settings(DISK), _settings(REMOVER)
    argv = encode_segment_argv(64, 48, kept, Path("/w/c.mp4"))
    # THEN the engine's BGRA frames go in as bgra, VP9 codes them in yuva420p, in Matroska (which keeps alpha)
    assert argv[argv.index("rawvideo") - 1 : argv.index("rawvideo") + 3] == ["-f", "rawvideo", "-pix_fmt", "bgra"]
    assert argv[argv.index("-c:v") : argv.index("-c:v") + 2] == ["-c:v", "libvpx-vp9"]
    assert argv[argv.index("-crf") + 2 : argv.index("-crf") + 4] == ["-pix_fmt", "yuva420p"]
    assert argv[-3:] == ["-f", "matroska", "/w/c.mp4"]
    # AND without alpha the pipe stays BGR
    plain = encode_segment_argv(64, 48, opaque, Path("/w/c.mp4"))
    assert plain[plain.index("rawvideo") + 1 : plain.index("rawvideo") + 3] == ["-pix_fmt", "bgr24"]
    # AND chunks are joined by stream copy (the alpha side data travels with the packets)
    joined = concat_argv(Path("l.txt"), Path("s.mp4"), kept.codec)
    assert joined[-7:] == ["-c", "copy", "-fflags", "+bitexact", "-f", "matroska", "s.mp4"]


def test_an_image_job_keeps_alpha_in_its_output_and_the_finalize_argv_leaves_the_pixel_format_to_ffmpeg() -> None:
    png = image_output("png", (64, 48), REMOVER, "outputs/a.png")
    jpeg = image_output("png", (64, 48), REMOVER, "outputs/a.jpg")
    assert png.alpha and not jpeg.alpha
    # FaceFusion's finalize_image names no pixel format: FFmpeg's png/libwebp keep the RGBA picture's alpha
    assert "-pix_fmt" not in finalize_image_argv(Path("p.png"), Path("o.png"), png)


def test_the_wire_carries_bgra_frames_where_the_job_keeps_alpha_and_bgr_otherwise() -> None:
    bgr = np.full((4, 6, 3), 9, dtype=np.uint8)
    bgra = np.dstack([bgr, np.arange(24, dtype=np.uint8).reshape(4, 6)])
    # a frame FaceFusion gave a matte keeps it; one it left without (nothing removed) is opaque
    assert output_frame(bgra, True).shape == (4, 6, 4) and (output_frame(bgr, True)[:, :, 3] == 255).all()
    assert output_frame(bgra, False).shape == (4, 6, 3)
    assert frame_shape(output_frame(bgra, True)) == [4, 6, 4] and frame_shape(bgr) == [4, 6]
    back = frame_from({"shape": frame_shape(bgra)}, frame_bytes(bgra))
    assert np.array_equal(back, bgra)
    assert np.array_equal(frame_from({"shape": [4, 6]}, frame_bytes(bgr)), bgr)


def test_the_worker_takes_bgra_frames_only_from_a_job_that_keeps_alpha() -> None:
    bgra, bgr = np.zeros((4, 6, 4), np.uint8), np.zeros((4, 6, 3), np.uint8)
    assert _checked_shape(bgra, [], "s", "e", 4) is bgra
    with pytest.raises(SegmentFailed, match="not a BGRA picture"):
        _checked_shape(bgr, [], "s", "e", 4)
    with pytest.raises(SegmentFailed, match="not a BGR picture"):
        _checked_shape(bgra, [], "s", "e", 3)


def test_a_pictures_alpha_is_the_lower_of_the_targets_and_the_matte_and_none_where_all_opaque() -> None:
    target = np.array([[255, 100], [0, 255]], np.uint8)
    matte = np.array([[50, 200], [255, 255]], np.uint8)
    assert matte_alpha(target, matte).tolist() == [[50, 100], [0, 255]]  # type: ignore[union-attr]
    assert np.array_equal(matte_alpha(None, matte), matte)  # type: ignore[arg-type]
    assert matte_alpha(None, np.full((2, 2), 255, np.uint8)) is None  # FaceFusion writes no alpha then


def test_the_disk_workflows_vp9_converts_to_yuva420p_before_the_colour_conversion_as_facefusions_merge_does() -> None:
    # FaceFusion's merge_video: -vf fps,format=yuva420p,scale=out_color_matrix=bt709 (keep_video_alpha first)
    disk = encode_segment_argv(64, 48, _settings(DISK), Path("/w/c.mp4"))
    chain = disk[disk.index("-vf") + 1].split(",")
    assert chain[0] == "format=yuva420p" and chain[1].startswith("scale=out_color_matrix=bt709")
    # its memory writer converts from the piped frames directly, as every other encoder does
    for options, container in ((BGRA, "webm"), ({**DISK, "output_video_encoder": "libx264"}, "mp4")):
        argv = encode_segment_argv(64, 48, _settings(options, container), Path("/w/c.mp4"))
        assert argv[argv.index("-vf") + 1].startswith("scale=out_color_matrix=bt709"), options


def test_a_webp_targets_picture_has_no_colour_where_it_is_fully_transparent_as_facefusions_temp_webp() -> None:
    picture = np.full((2, 2, 3), 120, np.uint8)
    alpha = np.array([[0, 1], [255, 0]], np.uint8)
    blanked = as_webp_temp(picture, alpha)
    assert blanked[:, :, 0].tolist() == [[0, 120], [120, 0]] and (picture == 120).all()  # the input is left alone
