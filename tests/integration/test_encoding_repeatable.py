"""Encoder settings give bit-identical output on busy cores: runs ffmpeg and busy processes."""

from __future__ import annotations

from fractions import Fraction

from fusionfleet.jobs.encoding import encoder_settings


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


def test_quality_100_is_lossless_h264_that_ffmpeg_encodes_and_decodes_to_the_same_pixels() -> None:
    # GIVEN a job asking for FaceFusion's best quality (CRF 0), which the High profile refuses
    import tempfile
    from pathlib import Path

    import cv2
    import numpy as np

    from fleetctl import samples
    from fusionfleet.media.ffmpeg import encode_segment_argv
    from fusionfleet.media.runner import FramePipe

    frames = list(samples.astronaut_frames(5, 320, 240))
    settings = encoder_settings(320, 240, Fraction(25), {"output_video_quality": 100}, 125)
    assert (settings.crf, settings.profile) == (0, "high444")
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "segment.mp4"
        # WHEN its frames are encoded
        with FramePipe(encode_segment_argv(320, 240, settings, output), "test", timeout_s=60) as pipe:
            for frame in frames:
                pipe.write(frame)
        # THEN ffmpeg accepted it and every frame decodes (OpenCV's own FFmpeg) close to its source: only
        # the BGR → YUV 4:2:0 conversion loses anything, the coding none
        capture = cv2.VideoCapture(str(output))
        decoded = []
        while True:
            ok, image = capture.read()
            if not ok:
                break
            decoded.append(image)
    assert len(decoded) == len(frames)
    for source, image in zip(frames, decoded, strict=True):
        assert cv2.PSNR(np.ascontiguousarray(source), image) > 35
