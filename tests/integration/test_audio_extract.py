"""Audio extraction from real media made with ffmpeg (a separate process)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import av
import numpy as np

from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.runner import ffmpeg_exe
from gpu_worker.merging.audio import extract_audio
from tests.support.media import ffmpeg


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
    extracted_path = extract_audio(reader, info, tmp_path, "t")
    # THEN a small part of the file was read, and the packets are the source's, byte for byte
    assert extracted_path == tmp_path / "audio.m4a"
    assert reader.bytes_fetched < 0.1 * target.stat().st_size
    with av.open(str(extracted_path)) as extracted, av.open(str(target)) as source:
        ours = [bytes(p) for p in extracted.demux(extracted.streams.audio[0]) if p.size]
        theirs = [bytes(p) for p in source.demux(source.streams.audio[0]) if p.size]
    assert ours == theirs
    # AND it sounds as the target does from its first sample: AAC's priming (1024 samples stamped
    # before zero) stays out of the decoded sound, as the target's edit list keeps it out
    heard, source_heard = pcm(extracted_path), pcm(target)
    assert len(heard) >= len(source_heard) and np.array_equal(heard[: len(source_heard)], source_heard)


def pcm(path: Path) -> np.ndarray:
    raw = subprocess.run(
        [ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:a:0", "-f", "f32le", "-"],
        capture_output=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    return np.frombuffer(raw, np.float32)


def test_matroska_audio_is_demuxed(clip_mkv: Path, tmp_path: Path) -> None:
    info = probe_video(RangeReader(FileRangeSource(clip_mkv), "t"), "t", MediaLimits())
    extracted_path = extract_audio(RangeReader(FileRangeSource(clip_mkv), "t"), info, tmp_path, "t")
    assert extracted_path is not None
    with av.open(str(extracted_path)) as extracted:
        assert len(extracted.streams.audio) == 1
