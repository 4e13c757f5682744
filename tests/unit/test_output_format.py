"""The output's container and encoders as FaceFusion 3.8.1 chooses them, the argv built for each, and what is
refused at submit (the fleet's hardware, a container that cannot hold it); background_remover's alpha is
tests/unit/test_alpha.py's."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from fusionfleet.errors import JobRejected
from fusionfleet.jobs.audio import AudioCut, audio_plan
from fusionfleet.jobs.encoding import EncoderSettings, encoder_settings
from fusionfleet.jobs.image_output import output_kind_problem
from fusionfleet.jobs.manifest import KeyPolicy, parse_manifest
from fusionfleet.jobs.output_format import (
    CPU_ENCODERS,
    FACEFUSION_VIDEO_ENCODERS,
    UNAVAILABLE_ENCODERS,
    container_of_key,
    default_video_suffix,
    fix_audio_encoder,
    fix_video_encoder,
    output_problems,
)
from fusionfleet.media.ffmpeg import audio_codec_args, concat_argv, encode_segment_argv, merge_argv
from fusionfleet.media.gpu_media import NVENC_CODECS

FPS = Fraction(25)


def settings(container: str = "mp4", device: str = "cpu", **options: object) -> EncoderSettings:
    return encoder_settings(640, 360, FPS, dict(options), 50, device=device, engine="facefusion", container=container)


def manifest(**fields: object) -> bytes:
    return json.dumps({"version": 1, "source": "inputs/f.jpg", "target": "inputs/c.mp4", **fields}).encode()


def refusal(raw: bytes, policy: KeyPolicy | None = None) -> str:
    with pytest.raises(JobRejected) as caught:
        parse_manifest(raw, "jobs/a.json", policy)
    return " | ".join(caught.value.problems)


def test_every_encoder_of_facefusions_list_is_either_the_fleets_or_refused_with_a_reason() -> None:
    # GIVEN FaceFusion's whole list
    for encoder in FACEFUSION_VIDEO_ENCODERS:
        # THEN each is a CPU encoder every worker has, NVENC (judged against the fleet), or refused for a reason
        assert (encoder in CPU_ENCODERS) + (encoder in NVENC_CODECS) + (encoder in UNAVAILABLE_ENCODERS) == 1


@pytest.mark.parametrize(
    ("container", "named", "used"),
    [
        ("webm", "libx264", "libvpx-vp9"),  # a WebM is always VP9
        ("mkv", "rawvideo", "libx264"),
        ("mp4", "rawvideo", "libx264"),
        ("mov", "libvpx-vp9", "libx264"),
        ("mov", "rawvideo", "rawvideo"),
        ("m4v", "libx265", "libx264"),
        ("mkv", "libvpx-vp9", "libvpx-vp9"),
        ("mp4", "libx264rgb", "libx264rgb"),
    ],
)
def test_the_video_encoder_is_the_one_facefusion_fixes_for_the_container(container: str, named: str, used: str) -> None:
    assert fix_video_encoder(container, named) == used
    assert settings(container, output_video_encoder=named).codec == used


@pytest.mark.parametrize(
    ("container", "named", "used"),
    [("webm", "aac", "libopus"), ("mov", "flac", "aac"), ("avi", "libopus", "aac"), ("mxf", "aac", "pcm_s16le"),
     ("mkv", "libvorbis", "libvorbis"), ("wmv", "flac", "aac")],
)  # fmt: skip
def test_the_audio_encoder_is_the_one_facefusion_fixes_for_the_container(container: str, named: str, used: str) -> None:
    assert fix_audio_encoder(container, named) == used
    plan = audio_plan("facefusion", {"output_audio_encoder": named}, container)
    assert plan.settings is not None and plan.settings.encoder == used
    # FaceFusion's default (FLAC) in a WebM is Opus too
    default = audio_plan("facefusion", {}, "webm").settings
    assert default is not None and default.encoder == "libopus"


def test_vp9_is_encoded_as_facefusion_does_with_its_own_crf_scale_and_yuva420p_in_matroska_segments() -> None:
    vp9 = settings("webm", output_video_quality=80)
    assert (vp9.codec, vp9.pix_fmt, vp9.crf, vp9.container) == ("libvpx-vp9", "yuva420p", 13, "webm")
    argv = encode_segment_argv(640, 360, vp9, Path("/w/chunk.mp4"))
    at = argv.index("-c:v")
    assert argv[at : at + 7] == ["-c:v", "libvpx-vp9", "-crf", "13", "-pix_fmt", "yuva420p", "-threads"]
    assert "-profile:v" not in argv and "-preset" not in argv
    assert argv[-5:] == ["-fflags", "+bitexact", "-f", "matroska", "/w/chunk.mp4"]  # no random segment UID
    assert "-video_track_timescale" not in argv
    assert concat_argv(Path("/w/l.txt"), Path("/w/s.mp4"), "libvpx-vp9")[-3:] == ["-f", "matroska", "/w/s.mp4"]


def test_raw_video_and_libx264rgb_write_rgb24_and_h264_stays_in_mp4_segments() -> None:
    raw = settings("mov", output_video_encoder="rawvideo")
    argv = encode_segment_argv(640, 360, raw, Path("/w/c.mp4"))
    assert argv[argv.index("-c:v") : argv.index("-c:v") + 4] == ["-c:v", "rawvideo", "-pix_fmt", "rgb24"]
    assert argv[-3:] == ["-f", "nut", "/w/c.mp4"]
    rgb = settings("mp4", output_video_encoder="libx264rgb")
    argv = encode_segment_argv(640, 360, rgb, Path("/w/c.mp4"))
    assert rgb.pix_fmt == "rgb24" and "-profile:v" not in argv and "-x264-params" in argv
    h264 = encode_segment_argv(640, 360, settings("mkv"), Path("/w/c.mp4"))
    assert h264[-5:] == ["-video_track_timescale", "10000", "-f", "mp4", "/w/c.mp4"]


@pytest.mark.parametrize(
    ("container", "muxer", "faststart"),
    [("webm", "webm", False), ("mkv", "matroska", False), ("mov", "mov", True), ("avi", "avi", False),
     ("m4v", "ipod", True), ("mp4", "mp4", True)],
)  # fmt: skip
def test_the_merge_writes_the_jobs_container(container: str, muxer: str, faststart: bool) -> None:
    argv = merge_argv(Path("/w/l.txt"), None, [], 0.0, Path(f"/w/o.{container}"), container=container)
    assert argv[-3:] == ["-f", muxer, f"/w/o.{container}"]
    assert ("-movflags" in argv) is faststart


def test_copied_sound_is_copied_where_the_container_takes_it_and_encoded_once_where_it_does_not() -> None:
    assert audio_codec_args(["aac"], container="mkv") == ["-c:a", "copy"]
    assert audio_codec_args(["aac"], container="webm") == ["-c:a", "libopus", "-b:a", "192k"]
    assert audio_codec_args(["opus"], container="webm") == ["-c:a", "copy"]
    assert audio_codec_args(["pcm_s16le"], container="mov") == ["-c:a", "copy"]
    assert audio_codec_args(["opus"], container="mov") == ["-c:a", "aac", "-b:a", "192k"]


def test_the_output_follows_its_container_and_a_default_output_keeps_the_targets() -> None:
    assert container_of_key("outputs/a.WebM") == "webm" and container_of_key("outputs/a.gif") is None
    assert default_video_suffix("inputs/clip.mkv") == ".mkv"
    assert default_video_suffix("inputs/clip.MOV") == ".mov"
    assert default_video_suffix("inputs/clip.3gp") == ".mp4"  # not a container FaceFusion writes
    assert default_video_suffix("inputs/clip.mpeg") == ".mp4"  # one the farm refuses to write
    assert output_kind_problem("video", "outputs/a.webm") is None
    assert "must end in a video container" in (output_kind_problem("video", "outputs/a.png") or "")


def test_nvenc_is_taken_only_by_a_fleet_that_encodes_with_it() -> None:
    # GIVEN a CPU fleet: refused at submit, before any media is read, with the reason and the CPU twin
    text = refusal(manifest(options={"output_video_encoder": "hevc_nvenc"}))
    assert "'hevc_nvenc' needs NVIDIA's NVENC on every render worker" in text and "use libx265" in text
    with pytest.raises(JobRejected, match="needs NVIDIA's NVENC"):
        settings("mp4", output_video_encoder="h264_nvenc")
    # AND an NVENC fleet takes it
    nvenc = KeyPolicy(encoder_device="nvenc")
    assert parse_manifest(manifest(options={"output_video_encoder": "hevc_nvenc"}), "jobs/a.json", nvenc)
    assert settings("mp4", device="nvenc", output_video_encoder="hevc_nvenc").codec == "hevc_nvenc"
    # AND where the fleet's device is not known (the tenant API) it is left to the slicer
    assert parse_manifest(
        manifest(options={"output_video_encoder": "h264_nvenc"}), "jobs/a.json", KeyPolicy(encoder_device="")
    )


@pytest.mark.parametrize("encoder", ["h264_amf", "hevc_qsv", "h264_videotoolbox"])
def test_encoders_of_hardware_the_fleet_lacks_are_refused_with_the_reason(encoder: str) -> None:
    text = refusal(manifest(options={"output_video_encoder": encoder}), KeyPolicy(encoder_device="nvenc"))
    assert f"'{encoder}' {UNAVAILABLE_ENCODERS[encoder]}" in text


def test_containers_and_pairs_facefusion_itself_fails_on_are_refused() -> None:
    assert "MPEG program stream" in refusal(manifest(output="outputs/a.mpeg"))
    assert "does not write .wmv outputs yet" in refusal(manifest(output="outputs/a.wmv"))
    assert default_video_suffix("inputs/clip.avi") == ".mp4"  # an AVI target's default output: MP4
    assert any("an AVI cannot hold" in p for p in output_problems("avi", "rawvideo", None))
    with pytest.raises(JobRejected, match="an AVI cannot hold"):
        settings("avi", output_video_encoder="rawvideo")
    # a named audio encoder the output's container (named, or the target's by default) cannot hold
    assert "does not belong in a .mov output" in refusal(
        manifest(target="inputs/c.mov", options={"output_audio_encoder": "libvorbis"})
    )
    vorbis_mkv = manifest(output="outputs/a.mkv", options={"output_audio_encoder": "libvorbis"})
    assert parse_manifest(vorbis_mkv, "jobs/a.json").output == "outputs/a.mkv"
    raw_webm = manifest(output="outputs/a.webm", options={"output_video_encoder": "rawvideo"})  # FaceFusion: VP9
    assert parse_manifest(raw_webm, "jobs/a.json").output == "outputs/a.webm"


def test_steps_joined_in_one_output_are_joined_into_its_container() -> None:
    from fusionfleet.media.ffmpeg import join_argv

    argv = join_argv(Path("list.txt"), Path("out.mkv"), "mkv")
    assert argv[-7:] == ["-c:v", "copy", "-c:a", "copy", "-f", "matroska", "out.mkv"]


def test_a_matroska_targets_sound_is_read_as_facefusion_reads_it_seek_to_zero_included() -> None:
    # GIVEN a facefusion job's cut of the sound to the video (FaceFusion's `-ss 0.0 -to 12.0` on the target)
    plan = audio_plan("facefusion", {}, "webm")
    cut = AudioCut((0.0, 12.0), 12.0)
    # WHEN the sound is the farm's Matroska copy of a WebM/MKV target THEN the seek to 0 is kept (in Matroska it
    # drops the first Opus packet in FaceFusion's read and the copy's alike: the samples measured identical)
    mka = merge_argv(
        Path("/l.txt"), Path("/a.mka"), ["opus"], 0.0, Path("/o.webm"), plan=plan, cut=cut, container="webm"
    )
    assert mka[mka.index("-ss") : mka.index("-ss") + 4] == ["-ss", "0.0", "-to", "12.0"]
    # AND an MP4 copy's is left out, as before (there a seek to 0 loses AAC's priming packet FaceFusion keeps)
    m4a = merge_argv(Path("/l.txt"), Path("/a.m4a"), ["aac"], 0.0, Path("/o.mp4"), plan=plan, cut=cut)
    assert "-ss" not in m4a and "-to" in m4a
