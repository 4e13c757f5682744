"""Following faces through a shot: detect every k frames, track with optical flow in between.

Each tracked face carries its 68 landmarks. Per frame they are moved by pyramidal Lucas-Kanade flow
(with a forward-backward check), then pulled a little towards a fresh shape-predictor fit on the
tracked box, which stops drift without bringing back the fit's frame-to-frame noise, and finally
smoothed over time. A track that degrades (flow lost, fit and flow disagree, implausible shape,
leaving the frame) triggers an immediate re-detection and dies if it is not re-detected.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from gpu_worker.engines.classic import landmarks as lm
from gpu_worker.engines.classic.detect import HOG_WINDOW, Box, Detection, box_iou, detect_faces
from gpu_worker.engines.classic.models import DlibModels
from gpu_worker.engines.classic.presets import Preset, Smoothing
from gpu_worker.engines.classic.smoothing import KalmanFilter, OneEuroFilter, similarity_transform
from gpu_worker.engines.classic.warp import Points

LOG = logging.getLogger(__name__)

Gray = npt.NDArray[np.uint8]
Arrays = dict[str, npt.NDArray[Any]]
MIN_SCORE = -0.2
MATCH_IOU = 0.3
DUPLICATE_IOU = 0.5
MIN_GOOD_FLOW = 0.5
# Share of landmarks passing the forward-backward flow check above which a weak fit is forgiven.
STRONG_FLOW = 0.9
MAX_DISAGREEMENT = 0.25  # x inter-ocular distance
MAX_MISSES = 2
MIN_VISIBLE = 0.6  # share of the face box inside the frame
MIN_DETECTED_FACE = 1.1 * HOG_WINDOW  # px at detection scale
# Per-frame check that a track still sits on a face (see landmarks.anchoring): two nudges cost two
# predictor runs (~1 ms). Measured: tracked faces <= 0.16; empty, noisy or patch regions >= 0.8.
TRACK_NUDGES = ((0.08, 0.0, 1.0), (0.0, 0.08, 1.0))
MAX_TRACK_ANCHORING = 0.5


@dataclass(frozen=True)
class TrackedFace:
    track_id: int
    landmarks: Points
    """Smoothed 68 landmarks: what the swap warps onto."""
    box: Box
    score: float
    age: int
    """Frames this face has been tracked before this one (0: found on this frame)."""
    refreshed: bool = False
    """The track was lost and re-found on this frame: whatever was learnt about it may be stale."""


@dataclass
class _Track:
    track_id: int
    raw: Points
    box: Box
    score: float
    smoother: OneEuroFilter | KalmanFilter | None
    smoothed: Points = field(init=False)
    misses: int = 0
    degraded: bool = False
    refreshed: bool = False
    age: int = 0

    def __post_init__(self) -> None:
        self.smoothed = self.raw.copy()


def _visible_share(box: Box, shape: tuple[int, ...]) -> float:
    frame: Box = (0.0, 0.0, float(shape[1]), float(shape[0]))
    x0, y0 = max(box[0], frame[0]), max(box[1], frame[1])
    x1, y1 = min(box[2], frame[2]), min(box[3], frame[3])
    area = max(1e-6, (box[2] - box[0]) * (box[3] - box[1]))
    return max(0.0, x1 - x0) * max(0.0, y1 - y0) / area


def flow_points(
    previous: Gray, current: Gray, points: Points, face_size: float
) -> tuple[Points, npt.NDArray[np.bool_]]:
    """`points` moved from `previous` to `current` by LK flow, and which of them are trustworthy.

    Flow runs on a crop around the face, not the whole frame: pyramids of a crop are far cheaper.
    """
    height, width = current.shape[:2]
    pad = 0.8 * face_size
    x0 = int(max(0, np.floor(points[:, 0].min() - pad)))
    y0 = int(max(0, np.floor(points[:, 1].min() - pad)))
    x1 = int(min(width, np.ceil(points[:, 0].max() + pad)))
    y1 = int(min(height, np.ceil(points[:, 1].max() + pad)))
    if x1 - x0 < 16 or y1 - y0 < 16:
        return points.copy(), np.zeros(len(points), dtype=bool)
    offset = np.array([x0, y0], dtype=np.float32)
    before = np.ascontiguousarray(previous[y0:y1, x0:x1])
    after = np.ascontiguousarray(current[y0:y1, x0:x1])
    window = int(np.clip(face_size * 0.25, 9, 31)) | 1
    criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 20, 0.03)
    start = (points - offset).reshape(-1, 1, 2).astype(np.float32)
    moved, status, _ = cv2.calcOpticalFlowPyrLK(
        before, after, start, None, winSize=(window, window), maxLevel=3, criteria=criteria
    )
    back, back_status, _ = cv2.calcOpticalFlowPyrLK(
        after, before, moved, None, winSize=(window, window), maxLevel=3, criteria=criteria
    )
    round_trip = np.linalg.norm((back - start).reshape(-1, 2), axis=1)
    good = (status.ravel() == 1) & (back_status.ravel() == 1) & (round_trip < max(0.5, 0.02 * face_size))
    return (moved.reshape(-1, 2) + offset).astype(np.float32), good


class FaceTracker:
    """Per-segment face tracking state; `update()` once per frame, in order."""

    def __init__(self, models: DlibModels, preset: Preset, fps: float) -> None:
        self.models = models
        self.preset = preset
        self.fps = fps
        self._tracks: list[_Track] = []
        self._previous: Gray | None = None
        self._frame = 0
        self._next_id = 1

    def _smoother(self) -> OneEuroFilter | KalmanFilter | None:
        if self.preset.smoothing is Smoothing.ONE_EURO:
            return OneEuroFilter(self.preset.one_euro, self.fps)
        if self.preset.smoothing is Smoothing.KALMAN:
            return KalmanFilter(self.preset.kalman, self.fps)
        return None

    def _follow(self, track: _Track, gray: Gray) -> None:
        """Move a track's landmarks onto this frame and judge whether it still holds."""
        previous = track.raw.copy()
        size = lm.interocular(track.raw) * 2.2
        if self.preset.optical_flow and self._previous is not None:
            flowed, good = flow_points(self._previous, gray, track.raw, size)
            if good.sum() >= 8:
                # Points that lost the flow move with the face's median motion.
                shift = np.median(flowed[good] - track.raw[good], axis=0)
                flowed = np.where(good[:, None], flowed, track.raw + shift).astype(np.float32)
            else:
                flowed = track.raw.copy()
        else:
            flowed, good = track.raw.copy(), np.zeros(len(track.raw), dtype=bool)
        box = lm.box_from_landmarks(flowed)
        fitted = lm.predict_landmarks(self.models.predictor, gray, box)
        gain = np.where(good, self.preset.flow_correction, 1.0).astype(np.float32)[:, None]
        track.raw = (flowed + gain * (fitted - flowed)).astype(np.float32)
        if track.smoother is not None:
            track.smoother.follow(similarity_transform(previous, track.raw))
        track.box = lm.box_from_landmarks(track.raw)
        disagreement = float(np.median(np.linalg.norm(fitted - flowed, axis=1)))
        eye_gap = max(lm.interocular(track.raw), 1.0)
        lost = (
            (self.preset.optical_flow and good.mean() < MIN_GOOD_FLOW)
            or not lm.geometry_plausible(track.raw, track.box)
            or _visible_share(track.box, gray.shape) < MIN_VISIBLE
        )
        # A turned or squeezed face weakens the landmark fit (it disagrees with the flow, or follows
        # a nudged box) while the flow still holds every point: then the flow is the evidence, and
        # the track is kept through the turn instead of dying with nothing to re-detect it.
        doubtful = (
            disagreement > MAX_DISAGREEMENT * eye_gap
            # Without this, a face that vanishes (a cut, an occlusion) keeps being "fitted" in place.
            or lm.anchoring(self.models.predictor, gray, box, fitted, TRACK_NUDGES) > MAX_TRACK_ANCHORING
        )
        track.degraded = lost or (doubtful and not (self.preset.optical_flow and good.mean() >= STRONG_FLOW))

    def _detect(self, gray: Gray) -> list[Detection]:
        scale = min(1.0, self.preset.detect_height / gray.shape[0])
        if self._tracks:
            # Never shrink a tracked face below what the detector (with its upsampling) can see.
            smallest = min(t.box[2] - t.box[0] for t in self._tracks)
            needed = MIN_DETECTED_FACE / (2**self.preset.detect_upsample) / max(smallest, 1.0)
            scale = min(1.0, max(scale, needed))
        return detect_faces(self.models.detector, gray, scale, self.preset.detect_upsample, MIN_SCORE)

    def _due(self) -> bool:
        interval = self.preset.detect_interval if self._tracks else max(1, self.preset.detect_interval // 3)
        return self._frame % interval == 0 or any(track.degraded for track in self._tracks)

    def _reconcile(self, gray: Gray, detections: list[Detection]) -> None:
        """Match detections to tracks, start tracks for new real faces, end lost ones."""
        unmatched = list(detections)
        survivors: list[_Track] = []
        for track in sorted(self._tracks, key=lambda t: -t.age):
            best = max(unmatched, key=lambda d: box_iou(d.box, track.box), default=None)
            if best is not None and box_iou(best.box, track.box) >= MATCH_IOU:
                unmatched.remove(best)
                track.misses, track.score = 0, best.score
                if track.degraded:
                    refit = lm.predict_landmarks(self.models.predictor, gray, best.box)
                    if track.smoother is not None:
                        track.smoother.follow(similarity_transform(track.raw, refit))
                    track.raw = refit
                    track.box, track.degraded, track.refreshed = best.box, False, True
                survivors.append(track)
            elif not track.degraded and track.misses < MAX_MISSES:
                track.misses += 1
                survivors.append(track)
            else:
                LOG.debug("face track %d ended at frame %d", track.track_id, self._frame)
        for detection in unmatched:
            if any(box_iou(detection.box, t.box) > DUPLICATE_IOU for t in survivors):
                continue
            points = lm.predict_landmarks(self.models.predictor, gray, detection.box)
            if _visible_share(detection.box, gray.shape) < MIN_VISIBLE:
                continue
            if not lm.is_real_face(self.models.predictor, gray, detection.box, points, detection.score):
                LOG.debug("rejected a false-positive face at %s (score %.2f)", detection.box, detection.score)
                continue
            track = _Track(self._next_id, points, detection.box, detection.score, self._smoother())
            self._next_id += 1
            survivors.append(track)
            LOG.debug("face track %d started at frame %d", track.track_id, self._frame)
        self._tracks = survivors

    def state(self) -> tuple[dict[str, Any], Arrays]:
        """Everything `update()` carries to the next frame, as JSON-able fields and exact arrays.

        A tracker given it by `restore()` continues bit for bit where this one is now.
        """
        arrays: Arrays = {}
        tracks = []
        for number, track in enumerate(self._tracks):
            arrays[f"track{number}.raw"] = track.raw
            arrays[f"track{number}.smoothed"] = track.smoothed
            filtered = track.smoother.state() if track.smoother is not None else {}
            arrays |= {f"track{number}.smoother.{name}": value for name, value in filtered.items()}
            tracks.append(
                {
                    "id": track.track_id, "box": list(track.box), "score": track.score, "misses": track.misses,
                    "degraded": track.degraded, "refreshed": track.refreshed, "age": track.age,
                    "smoother": sorted(filtered),
                }
            )  # fmt: skip
        if self._previous is not None:
            arrays["previous"] = self._previous
        return {"frame": self._frame, "next_id": self._next_id, "tracks": tracks}, arrays

    def restore(self, fields: dict[str, Any], arrays: Arrays) -> None:
        """Continue from another tracker's `state()` (same preset and rate); KeyError when it is incomplete."""
        tracks = []
        for number, saved in enumerate(fields["tracks"]):
            smoother = self._smoother()
            if smoother is not None:
                smoother.set_state({name: arrays[f"track{number}.smoother.{name}"] for name in saved["smoother"]})
            elif saved["smoother"]:
                raise KeyError("the state was saved with a temporal filter this preset does not use")
            x0, y0, x1, y1 = (float(value) for value in saved["box"])
            track = _Track(
                int(saved["id"]), arrays[f"track{number}.raw"], (x0, y0, x1, y1), float(saved["score"]), smoother
            )
            track.smoothed = arrays[f"track{number}.smoothed"]
            track.misses, track.age = int(saved["misses"]), int(saved["age"])
            track.degraded, track.refreshed = bool(saved["degraded"]), bool(saved["refreshed"])
            tracks.append(track)
        self._tracks = tracks
        self._previous = arrays.get("previous")
        self._frame, self._next_id = int(fields["frame"]), int(fields["next_id"])

    def update(self, gray: Gray) -> list[TrackedFace]:
        for track in self._tracks:
            self._follow(track, gray)
        if self._due():
            self._reconcile(gray, self._detect(gray))
        faces = []
        for track in self._tracks:
            scale = max(lm.interocular(track.raw), 1.0)
            if track.smoother is not None:
                track.smoothed = track.smoother(track.raw, scale).astype(np.float32)
            else:
                track.smoothed = track.raw.copy()
            faces.append(
                TrackedFace(track.track_id, track.smoothed.copy(), track.box, track.score, track.age, track.refreshed)
            )
            track.age += 1
            track.refreshed = False
        self._previous = gray
        self._frame += 1
        return faces
