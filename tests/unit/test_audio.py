from __future__ import annotations

from pathlib import Path

import av

from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.reader import FileRangeSource, RangeReader
from gpu_worker.audio import Sample, coalesce, durations, extract_audio
from tests.support.media import ffmpeg


def test_nearby_samples_are_fetched_together() -> None:
    samples = [Sample(1, 0, 100, 10), Sample(1, 1024, 120, 10), Sample(1, 2048, 1_000_000, 10)]
    ranges = coalesce(samples, gap=64)
    assert [(start, end, len(members)) for start, end, members in ranges] == [(100, 130, 2), (1_000_000, 1_000_010, 1)]


def test_durations_follow_the_timestamps() -> None:
    assert durations([0, 1024, 2048], 1024) == [1024, 1024, 1024]
    assert durations([5], 1024) == [1024]


def test_mp4_audio_comes_out_whole_reading_only_its_bytes(tmp_path: Path) -> None:
    # GIVEN a high-bitrate video with a small audio track
    target = tmp_path / "heavy.mp4"
    ffmpeg(
        "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25:duration=4", "-f", "lavfi", "-i", "sine=duration=4",
        "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "40M", "-c:a", "aac", str(target),
    )  # fmt: skip
    info = probe_video(RangeReader(FileRangeSource(target), "t"), "t", MediaLimits())
    reader = RangeReader(FileRangeSource(target), "t")
    # WHEN its audio is extracted
    assert extract_audio(reader, info, tmp_path / "audio.mka", "t")
    # THEN a small part of the file was read, and the packets are the source's, byte for byte
    assert reader.bytes_fetched < 0.1 * target.stat().st_size
    with av.open(str(tmp_path / "audio.mka")) as extracted, av.open(str(target)) as source:
        ours = [bytes(p) for p in extracted.demux(extracted.streams.audio[0]) if p.size]
        theirs = [bytes(p) for p in source.demux(source.streams.audio[0]) if p.size]
    assert ours == theirs


def test_matroska_audio_is_demuxed(clip_mkv: Path, tmp_path: Path) -> None:
    info = probe_video(RangeReader(FileRangeSource(clip_mkv), "t"), "t", MediaLimits())
    assert extract_audio(RangeReader(FileRangeSource(clip_mkv), "t"), info, tmp_path / "a.mka", "t")
    with av.open(str(tmp_path / "a.mka")) as extracted:
        assert len(extracted.streams.audio) == 1
