"""Take a target's audio tracks out without re-encoding, reading as little of the target as possible.

MP4/MOV index every audio sample (offset, size, timestamp), so only the audio bytes are fetched —
a few percent of a video file. Matroska has no such index; there the file is demuxed.

The tracks go into an MP4 when it can hold them all (the codecs the merge copies): its edit list
keeps an encoder's priming (AAC's first 1024 samples, timestamped before zero) out of the decoded
sound, as in the target. Matroska, the fallback, would shift them into it: 21 ms late.
"""

from __future__ import annotations

import itertools
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av

from fusionfleet.media.ffmpeg import AUDIO_FILES, MP4_AUDIO_CODECS
from fusionfleet.media.probe import VideoInfo, open_video
from fusionfleet.media.ranges import RangeReader

logger = logging.getLogger(__name__)

# Samples closer than this are fetched in one request: fewer round trips for a little more data.
COALESCE_GAP = 64 * 1024
FETCH_THREADS = 16


@dataclass(frozen=True)
class Sample:
    track: int
    timestamp: int
    pos: int
    size: int


def coalesce(samples: list[Sample], gap: int = COALESCE_GAP) -> list[tuple[int, int, list[Sample]]]:
    """Group samples (sorted by position) into byte ranges [start, end) to fetch together. Pure."""
    ranges: list[tuple[int, int, list[Sample]]] = []
    for sample in sorted(samples, key=lambda s: s.pos):
        if ranges and sample.pos - ranges[-1][1] <= gap:
            start, end, members = ranges[-1]
            ranges[-1] = (start, max(end, sample.pos + sample.size), [*members, sample])
        else:
            ranges.append((sample.pos, sample.pos + sample.size, [sample]))
    return ranges


def durations(timestamps: list[int], fallback: int) -> list[int]:
    """Each sample lasts until the next one; the last as long as the one before it (or `fallback`). Pure."""
    steps = [later - earlier for earlier, later in itertools.pairwise(timestamps)]
    return [*steps, steps[-1] if steps else fallback]


def _indexed_samples(tracks: list[Any]) -> list[Sample] | None:
    samples: list[Sample] = []
    for track in tracks:
        entries = track.index_entries
        if entries is None or len(entries) == 0:
            return None
        samples.extend(Sample(track.index, e.timestamp, e.pos, e.size) for e in entries if e.size > 0)
    return samples


def audio_file(video: VideoInfo, folder: Path) -> Path:
    """Where the target's audio goes: Matroska for a Matroska or WebM target (FaceFusion reads its sound through
    that demuxer, and a seek to 0 there drops the first Opus packet: a copy in Matroska reads the same), else
    an MP4 (.m4a) when it holds every track's codec, else Matroska."""
    mp4 = video.container != "matroska" and all(track.codec in MP4_AUDIO_CODECS for track in video.audio)
    suffix = ".m4a" if mp4 else ".mka"
    return folder / f"audio{suffix}"


def extract_audio(reader: RangeReader, video: VideoInfo, folder: Path, what: str) -> Path | None:
    """Write the target's audio tracks to a file in `folder` (audio_file); None when the target has none."""
    if not video.audio:
        return None
    path = audio_file(video, folder)
    with open_video(reader, video.container, what) as source:
        tracks = list(source.streams.audio)
        samples = _indexed_samples(tracks) if video.container == "mov" else None
        with av.open(str(path), mode="w", format=AUDIO_FILES[path.suffix].muxer) as sink:
            outputs = {track.index: sink.add_stream_from_template(track) for track in tracks}
            if samples is None:
                for packet in source.demux(*tracks):
                    if packet.dts is None:
                        continue
                    packet.stream = outputs[packet.stream.index]
                    sink.mux(packet)
            else:
                _copy_indexed(reader, tracks, samples, outputs, sink)
    logger.info("audio of %s extracted reading %s of %s bytes", what, reader.bytes_fetched, reader.size)
    return path


def _copy_indexed(
    reader: RangeReader, tracks: list[Any], samples: list[Sample], outputs: dict[int, Any], sink: Any
) -> None:
    payload: dict[tuple[int, int], bytes] = {}
    ranges = coalesce(samples)
    # Far-apart audio chunks mean many small requests: fetch them in parallel.
    with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
        blocks = list(pool.map(lambda item: reader.read_at(item[0], item[1]), ranges))
    for (start, _end, members), block in zip(ranges, blocks, strict=True):
        for sample in members:
            payload[(sample.track, sample.timestamp)] = block[sample.pos - start : sample.pos - start + sample.size]
    frame_sizes = {track.index: int(track.codec_context.frame_size or 1024) for track in tracks}
    timeline: list[tuple[Any, Sample, int, Any]] = []
    for track in tracks:
        ordered = sorted((s for s in samples if s.track == track.index), key=lambda s: s.timestamp)
        lengths = durations([s.timestamp for s in ordered], frame_sizes[track.index])
        timeline.extend(
            (s.timestamp * track.time_base, s, length, track) for s, length in zip(ordered, lengths, strict=True)
        )
    for _time, sample, length, track in sorted(timeline, key=lambda item: (item[0], item[1].track)):
        packet = av.Packet(payload[(sample.track, sample.timestamp)])
        packet.pts = packet.dts = sample.timestamp
        packet.duration = length
        # Audio frames are all key frames; unflagged, a stream copy would drop them as undecodable.
        packet.is_keyframe = True
        packet.time_base = track.time_base
        packet.stream = outputs[track.index]
        sink.mux(packet)
