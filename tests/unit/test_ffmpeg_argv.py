"""The ffmpeg command lines, by list equality (no ffmpeg is run)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from fusionfleet.jobs.audio import AudioPlan, audio_encode_args, audio_plan
from fusionfleet.jobs.encoding import encoder_settings, output_size, output_size_problem
from fusionfleet.media.colour import BT709_FILTER
from fusionfleet.media.ffmpeg import audio_codec_args, encode_segment_argv, merge_argv, size_filter, video_filters

SETTINGS = encoder_settings(640, 360, Fraction(25), {"output_video_quality": 80}, max_segment_frames=125)


def test_segment_encoding_uses_the_jobs_fixed_settings() -> None:
    argv = encode_segment_argv(640, 360, SETTINGS, Path("/w/segment.mp4"))
    assert argv == [
        "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
        "-protocol_whitelist", "pipe", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", "640x360",
        "-framerate", "25/1", "-i", "pipe:0",
        "-vf", BT709_FILTER,
        "-c:v", "libx264", "-preset", "veryfast", "-crf", "10", "-profile:v", "high", "-pix_fmt", "yuv420p",
        "-threads", "2", "-x264-params", "keyint=50:min-keyint=50:scenecut=0:open-gop=0:sliced-threads=1",
        "-fps_mode", "passthrough",
        "-an", "-video_track_timescale", "10000", "-f", "mp4", "/w/segment.mp4",
    ]  # fmt: skip


def test_odd_sizes_are_padded_by_repeating_the_edge() -> None:
    odd = encoder_settings(853, 480, Fraction(25), {}, 100)
    assert (odd.width, odd.height) == (854, 480)
    assert size_filter(853, 480, odd) == ["pad=854:480,fillborders=right=1:bottom=0:mode=smear"]
    assert size_filter(640, 360, SETTINGS) == []


def test_scaled_output_uses_a_scale_filter() -> None:
    half = encoder_settings(1280, 720, Fraction(25), {"output_video_scale": 0.5}, 100)
    assert size_filter(1280, 720, half) == ["scale=640:360:flags=bicubic"]


def test_frames_an_engine_made_larger_are_scaled_to_the_jobs_size_then_converted_to_bt709() -> None:
    # GIVEN a job planned at 640×360 and an engine (FaceFusion's frame enhancer) returning 2560×1440
    # WHEN the encoder's filters are built for the frames' real size
    # THEN they are scaled to the job's size, then converted and tagged as FaceFusion's output is
    assert video_filters(2560, 1440, SETTINGS) == ["-vf", f"scale=640:360:flags=bicubic,{BT709_FILTER}"]
    assert video_filters(640, 360, SETTINGS) == ["-vf", BT709_FILTER]


def test_a_facefusion_jobs_size_is_facefusions_own() -> None:
    # GIVEN FaceFusion's rule (vision.scale_resolution: truncate, round to even; larger than the target too)
    # THEN its sizes, not the built-in engines' (round, pad odd sides)
    assert output_size(321, 241, 1.0, "facefusion") == (320, 240)
    assert output_size(321, 241, 1.0, "classic") == (322, 242)
    assert output_size(1280, 720, 0.33, "facefusion") == (422, 236)  # int(237.6) = 237, round(118.5) = 118
    assert output_size(1280, 720, 0.33, "classic") == (422, 238)
    assert output_size(320, 240, 0.5, "facefusion") == (160, 120)
    # AND scales above 1 upscale as FaceFusion's writer does (issue 42: the farm used to cap them at the target)
    assert output_size(512, 288, 2.0, "facefusion") == (1024, 576)
    assert output_size(512, 288, 4.0, "facefusion") == (2048, 1152)
    assert output_size(1920, 1080, 4.0, "facefusion") == (7680, 4320)
    assert output_size_problem(7680, 4320) is None
    assert "larger than the encoders' 8192×4320" in str(
        output_size_problem(*output_size(1920, 1080, 8.0, "facefusion"))
    )
    facefusion = encoder_settings(853, 480, Fraction(25), {}, 100, engine="facefusion")
    assert (facefusion.width, facefusion.height, facefusion.colour) == (852, 480, "bt709")


def test_merge_copies_video_and_muxes_audio_once() -> None:
    argv = merge_argv(Path("/w/list.txt"), Path("/w/audio.mka"), ["aac"], 0.0, Path("/w/out.mp4"))
    assert argv == [
        "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
        "-protocol_whitelist", "file", "-f", "concat", "-safe", "1", "-i", "/w/list.txt",
        "-protocol_whitelist", "file", "-f", "matroska", "-i", "/w/audio.mka",
        "-map", "0:v:0", "-map", "1:a", "-c:v", "copy", "-c:a", "copy",
        "-movflags", "+faststart", "-f", "mp4", "/w/out.mp4",
    ]  # fmt: skip


def test_a_facefusion_jobs_audio_is_facefusions_first_track_re_encoded_and_cut_to_the_video() -> None:
    # GIVEN a facefusion job with no audio option (FaceFusion's restore_audio: FLAC, its default encoder)
    plan = audio_plan("facefusion", {})
    # WHEN the merge's argv is built THEN the audio input is cut to the video, its first track alone
    # re-encoded through the volume filter, and the output cut to the video's length
    argv = merge_argv(Path("/w/l.txt"), Path("/w/audio.m4a"), ["aac", "aac"], 0.0, Path("/w/o.mp4"), plan=plan,
                      duration_s=12.0)  # fmt: skip
    assert argv == [
        "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
        "-protocol_whitelist", "file", "-f", "concat", "-safe", "1", "-i", "/w/l.txt",
        "-to", "12.0", "-protocol_whitelist", "file", "-f", "mov", "-i", "/w/audio.m4a",
        "-map", "0:v:0", "-map", "1:a:0", "-c:v", "copy", "-c:a", "flac", "-filter:a", "volume=1.0",
        "-t", "12.0", "-movflags", "+faststart", "-f", "mp4", "/w/o.mp4",
    ]  # fmt: skip
    # AND its own encoder and quality are FaceFusion's scale; volume 0 drops the audio altogether
    asked = {"output_audio_encoder": "aac", "output_audio_quality": 40, "output_audio_volume": 50}
    aac = audio_plan("facefusion", asked).settings
    assert aac is not None
    assert audio_encode_args(aac, always_volume=True) == ["-c:a", "aac", "-q:a", "0.9", "-filter:a", "volume=0.5"]
    silent = merge_argv(Path("/l.txt"), Path("/a.m4a"), ["aac"], 0.0, Path("/o.mp4"),
                        plan=audio_plan("facefusion", {"output_audio_volume": 0}), duration_s=12.0)  # fmt: skip
    assert "-i" in silent and "/a.m4a" not in silent and "-c:a" not in silent
    # AND the built-in engines keep every track, copied
    assert audio_plan("classic", {}) == AudioPlan()


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
