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


def test_an_encoder_the_fleet_lacks_is_rejected_with_its_reason_and_image_options_pass() -> None:
    with pytest.raises(JobRejected, match="h264_nvenc"):
        encoder_settings(640, 360, Fraction(25), {"output_video_encoder": "h264_nvenc"}, 100)
    # (an image target's options: a video's encoder ignores them, as FaceFusion does)
    assert encoder_settings(640, 360, Fraction(25), {"output_image_scale": 2.0}, 100).width == 640


def test_settings_round_trip_through_json() -> None:
    settings = encoder_settings(640, 360, Fraction(30000, 1001), {}, 120)
    assert type(settings).from_dict(settings.to_dict()) == settings
