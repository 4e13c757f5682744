"""A job's audio source: sniffed by its bytes, probed with that demuxer alone, copied packet for packet."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from fusionfleet.errors import InputRejected
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.sniff import sniff_source
from fusionfleet.media.source_audio import copy_audio, probe_audio
from tests.support.media import ffmpeg

FORMATS = {
    "wav": ("wav", "pcm_s16le", ".wav", ["-c:a", "pcm_s16le"]),
    "mp3": ("mp3", "mp3float", ".mp3", ["-c:a", "libmp3lame"]),
    "flac": ("flac", "flac", ".flac", []),
    "ogg": ("ogg", "vorbis", ".ogg", ["-c:a", "libvorbis"]),
    "opus": ("ogg", "opus", ".opus", ["-c:a", "libopus"]),
    "m4a": ("mov", "aac", ".m4a", ["-c:a", "aac"]),
}


def tone(path: Path, *codec: str, seconds: float = 3.0) -> Path:
    ffmpeg("-f", "lavfi", "-i", f"sine=frequency=330:duration={seconds}:sample_rate=44100", *codec, str(path))
    return path


def reader(path: Path) -> RangeReader:
    return RangeReader(FileRangeSource(path), path.name)


def samples(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.concatenate([frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)])


@pytest.mark.parametrize("name", list(FORMATS))
def test_each_audio_format_facefusion_takes_is_probed_and_copied_unchanged(tmp_path: Path, name: str) -> None:
    container, codec, suffix, args = FORMATS[name]
    # GIVEN a three-second tone in one of FaceFusion's audio formats, uploaded under a name that says nothing
    upload = tone(tmp_path / f"upload.{name}", *args)
    disguised = upload.rename(tmp_path / "voice-note")
    # WHEN it is sniffed and probed
    assert sniff_source(disguised.read_bytes()[:64], "source[1]") == "audio"
    info = probe_audio(reader(disguised), "source[1]", MediaLimits())
    # THEN its bytes told what it is, and how long it lasts
    assert (info.container, info.codec, info.suffix) == (container, codec, suffix)
    assert info.duration_s == pytest.approx(3.0, abs=0.03)
    # AND the copy FaceFusion and the merge get is named for FaceFusion and holds the same sound, sample for sample
    (tmp_path / "copy").mkdir()
    copied = copy_audio(reader(disguised), info, tmp_path / "copy", "source[1]")
    assert copied.name == f"source-audio{suffix}"
    original, copy = samples(disguised), samples(copied)
    assert len(copy) == len(original) and np.array_equal(copy, original)


def test_a_video_a_playlist_and_a_foreign_codec_are_refused_as_audio_sources(tmp_path: Path) -> None:
    # A video given as a source: FaceFusion would take it as neither image nor audio
    video = tmp_path / "clip.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=1", "-f", "lavfi", "-i",
           "sine=duration=1", "-shortest", "-c:v", "libx264", "-c:a", "aac", str(video))  # fmt: skip
    with pytest.raises(InputRejected, match="is a video, not an audio file"):
        probe_audio(reader(video), "source[0]", MediaLimits())
    # A playlist named like an MP3 is never opened: its bytes say what it is
    playlist = tmp_path / "voice.mp3"
    playlist.write_text("#EXTM3U\n#EXTINF:1,\nhttp://169.254.169.254/latest/meta-data\n")
    with pytest.raises(InputRejected, match="it is an HLS playlist"):
        sniff_source(playlist.read_bytes()[:64], "source[1]")
    # WAV is PCM here: ADPCM in a WAV is named, with what is accepted
    adpcm = tone(tmp_path / "adpcm.wav", "-c:a", "adpcm_ms")
    with pytest.raises(InputRejected, match="carries adpcm_ms audio in WAV"):
        probe_audio(reader(adpcm), "source[1]", MediaLimits())
    # Too long for the stack's limits
    long = tone(tmp_path / "long.flac", seconds=4.0)
    with pytest.raises(InputRejected, match="over the limit of 3 s"):
        probe_audio(reader(long), "source[1]", MediaLimits(max_duration_s=3.0))
