"""Targets and sources for the parity matrix, generated here from the harness's pictures (nothing downloaded).

A clip is a scene of the harness's people (fleetctl.harness.pictures) moving on the detector's grid,
each frame carrying its number, with an audio track whose loudness changes over time (so a window of
it taken at the wrong time differs). Variants: more audio tracks, HDR (HLG or PQ transfer, BT.2020,
10-bit), a variable frame rate (a gap in the timestamps), a cut (one person, then two).
"""

from __future__ import annotations

import math
import subprocess
import wave
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

from benchmarks.parity.judge import Layout
from fleetctl.harness.geometry import FACE_HEIGHT, FACE_WIDTH
from fleetctl.harness.pictures import Image, Placed, face_image, scene_frame, snap
from fusionfleet.media.runner import ffmpeg_exe

AUDIO_RATE = 48_000
TRANSFERS = {"hlg": "arib-std-b67", "pq": "smpte2084"}


@dataclass(frozen=True)
class ClipSpec:
    seconds: float = 12.0
    fps: int | Fraction = 25  # Fraction(30000, 1001) for NTSC's 29.97
    size: tuple[int, int] = (320, 240)
    # "one": person a moving; "two": a moving, b still; "cut": b alone, then a and b; "blink": a moving,
    # hidden for the last two frames of every 50 (the tracker fills such gaps from the frames around)
    scene: str = "one"
    audio_tracks: int = 1
    transfer: str | None = None  # None: SDR, BT.709 tags; "hlg" or "pq": 10-bit BT.2020 with that transfer
    gap_at: int | None = None  # a variable frame rate: 5 frames' time missing after this frame
    rotation: int = 0  # a phone's clip: frames stored turned, shown upright by this display rotation (ccw)
    container: str = "mp4"  # "webm": VP9 (lossless) and Opus, in the container FaceFusion keeps for its output

    @property
    def frames(self) -> int:
        return round(self.seconds * self.fps)

    def name(self) -> str:
        parts = [self.scene, f"{self.seconds:g}s", f"{self.size[0]}x{self.size[1]}", f"{float(self.fps):g}fps"]
        parts += [f"{self.audio_tracks}audio"] + ([self.transfer] if self.transfer else [])
        parts += [f"gap{self.gap_at}"] if self.gap_at is not None else []
        parts += [self.container] if self.container != "mp4" else []
        return "-".join(parts + ([f"rot{self.rotation}"] if self.rotation else []))


def faces_at(spec: ClipSpec, number: int) -> list[Placed]:
    """Who is where in frame `number`: a swings left and right, b stands at the right."""
    width, height = spec.size
    top = snap((height - FACE_HEIGHT) / 2)
    right = snap(width - FACE_WIDTH - 16)
    swing = 0.5 - 0.5 * math.cos(2 * math.pi * number / (spec.fps * 6))
    a = Placed("a", snap(8 + (right - FACE_WIDTH - 24) * swing), top)
    b = Placed("b", right, top)
    if spec.scene == "one":
        return [a]
    if spec.scene == "blink":
        return [] if number % 50 >= 48 else [a]
    if spec.scene == "cut" and number < spec.frames * 0.4:
        return [b]
    return [a, b]


def picture(spec: ClipSpec, number: int) -> Image:
    return scene_frame(spec.size[0], spec.size[1], number, faces_at(spec, number), shade=(number // 5) % 8)


def layout(spec: ClipSpec, first: int = 0) -> Layout:
    """Where the clip's people are in each frame, for the judge; `first`: the frame a render starts at."""
    faces = {number: [(placed.x, placed.y) for placed in faces_at(spec, number)] for number in range(spec.frames)}
    return Layout(spec.size, faces, float(spec.fps), first)


def loudness(seconds: np.ndarray, track: int) -> np.ndarray:
    """A tone whose loudness swings (so every frame's audio window differs), per track its own pitch, with
    a quieter noise under it: a tone alone correlates with itself shifted by whole periods, the noise
    does not, so the judge's cross-correlation finds an offset of a single sample."""
    envelope = 0.15 + 0.6 * (0.5 + 0.5 * np.sin(2 * np.pi * (0.7 + 0.2 * track) * seconds))
    noise = np.random.default_rng(track).uniform(-0.05, 0.05, seconds.shape)
    return (envelope * (np.sin(2 * np.pi * (330 + 110 * track) * seconds) + noise)).astype(np.float32)


def _write_stereo(path: Path, mono: np.ndarray) -> Path:
    """`mono` (-1..1) as 16-bit stereo WAV at AUDIO_RATE, the same in both channels."""
    samples = (mono * 32767).astype(np.int16)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(AUDIO_RATE)
        out.writeframes(np.repeat(samples[:, None], 2, axis=1).tobytes())
    return path


def write_wav(path: Path, seconds: float, track: int = 0) -> Path:
    times = np.arange(round(seconds * AUDIO_RATE)) / AUDIO_RATE
    return _write_stereo(path, loudness(times, track))


VOICE_PITCHES = np.geomspace(250.0, 3500.0, 20)  # Hz: 20 tones, each on mel bands of its own
VOICE_STRIDE = 7  # frame n sings pitch (n × 7) mod 20: neighbouring frames' pitches lie far apart


def write_voice(path: Path, seconds: float, fps: int = 25, late: int = 0) -> Path:
    """A voice for the lip syncer whose pitch jumps at every video frame (continuous in phase, so no click
    smears it): the loudest mel band at the end of a frame's audio window says which window it was, and
    the stand-in lip syncer draws that band into the mouth (fleetctl.harness.standins.processors).
    `late`: the same voice that many video frames later (a control the judge must catch)."""
    count = round(seconds * AUDIO_RATE)
    frame = (np.arange(count) * fps) // AUDIO_RATE - late
    pitch = VOICE_PITCHES[(frame * VOICE_STRIDE) % len(VOICE_PITCHES)]
    phase = 2 * np.pi * np.cumsum(pitch) / AUDIO_RATE
    return _write_stereo(path, 0.6 * np.sin(phase))


def _colour_filter(spec: ClipSpec) -> str:
    if spec.transfer is None:
        return (
            "scale=out_color_matrix=bt709:out_range=tv,format=yuv420p,"
            "setparams=colorspace=bt709:color_primaries=bt709:color_trc=bt709:range=tv"
        )
    trc = TRANSFERS[spec.transfer]
    return (
        "scale=out_color_matrix=bt2020:out_range=tv,format=yuv420p10le,"
        f"setparams=colorspace=bt2020nc:color_primaries=bt2020:color_trc={trc}:range=tv"
    )


def write_clip(path: Path, spec: ClipSpec, draw: Callable[[int], Image] | None = None) -> Path:
    """The clip as H.264 (high, or high 10 for HDR), near-lossless, with its audio tracks as AAC; `rotation`:
    the pictures stored turned clockwise by it and tagged to be shown turned back (as a phone stores them).

    `draw`: frame n's picture, where not the scene's own (the judge's negative controls draw renders). A WebM
    clip is that H.264 clip turned into lossless VP9 with its sound as Opus (what a WebM holds)."""
    if spec.container != "mp4":
        h264 = write_clip(path.with_name(f"{path.stem}-h264.mp4"), replace(spec, container="mp4"), draw)
        subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-i", str(h264),
                        "-c:v", "libvpx-vp9", "-lossless", "1", "-c:a", "libopus", "-b:a", "192k",
                        "-f", spec.container, str(path)], check=True, timeout=600)  # fmt: skip
        h264.unlink()
        return path
    width, height = spec.size
    turns = (spec.rotation // 90) % 4
    if turns % 2:
        width, height = height, width
    # A gap makes the video longer than its frames: the audio covers it.
    # The sound lasts exactly the frames (at 29.97 fps 360 frames are 12.012 s): a longer sound would make
    # FaceFusion count a black frame past the last (it counts round(container duration × rate)).
    seconds = spec.frames / float(spec.fps) + (5 / float(spec.fps) if spec.gap_at is not None else 0.0)
    tracks = [write_wav(path.with_name(f"{path.stem}-audio{track}.wav"), seconds, track)
              for track in range(spec.audio_tracks)]  # fmt: skip
    video_filter = _colour_filter(spec)
    if spec.gap_at is not None:
        video_filter = f"setpts='(N+5*gt(N,{spec.gap_at}))/({spec.fps}*TB)',{video_filter}"
    argv = [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y",
            "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{width}x{height}", "-framerate", str(spec.fps),
            "-i", "pipe:0",
            *[item for track in tracks for item in ("-i", str(track))],
            "-map", "0:v:0", *[item for index in range(len(tracks)) for item in ("-map", f"{index + 1}:a:0")],
            "-vf", video_filter, "-c:v", "libx264", "-crf", "8", "-preset", "medium",
            "-profile:v", "high10" if spec.transfer else "high", "-fps_mode", "passthrough",
            "-c:a", "aac", "-b:a", "192k", "-shortest", "-f", "mp4",
            str(path.with_name(f"{path.stem}-stored.mp4") if turns else path)]  # fmt: skip
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdin is not None
        for number in range(spec.frames):
            upright = (draw or (lambda at: picture(spec, at)))(number)
            process.stdin.write(np.ascontiguousarray(np.rot90(upright, k=-turns)).tobytes())
        process.stdin.close()
        errors = process.stderr.read() if process.stderr else b""
        if process.wait(timeout=600) != 0:
            raise RuntimeError(f"writing {path.name}: ffmpeg failed: {errors.decode(errors='replace')[-800:]}")
    for track in tracks:
        track.unlink()
    if turns:
        stored = path.with_name(f"{path.stem}-stored.mp4")
        subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-display_rotation",
                        str(spec.rotation), "-i", str(stored), "-map", "0", "-c", "copy", str(path)],
                       check=True, timeout=120)  # fmt: skip
        stored.unlink()
    return path


def write_source(path: Path, person: str = "a") -> Path:
    """A source picture: one face of `person` (its frame-number code left out)."""
    if not cv2.imwrite(str(path), face_image(person=person)):
        raise RuntimeError(f"could not write {path}")
    return path
