from __future__ import annotations

from fractions import Fraction

import pytest

from fusionfleet.encoding import encoder_settings, quality_to_crf, track_timescale
from fusionfleet.errors import JobRejected


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


def test_unsupported_encoder_and_fps_change_are_rejected_with_reasons() -> None:
    with pytest.raises(JobRejected, match="h264_nvenc"):
        encoder_settings(640, 360, Fraction(25), {"output_video_encoder": "h264_nvenc"}, 100)
    with pytest.raises(JobRejected, match="output_video_fps"):
        encoder_settings(640, 360, Fraction(25), {"output_video_fps": 30.0}, 100)


def test_settings_round_trip_through_json() -> None:
    settings = encoder_settings(640, 360, Fraction(30000, 1001), {}, 120)
    assert type(settings).from_dict(settings.to_dict()) == settings
    assert settings.frame_ticks * settings.fps_num == settings.timescale * settings.fps_den


def test_encoding_is_repeatable_while_the_cpu_is_contended() -> None:
    # GIVEN busy cores (what a fleet host looks like) and the job's encoder settings
    import hashlib
    import multiprocessing
    import tempfile
    from pathlib import Path

    import av

    from fleetctl import samples
    from fusionfleet.media.ffmpeg import encode_segment_argv
    from fusionfleet.media.runner import FramePipe

    frames = list(samples.astronaut_frames(40, 320, 240))
    settings = encoder_settings(320, 240, Fraction(25), {}, 125, threads=2)
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(3)]
    for burner in burners:
        burner.start()
    digests = set()
    try:
        with tempfile.TemporaryDirectory() as folder:
            output = Path(folder) / "segment.mp4"
            # WHEN the same frames are encoded several times
            for _ in range(5):
                with FramePipe(encode_segment_argv(320, 240, settings, output), "test", timeout_s=60) as pipe:
                    for frame in frames:
                        pipe.write(frame)
                with av.open(str(output)) as container:
                    digests.add(
                        hashlib.sha256(b"".join(bytes(p) for p in container.demux(video=0) if p.size)).hexdigest()
                    )
    finally:
        for burner in burners:
            burner.terminate()
    # THEN every encode is bit-identical (a redelivered segment equals the first rendering)
    assert len(digests) == 1


def _burn() -> None:
    while True:
        pass
