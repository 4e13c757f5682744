"""The ffmpeg command lines, by list equality (no ffmpeg is run)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.media.ffmpeg import audio_codec_args, encode_segment_argv, merge_argv, size_filter

SETTINGS = encoder_settings(640, 360, Fraction(25), {"output_video_quality": 80}, max_segment_frames=125)


def test_segment_encoding_uses_the_jobs_fixed_settings() -> None:
    argv = encode_segment_argv(640, 360, SETTINGS, Path("/w/segment.mp4"))
    assert argv == [
        "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
        "-protocol_whitelist", "pipe", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", "640x360",
        "-framerate", "25/1", "-i", "pipe:0",
        "-c:v", "libx264", "-preset", "veryfast", "-crf", "10", "-profile:v", "high", "-pix_fmt", "yuv420p",
        "-threads", "2", "-x264-params", "keyint=50:min-keyint=50:scenecut=0:open-gop=0:sliced-threads=1",
        "-fps_mode", "passthrough",
        "-an", "-video_track_timescale", "10000", "-f", "mp4", "/w/segment.mp4",
    ]  # fmt: skip


def test_odd_sizes_are_padded_by_repeating_the_edge() -> None:
    odd = encoder_settings(853, 480, Fraction(25), {}, 100)
    assert (odd.width, odd.height) == (854, 480)
    assert size_filter(853, 480, odd) == ["-vf", "pad=854:480,fillborders=right=1:bottom=0:mode=smear"]
    assert size_filter(640, 360, SETTINGS) == []


def test_scaled_output_uses_a_scale_filter() -> None:
    half = encoder_settings(1280, 720, Fraction(25), {"output_video_scale": 0.5}, 100)
    assert size_filter(1280, 720, half) == ["-vf", "scale=640:360:flags=bicubic"]


def test_merge_copies_video_and_muxes_audio_once() -> None:
    argv = merge_argv(Path("/w/list.txt"), Path("/w/audio.mka"), ["aac"], 0.0, Path("/w/out.mp4"))
    assert argv == [
        "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
        "-protocol_whitelist", "file", "-f", "concat", "-safe", "1", "-i", "/w/list.txt",
        "-protocol_whitelist", "file", "-f", "matroska", "-i", "/w/audio.mka",
        "-map", "0:v:0", "-map", "1:a", "-c:v", "copy", "-c:a", "copy",
        "-movflags", "+faststart", "-f", "mp4", "/w/out.mp4",
    ]  # fmt: skip


def test_merge_without_audio_maps_only_video() -> None:
    argv = merge_argv(Path("/w/list.txt"), None, [], 0.0, Path("/w/out.mp4"))
    assert "-map" in argv and "1:a" not in argv and "-c:a" not in argv


def test_audio_offset_is_applied_to_the_audio_input() -> None:
    argv = merge_argv(Path("/l.txt"), Path("/a.mka"), ["aac"], 0.021333, Path("/o.mp4"))
    position = argv.index("-itsoffset")
    assert argv[position : position + 2] == ["-itsoffset", "0.021333"]
    assert argv.index("/a.mka") > position


def test_audio_the_mp4_muxer_cannot_take_is_reencoded() -> None:
    assert audio_codec_args(["aac", "opus"]) == ["-c:a", "copy"]
    assert audio_codec_args(["aac", "pcm_s16le"]) == ["-c:a", "aac", "-b:a", "192k"]


def test_every_input_has_a_protocol_whitelist_and_forced_format() -> None:
    argv = merge_argv(Path("/l.txt"), Path("/a.mka"), ["aac"], 0.0, Path("/o.mp4"))
    inputs = [i for i, arg in enumerate(argv) if arg == "-i"]
    for position in inputs:
        window = argv[max(0, position - 6) : position]
        assert "-protocol_whitelist" in window and "-f" in window
