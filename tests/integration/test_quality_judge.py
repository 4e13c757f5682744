"""The quality benchmark's independent judge decides what it claims to (benchmarks.judge)."""

from __future__ import annotations

import math

import cv2
import numpy as np

from benchmarks.judge import Judge, Verdict, iou, outside_faces
from fleetctl import samples

# Small pictures: dlib's CNN detector costs in proportion to the pixels it scans (the source's identity is
# taken at twice its size, as the judge does for small sources), and what is judged here (same place, closer
# to the source, the background left out) does not depend on the size. At full size (a 512x600 portrait,
# 640x360 frames) this test took 100 s of CPU; here the faces are about 60 px wide, still well within what
# the detector finds (it finds them from about 40 px when upsampled once), and the pasted face stays far
# closer to the source than to the target (0.24 against 0.73 in descriptor distance, measured).
SOURCE_SCALE = 0.4
FRAME_WIDTH, FRAME_HEIGHT = 320, 180


def test_an_untouched_frame_is_no_swap_and_a_pasted_source_face_is_one() -> None:
    judge = Judge()
    small = cv2.resize(samples.grace_hopper(), None, fx=SOURCE_SCALE, fy=SOURCE_SCALE, interpolation=cv2.INTER_AREA)
    grace = np.ascontiguousarray(small, dtype=np.uint8)
    identity = judge.identity(grace)
    target = next(samples.astronaut_frames(1, width=FRAME_WIDTH, height=FRAME_HEIGHT))
    # GIVEN the astronaut frame unchanged: every face is still the astronaut, and the background identical
    unchanged = Verdict()
    unchanged.add_frame(judge, identity, target, target.copy())
    summary = unchanged.summary()
    assert summary["target_faces"] == 1 and summary["identity_share"] == 0.0
    assert summary["background_psnr_db"] == math.inf
    # GIVEN Grace Hopper's face pasted over the astronaut's (a crude but real change of identity)
    (face,) = judge.faces(target)
    left, top, right, bottom = face.box
    (source_face,) = judge.faces(grace)
    sl, st, sr, sb = source_face.box
    pasted = target.copy()
    pasted[top:bottom, left:right] = cv2.resize(grace[st:sb, sl:sr], (right - left, bottom - top))
    swapped = Verdict()
    swapped.add_frame(judge, identity, target, pasted)
    # THEN the judge finds the face closer to the source
    assert swapped.summary()["identity_share"] == 1.0


def test_the_background_measure_leaves_out_the_faces_and_their_surroundings() -> None:
    mask = outside_faces((100, 100, 3), [(40, 40, 60, 60)])
    assert not mask[50, 50] and not mask[35, 50] and mask[5, 5] and mask[95, 95]
    assert iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0 and iou((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0
