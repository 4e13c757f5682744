"""The parity tool's judge: two renders of one target compared by what they show, frame by frame, and by sound.

`python -m benchmarks.parity.judge REFERENCE CANDIDATE [--layout FILE]` prints an account and one JSON
line last (`"equal": …`); it exits 0 only when the two are equal.

Equal means all of:
- the same size and frame count, and every frame at least PSNR_GOAL dB from its counterpart (a coarse
  bar for gross differences: two x264 encodes of one render already sit near 40 dB, so PSNR alone
  cannot tell a right render from one a bit off);
- the same content, read rather than measured: the frame-number code at the foot of every frame
  (benchmarks/parity/codes.py) and, where a layout says where the harness drew its people, the code
  inside every face (through whatever the processors did to it) and each face's mean colour (a swap
  from another source, or onto the other person, tints it by about ten levels);
- video and container durations within one frame, the same colour tags;
- the same audio tracks (codec, rate, channels), lengths within one AAC frame, no offset between the
  first tracks (found by cross-correlation: a shift of one video frame is a difference), and their
  samples alike (SNR at least AUDIO_SNR_GOAL dB).

Every difference has a kind (and, where it has one, a measure), so a documented, deliberate difference
can be allowed by kind and measure while every other comparison still has to pass (`Allowance`).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.parity import codes, media
from fleetctl.harness.geometry import FACE_HEIGHT, FACE_WIDTH

PSNR_GOAL = 38.0
IDENTICAL = 100.0  # the PSNR reported for frames with no difference at all (it is infinite)
AUDIO_FRAME = 1024  # samples in an AAC frame: the tolerance on an audio track's length
AUDIO_SNR_GOAL = 40.0
AUDIO_LAG_TOLERANCE = 24  # samples (0.5 ms at 48 kHz): sound later or earlier than this is a difference
AUDIO_LAG_SEARCH_S = 1.0  # the offsets looked at, either way
AUDIO_COMPARED_S = 30.0  # the stretch of sound correlated (its start)
CODE_TOLERANCE = 12.0  # levels a code cell may move between the two; a flipped bit moves it by about 70
FACE_COLOUR_TOLERANCE = 3.0  # levels a face's mean colour may move; a wrong source moves it by about ten
FACE_INSET = 8  # pixels of a face box left out at each edge (the swap's mask blurs there), at the target's scale
WORST_LISTED = 5
LISTED_FRAMES = 4


@dataclass(frozen=True)
class Difference:
    kind: str
    text: str
    value: float | None = None  # the measure, where the kind has one (frames apart, samples late, …)


@dataclass(frozen=True)
class Allowance:
    """A difference a deliberate case documents: its kind, and the measure it must have (± tolerance)."""

    kind: str
    value: float | None = None
    tolerance: float = 0.0

    def allows(self, difference: Difference) -> bool:
        if difference.kind != self.kind:
            return False
        if self.value is None:
            return True
        return difference.value is not None and abs(difference.value - self.value) <= self.tolerance


def unexplained(found: Iterable[Difference], allowed: Sequence[Allowance]) -> list[Difference]:
    """The differences no allowance covers."""
    return [item for item in found if not any(allowance.allows(item) for allowance in allowed)]


@dataclass(frozen=True)
class Layout:
    """Where the harness drew its people in each frame of the target (by frame number), at the target's size."""

    size: tuple[int, int]
    faces: Mapping[int, Sequence[tuple[int, int]]]
    fps: float = 0.0  # the target's rate
    first: int = 0  # the target frame the render's first frame shows (a trim's start)

    @classmethod
    def load(cls, path: Path) -> Layout:
        data = json.loads(path.read_text())
        faces = {int(number): [(int(box[0]), int(box[1])) for box in boxes] for number, boxes in data["faces"].items()}
        width, height = data["size"]
        return cls((int(width), int(height)), faces, float(data.get("fps", 0.0)), int(data.get("first", 0)))

    def to_json(self) -> dict[str, Any]:
        faces = {str(number): [list(box) for box in boxes] for number, boxes in self.faces.items()}
        return {"size": list(self.size), "fps": self.fps, "first": self.first, "faces": faces}


def psnr(first: media.Image, second: media.Image) -> float:
    error = float(np.mean((first.astype(np.float64) - second.astype(np.float64)) ** 2))
    return IDENTICAL if error == 0 else min(IDENTICAL, 10 * math.log10(255.0**2 / error))


def snr(reference: npt.NDArray[np.float32], other: npt.NDArray[np.float32]) -> float:
    noise = float(np.mean((reference.astype(np.float64) - other.astype(np.float64)) ** 2))
    signal = float(np.mean(reference.astype(np.float64) ** 2))
    return IDENTICAL if noise == 0 else min(IDENTICAL, 10 * math.log10(max(signal, 1e-20) / noise))


def lag(reference: npt.NDArray[np.float32], other: npt.NDArray[np.float32], search: int) -> int:
    """How many samples later `other` plays what `reference` plays (negative: earlier), within ±search."""
    length = min(reference.shape[0], other.shape[0])
    if length == 0:
        return 0
    a = reference[:length].astype(np.float64) - float(reference[:length].mean())
    b = other[:length].astype(np.float64) - float(other[:length].mean())
    size = 1 << math.ceil(math.log2(2 * length))
    correlation = np.fft.irfft(np.conj(np.fft.rfft(a, size)) * np.fft.rfft(b, size), size)
    lags = np.concatenate([np.arange(0, min(search, length - 1) + 1), np.arange(-min(search, length - 1), 0)])
    values = correlation[lags % size]
    return int(lags[int(np.argmax(values))])


def shifted(samples: npt.NDArray[np.float32], by: int) -> npt.NDArray[np.float32]:
    """`samples` moved `by` samples earlier (a positive lag undone)."""
    return samples[by:] if by >= 0 else np.concatenate([np.zeros((-by, *samples.shape[1:]), samples.dtype), samples])


@dataclass
class Verdict:
    found: list[Difference]
    frames: list[int]  # [the reference's, the candidate's]
    min_psnr: float | None
    audio: dict[str, Any]
    median_psnr: float | None = None
    worst_frames: list[tuple[int, float]] = field(default_factory=list)
    size: list[list[int]] = field(default_factory=list)
    duration_s: list[float] = field(default_factory=list)
    colour: list[dict[str, str]] = field(default_factory=list)
    content: dict[str, Any] = field(default_factory=dict)  # what the codes and faces said

    @property
    def equal(self) -> bool:
        return not self.found

    @property
    def differences(self) -> list[str]:
        return [item.text for item in self.found]

    def to_dict(self) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "frames": self.frames,
            "min_psnr": self.min_psnr,
            "audio": self.audio,
            "differences": self.differences,
            "kinds": [{"kind": item.kind, "value": item.value} for item in self.found],
            "median_psnr": self.median_psnr,
            "worst_frames": self.worst_frames,
            "size": self.size,
            "duration_s": self.duration_s,
            "colour": self.colour,
            "content": self.content,
        }


def judge(
    reference: Path, candidate: Path, layout: Layout | None = None, names: tuple[str, str] = ("FaceFusion", "the farm")
) -> Verdict:
    """`reference`: FaceFusion's own render; `candidate`: the farm's. `layout`: where the target's faces are."""
    ours, theirs = media.probe(reference), media.probe(candidate)
    ref, can = names
    found: list[Difference] = []
    if (ours.width, ours.height) != (theirs.width, theirs.height):
        found.append(
            Difference("size", f"size: {ref} {ours.width}×{ours.height}, {can} {theirs.width}×{theirs.height}")
        )
    first, second = media.frames(reference), media.frames(candidate)
    if len(first) != len(second):
        found.append(
            Difference(
                "frame_count", f"frame count: {ref} {len(first)}, {can} {len(second)}", float(len(second) - len(first))
            )
        )
    pairs = [(a, b) for a, b in zip(first, second, strict=False) if a.shape == b.shape]
    scores = [psnr(a, b) for a, b in pairs]
    worst = sorted(enumerate(scores), key=lambda item: item[1])[:WORST_LISTED]
    below = [(index, score) for index, score in worst if score < PSNR_GOAL]
    if below:
        count = sum(score < PSNR_GOAL for score in scores)
        listed = ", ".join(f"{index} ({score:.1f} dB)" for index, score in below)
        said = f"{count} of {len(scores)} frames below {PSNR_GOAL:g} dB PSNR, the worst: {listed}"
        found.append(Difference("psnr", said, float(count)))
    content = compare_content(pairs, layout, ours.fps, names, found) if pairs else {}
    frame_s = 1 / ours.fps if ours.fps else 0.04
    for kind, what, a, b in (
        ("video_duration", "video duration", ours.video_duration_s, theirs.video_duration_s),
        ("container_duration", "container duration", ours.format_duration_s, theirs.format_duration_s),
    ):
        if abs(a - b) > frame_s + 1e-6:
            found.append(Difference(kind, f"{what}: {ref} {a:.3f} s, {can} {b:.3f} s", round(b - a, 4)))
    changed = [key for key in media.COLOUR_KEYS if ours.colour[key] != theirs.colour[key]]
    if changed:
        said = ", ".join(f"{key} {ours.colour[key]} / {theirs.colour[key]}" for key in changed)
        found.append(Difference("colour_tags", f"colour tags ({ref} / {can}): {said}"))
    audio = compare_audio(reference, candidate, ours, theirs, names, found)
    return Verdict(
        found=found,
        frames=[len(first), len(second)],
        min_psnr=round(min(scores), 2) if scores else None,
        audio=audio,
        median_psnr=round(statistics.median(scores), 2) if scores else None,
        worst_frames=[(index, round(score, 2)) for index, score in worst],
        size=[[ours.width, ours.height], [theirs.width, theirs.height]],
        duration_s=[round(ours.format_duration_s, 4), round(theirs.format_duration_s, 4)],
        colour=[ours.colour, theirs.colour],
        content=content,
    )


def _face_colour(image: media.Image, x: int, y: int, scale: float) -> npt.NDArray[np.float64] | None:
    x0, y0 = round((x + FACE_INSET) * scale), round((y + FACE_INSET) * scale)
    x1, y1 = round((x + FACE_WIDTH - FACE_INSET) * scale), round((y + FACE_HEIGHT - FACE_INSET) * scale)
    if x0 < 0 or y0 < 0 or x1 > image.shape[1] or y1 > image.shape[0]:
        return None
    mean: npt.NDArray[np.float64] = np.asarray(image[y0:y1, x0:x1], dtype=np.float64).reshape(-1, 3).mean(axis=0)
    return mean


def _listed(frames: list[str]) -> str:
    more = f" and {len(frames) - LISTED_FRAMES} more" if len(frames) > LISTED_FRAMES else ""
    return "; ".join(frames[:LISTED_FRAMES]) + more


def compare_content(
    pairs: Sequence[tuple[media.Image, media.Image]],
    layout: Layout | None,
    fps: float,
    names: tuple[str, str],
    found: list[Difference],
) -> dict[str, Any]:
    """The codes and faces of each pair of frames: the same frame number at the foot and in every face."""
    ref, can = names
    width = pairs[0][0].shape[1]
    scale = width / layout.size[0] if layout else 1.0
    strips, faces, colours = [], [], []
    read_strips = read_faces = 0
    code_moved = colour_moved = 0.0  # the largest moves seen, under the tolerance or not: the margins
    for index, (a, b) in enumerate(pairs):
        mine, theirs = codes.read_strip(a, scale), codes.read_strip(b, scale)
        if mine is not None and theirs is not None and (mine.clear or theirs.clear):
            read_strips += 1
            code_moved = max(code_moved, mine.distance(theirs))
            if mine.differs(theirs, CODE_TOLERANCE):
                strips.append(f"frame {index} ({ref} {mine.number}, {can} {theirs.number})")
        if layout is None:
            continue
        number = mine.number if mine is not None else None
        if number is None:  # no strip to say which frame this is (a background remover fills it): count
            number = layout.first + round(index * _step(layout, fps))
        for x, y in layout.faces.get(number, ()):
            origin = codes.face_origin(x, y, scale)
            first, second = codes.read(a, origin, scale), codes.read(b, origin, scale)
            if first is None or second is None:
                continue
            read_faces += 1
            code_moved = max(code_moved, first.distance(second))
            if first.differs(second, CODE_TOLERANCE):
                faces.append(f"frame {index}, the face at {x},{y} ({ref} {first.number}, {can} {second.number})")
            colour_a, colour_b = _face_colour(a, x, y, scale), _face_colour(b, x, y, scale)
            if colour_a is not None and colour_b is not None:
                moved = float(np.max(np.abs(colour_a - colour_b)))
                colour_moved = max(colour_moved, moved)
                if moved > FACE_COLOUR_TOLERANCE:
                    colours.append(f"frame {index}, the face at {x},{y} ({moved:.1f} levels)")
    for kind, what, listed in (
        ("strip_code", "frame numbers at the foot differ", strips),
        ("face_code", "faces carry another frame's code", faces),
        ("face_colour", f"faces' mean colour moved by more than {FACE_COLOUR_TOLERANCE:g} levels", colours),
    ):
        if listed:
            found.append(Difference(kind, f"{what} in {len(listed)} frames: {_listed(listed)}", float(len(listed))))
    return {
        "strips_read": read_strips,
        "faces_read": read_faces,
        "layout": layout is not None,
        "most_code_moved": round(code_moved, 2),
        "most_face_colour_moved": round(colour_moved, 2),
    }


def _step(layout: Layout, fps: float) -> float:
    """Target frames a rendered frame moves on (the target's rate over the render's), when no strip says."""
    return layout.fps / fps if layout.fps and fps else 1.0


def compare_audio(
    reference: Path,
    candidate: Path,
    ours: media.Probe,
    theirs: media.Probe,
    names: tuple[str, str],
    found: list[Difference],
) -> dict[str, Any]:
    ref, can = names
    facts: dict[str, Any] = {
        "tracks": [len(ours.audio), len(theirs.audio)],
        "codecs": [[track.codec for track in ours.audio], [track.codec for track in theirs.audio]],
    }
    if len(ours.audio) != len(theirs.audio):
        found.append(Difference("audio_tracks", f"audio tracks: {ref} {len(ours.audio)}, {can} {len(theirs.audio)}"))
    if not ours.audio or not theirs.audio:
        return facts
    a, b = ours.audio[0], theirs.audio[0]
    for what, x, y in (
        ("codec", a.codec, b.codec),
        ("sample rate", a.sample_rate, b.sample_rate),
        ("channels", a.channels, b.channels),
    ):
        if x != y:
            found.append(Difference("audio_format", f"audio {what}: {ref} {x}, {can} {y}"))
    first = media.audio_samples(reference, 0, a.channels)
    second = media.audio_samples(candidate, 0, b.channels)
    facts["samples"] = [int(first.shape[0]), int(second.shape[0])]
    if abs(first.shape[0] - second.shape[0]) > AUDIO_FRAME:
        found.append(
            Difference(
                "audio_length",
                f"audio length: {ref} {first.shape[0]} samples, {can} "
                f"{second.shape[0]} (more than one AAC frame apart)",
                float(second.shape[0] - first.shape[0]),
            )
        )
    if first.shape[1] != second.shape[1] or not first.shape[0] or not second.shape[0]:
        return facts
    compared = round(AUDIO_COMPARED_S * media.AUDIO_RATE)
    offset = lag(
        first[:compared].mean(axis=1), second[:compared].mean(axis=1), round(AUDIO_LAG_SEARCH_S * media.AUDIO_RATE)
    )
    facts["offset_samples"] = offset
    if abs(offset) > AUDIO_LAG_TOLERANCE:
        video_frames = offset / media.AUDIO_RATE * (ours.fps or 25.0)
        found.append(
            Difference(
                "audio_offset",
                f"audio offset: {can}'s sound is {abs(offset)} samples "
                f"({abs(video_frames):.2f} video frames) {'late' if offset > 0 else 'early'}",
                float(offset),
            )
        )
    length = min(first.shape[0], second.shape[0])
    facts["snr_db"] = round(snr(first[:length], second[:length]), 2)
    if facts["snr_db"] < AUDIO_SNR_GOAL:
        said = f"audio samples: SNR {facts['snr_db']:.1f} dB (goal ≥ {AUDIO_SNR_GOAL:g} dB)"
        found.append(Difference("audio_samples", said, facts["snr_db"]))
    if offset:
        # The samples once the offset is undone: a documented offset still needs the same sound.
        moved = shifted(second, offset)
        length = min(first.shape[0], moved.shape[0])
        facts["aligned_snr_db"] = round(snr(first[:length], moved[:length]), 2)
        if facts["aligned_snr_db"] < AUDIO_SNR_GOAL:
            found.append(
                Difference(
                    "audio_aligned_samples",
                    f"audio samples, the offset undone: SNR "
                    f"{facts['aligned_snr_db']:.1f} dB (goal ≥ {AUDIO_SNR_GOAL:g} dB)",
                    facts["aligned_snr_db"],
                )
            )
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.parity.judge", description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", type=Path, help="the reference render (FaceFusion's own)")
    parser.add_argument("candidate", type=Path, help="the render judged against it (the farm's)")
    parser.add_argument("--layout", type=Path, help="where the harness drew its people (the parity tool writes it)")
    args = parser.parse_args(argv)
    layout = Layout.load(args.layout) if args.layout else None
    verdict = judge(args.reference, args.candidate, layout)
    read = verdict.content
    print(
        f"{'EQUAL' if verdict.equal else 'NOT EQUAL'}: frames {verdict.frames}, PSNR min {verdict.min_psnr} dB,"
        f" {read.get('strips_read', 0)} strips and {read.get('faces_read', 0)} faces read"
    )
    for text in verdict.differences:
        print(f"  - {text}")
    print(json.dumps(verdict.to_dict()))
    return 0 if verdict.equal else 1


if __name__ == "__main__":
    sys.exit(main())
