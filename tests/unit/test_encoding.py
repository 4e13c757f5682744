from __future__ import annotations

from fractions import Fraction

import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.jobs.encoding import encoder_settings, quality_to_crf, track_timescale


def test_quality_maps_to_crf_like_facefusion() -> None:
    assert quality_to_crf(100) == 0
    assert quality_to_crf(80) == 10
    assert quality_to_crf(0) == 51


@pytest.mark.parametrize(
    "fps", [Fraction(25), Fraction(30000, 1001), Fraction(24), Fraction(60), Fraction(24000, 1001)]
)
def test_timescale_gives_whole_ticks_per_frame(fps: Fraction) -> None:
    timescale = track_timescale(fps)
    assert timescale >= 10_000
    assert (timescale / fps).denominator == 1


def test_unsupported_encoder_and_image_options_are_rejected_with_reasons() -> None:
    with pytest.raises(JobRejected, match="h264_nvenc"):
        encoder_settings(640, 360, Fraction(25), {"output_video_encoder": "h264_nvenc"}, 100)
    with pytest.raises(JobRejected, match="output_image_scale"):
        encoder_settings(640, 360, Fraction(25), {"output_image_scale": 2.0}, 100)


def test_settings_round_trip_through_json() -> None:
    settings = encoder_settings(640, 360, Fraction(30000, 1001), {}, 120)
    assert type(settings).from_dict(settings.to_dict()) == settings
    assert settings.frame_ticks * settings.fps_num == settings.timescale * settings.fps_den
