"""Colour matching moves the warped face's skin statistics onto the target's skin."""

from __future__ import annotations

import numpy as np

from gpu_worker.engines.classic import colour


def _noisy(colour_bgr: tuple[int, int, int], spread: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = np.array(colour_bgr, dtype=np.float64) + rng.normal(0, spread, (80, 80, 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def test_lab_matching_moves_mean_and_spread_to_the_target() -> None:
    # GIVEN a pale, low-contrast source face and a darker, warmer, higher-contrast target skin
    source = _noisy((200, 190, 185), spread=4, seed=1)
    target = _noisy((90, 120, 170), spread=12, seed=2)
    skin = np.full((80, 80), 255, dtype=np.uint8)
    before = colour.lab_stats(colour.to_lab(source), skin)
    wanted = colour.lab_stats(colour.to_lab(target), skin)
    assert before is not None and wanted is not None

    # WHEN the source is matched to the target
    matched, used = colour.match_colour(source, target, skin, match_spread=True, local_sigma=0, local_strength=0)

    # THEN its LAB mean is (nearly) the target's, and its spread moved towards the target's
    after = colour.lab_stats(colour.to_lab(matched), skin)
    assert after is not None and used is not None
    assert np.linalg.norm(after.mean - wanted.mean) < 0.1 * np.linalg.norm(before.mean - wanted.mean)
    assert np.all(np.abs(after.std - wanted.std) < np.abs(before.std - wanted.std))


def test_regional_matching_carries_the_target_shading() -> None:
    # GIVEN an evenly lit source and a target lit from the left (bright left, dark right)
    source = np.full((80, 80, 3), 150, dtype=np.uint8)
    ramp = np.linspace(200, 100, 80)[None, :, None]
    target = np.broadcast_to(ramp, (80, 80, 3)).astype(np.uint8)
    skin = np.full((80, 80), 255, dtype=np.uint8)

    # WHEN matched globally and regionally
    flat, _ = colour.match_colour(source, target, skin, match_spread=True, local_sigma=0, local_strength=0)
    shaded, _ = colour.match_colour(source, target, skin, match_spread=True, local_sigma=10, local_strength=1)

    # THEN only the regional match is brighter on the left than on the right
    def left_minus_right(image: np.ndarray) -> float:
        return float(image[:, :20].mean() - image[:, -20:].mean())

    assert abs(left_minus_right(flat)) < 2
    assert left_minus_right(shaded) > 30


def test_statistics_memory_blends_previous_frames() -> None:
    # GIVEN last frame's skin statistics and a sudden change in this frame's
    previous = colour.LabStats(np.array([50, 0, 0], np.float32), np.ones(3, np.float32))
    current = colour.LabStats(np.array([70, 10, 10], np.float32), np.ones(3, np.float32) * 3)

    # WHEN they are blended with a memory of 0.8
    blended = colour.blend_stats(previous, current, keep=0.8)

    # THEN the result moves only a fifth of the way (no colour flicker from one odd frame)
    np.testing.assert_allclose(blended.mean, [54, 2, 2], atol=1e-4)
    np.testing.assert_allclose(blended.std, [1.4, 1.4, 1.4], atol=1e-4)
