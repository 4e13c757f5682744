"""Trim, output rate and an audio source through the whole pipeline on moto: the slicer plans the range, each
segment's worker repeats or keeps frames as the job's timeline says, the merge joins them and cuts the audio
to match (or carries the audio source instead); the output is judged frame by frame by the stamps the
target's frames carry (each frame's number, drawn in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetctl.samples import read_stamp
from fusionfleet.jobs.plan import SegmentPolicy
from fusionfleet.jobs.timeline import timeline
from fusionfleet.media.inspect import summarize
from fusionfleet.messages import JobContext
from tests.integration.conftest import Aws, started_job, upload
from tests.integration.test_worker_loop import merge_once, plan, recorder, render_worker, send_render
from tests.support.media import decode_all, ffmpeg

pytestmark = pytest.mark.timeout(300)


def sliced(aws: Aws, clip: Path, options: dict[str, Any], sources: list[str] | None = None) -> JobContext:
    seconds = SegmentPolicy(target_seconds=1, min_seconds=0.5, max_seconds=1.5)
    source = sources or ["inputs/face.jpg"]
    return started_job(aws, clip, segments=seconds, source=source, engine="copy", options=options)


@pytest.mark.parametrize(
    "options",
    [
        {"trim_frame_start": 13, "trim_frame_end": 87, "output_video_fps": 30.0},
        {"trim_frame_start": 20, "output_video_fps": 15.0},
        {"trim_frame_end": 60},
    ],
    ids=["trim-and-repeat-at-30fps", "trim-and-slow-to-15fps", "trim-end"],
)
def test_a_trimmed_job_at_another_rate_renders_in_segments_exactly_as_its_timeline_says(
    aws: Aws, clip: Path, tmp_path: Path, options: dict[str, Any]
) -> None:
    # GIVEN the 4 s, 25 fps clip (its frames stamped with their numbers) and a job of part of it at a rate
    job = sliced(aws, clip, options)
    segments = plan(aws, job)
    assert len(segments) >= 2, segments
    line = timeline(options, 100, job.video.fps)
    # WHEN every segment renders on a worker and the merge joins them
    for segment in segments:
        send_render(aws, "RenderQueueNormal", job, segment, f"t{segment['index']}")
    assert render_worker(aws, tmp_path, recorder(aws)).run(max_tasks=len(segments)) == len(segments)
    (success,) = [call for call in merge_once(aws, job, tmp_path).calls if call[0] == "success"]
    result = tmp_path / "out.mp4"
    aws.s3.download_file(aws.media_bucket, job.output.key, str(result))
    # THEN the output is the timeline's frames: each target frame of the range as many times as it says
    info, frames = decode_all(result)
    expected = [frame for frame in range(line.start, line.end) for _ in range(line.shown(frame))]
    assert [read_stamp(image) for image in frames] == expected
    assert success[2]["frames"] == len(expected) == line.output_frames()
    assert info.fps == line.output_fps and abs(info.duration_s - float(line.duration_s)) <= 1 / float(info.fps)
    # AND the audio is the range's, cut to the video's length (slowed down, the video outlasts it)
    audio_s = summarize(result).audio_durations_s
    wanted = min(float((line.end - line.start) / line.source_fps), float(line.duration_s))
    assert len(audio_s) == 1 and abs(audio_s[0] - wanted) <= 0.05, (audio_s, wanted)


def dominant_hz(path: Path) -> float:
    """The loudest frequency of a file's first audio track (the target's tone is 440 Hz)."""
    import av
    import numpy as np

    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        rate = stream.codec_context.sample_rate
        samples = np.concatenate([frame.to_ndarray()[0] for frame in container.decode(stream)])
    spectrum = np.abs(np.fft.rfft(samples[: rate * 2]))
    return float(np.fft.rfftfreq(len(samples[: rate * 2]), 1 / rate)[int(np.argmax(spectrum[1:])) + 1])


@pytest.mark.parametrize("voice_s", [2.5, 6.0])
def test_an_audio_source_replaces_the_targets_sound_cut_to_the_video(
    aws: Aws, clip: Path, tmp_path: Path, voice_s: float
) -> None:
    # GIVEN a job whose sources are a face and a 300 Hz voice recording (a WAV under a plain name)
    voice = tmp_path / "voice"
    ffmpeg("-f", "lavfi", "-i", f"sine=frequency=300:duration={voice_s}:sample_rate=48000", "-c:a", "pcm_s16le",
           "-f", "wav", str(voice))  # fmt: skip
    upload(aws, "inputs/voice", voice)
    job = sliced(aws, clip, {}, sources=["inputs/face.jpg", "inputs/voice"])
    assert job.audio is not None and job.audio.info.container == "wav"
    # WHEN it renders and merges
    segments = plan(aws, job)
    for segment in segments:
        send_render(aws, "RenderQueueNormal", job, segment, f"t{segment['index']}")
    render_worker(aws, tmp_path, recorder(aws)).run(max_tasks=len(segments))
    (success,) = [call for call in merge_once(aws, job, tmp_path).calls if call[0] == "success"]
    result = tmp_path / "out.mp4"
    aws.s3.download_file(aws.media_bucket, job.output.key, str(result))
    # THEN the output's one audio track is the voice, from its start, no longer than the 4 s video
    (audio_s,) = summarize(result).audio_durations_s
    assert abs(audio_s - min(voice_s, 4.0)) <= 0.05 and success[2]["audio_tracks"] == 1
    assert abs(dominant_hz(result) - 300) < 5


def pcm(path: Path) -> Any:
    import av
    import numpy as np

    with av.open(str(path)) as container:
        return np.concatenate([frame.to_ndarray()[0] for frame in container.decode(audio=0)])


def test_a_trimmed_facefusion_jobs_audio_is_facefusions_sample_for_sample(clip: Path, tmp_path: Path) -> None:
    # GIVEN the clip's audio as the merge takes it out, and FaceFusion's restore_audio cut of frames 30..90
    # (`-ss 1.2 -to 3.6` on the whole target, FLAC, its volume filter, as long as the video)
    import numpy as np

    from fusionfleet.jobs.audio import audio_cut, audio_plan
    from fusionfleet.media.ffmpeg import merge_argv
    from fusionfleet.media.limits import MediaLimits
    from fusionfleet.media.probe import probe_video
    from fusionfleet.media.ranges import FileRangeSource, RangeReader
    from fusionfleet.media.runner import run_ffmpeg
    from gpu_worker.merging.audio import extract_audio

    options = {"trim_frame_start": 30, "trim_frame_end": 90}
    video = probe_video(RangeReader(FileRangeSource(clip), "clip"), "clip", MediaLimits())
    line = timeline(options, video.frame_count, video.fps)
    theirs = tmp_path / "facefusion.mkv"
    ffmpeg("-ss", "1.2", "-to", "3.6", "-i", str(clip), "-map", "0:a:0", "-c:a", "flac", "-filter:a", "volume=1.0",
           "-t", "2.4", str(theirs))  # fmt: skip
    audio = extract_audio(RangeReader(FileRangeSource(clip), "clip"), video, tmp_path, "clip")
    assert audio is not None
    # WHEN the farm's merge muxes it over the job's 60 frames (a video-only part stands in for the segments)
    part = tmp_path / "part.mp4"
    ffmpeg("-i", str(clip), "-an", "-vf", "trim=start_frame=30:end_frame=90,setpts=PTS-STARTPTS", str(part))
    (tmp_path / "list.txt").write_text("file 'part.mp4'\n")
    plan = audio_plan("facefusion", options)
    cut = audio_cut(line, video.frame_count, plan, replaced=False)
    ours = tmp_path / "farm.mp4"
    argv = merge_argv(tmp_path / "list.txt", audio, ["aac"], 0.0, ours, plan=plan, duration_s=2.4, cut=cut)
    run_ffmpeg(["-hide_banner", "-nostdin", "-loglevel", "error", "-y", *argv[5:]], timeout_s=60, what="merge")
    # THEN its audio is FaceFusion's, every sample
    expected, got = pcm(theirs), pcm(ours)
    track = video.audio[0]
    assert len(got) == len(expected) == round(2.4 * track.sample_rate) * track.channels  # interleaved
    assert np.array_equal(got, expected)
