"""Temporal filters: less jitter on a noisy landmark track, and no lag on rigid motion."""

from __future__ import annotations

import numpy as np

from gpu_worker.engines.classic.smoothing import (
    KalmanFilter,
    KalmanParams,
    OneEuroFilter,
    OneEuroParams,
    apply_affine,
    similarity_transform,
)

FPS = 25.0


def _jitter(track: np.ndarray) -> float:
    """Mean magnitude of the second difference (frame-to-frame acceleration)."""
    return float(np.abs(np.diff(track, n=2, axis=0)).mean())


def _noisy_track(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(200) / FPS
    truth = np.stack([100 + 20 * np.sin(2 * np.pi * t / 4), 50 + 10 * np.cos(2 * np.pi * t / 5)], axis=1)
    return truth, truth + rng.normal(0, 1.0, truth.shape)


def test_one_euro_filter_removes_jitter_from_a_still_point() -> None:
    # GIVEN a still point measured with one pixel of noise
    rng = np.random.default_rng(0)
    noisy = np.array([100.0, 50.0]) + rng.normal(0, 1.0, (200, 2))
    smoother = OneEuroFilter(OneEuroParams(min_cutoff=1.0, beta=0.5), FPS)

    # WHEN each measurement is filtered in order (scale: a 50-pixel face)
    filtered = np.array([smoother(sample, scale=50.0) for sample in noisy])

    # THEN jitter drops several-fold and the point is found more precisely than any one measurement
    assert _jitter(filtered) < _jitter(noisy) / 4
    assert np.abs(filtered - [100.0, 50.0])[20:].mean() < 0.5 * np.abs(noisy - [100.0, 50.0])[20:].mean()


def test_one_euro_speed_term_reduces_the_lag_on_a_moving_point() -> None:
    # GIVEN a noisy moving point and two One-Euro filters, with and without the speed term (beta)
    truth, noisy = _noisy_track()
    fixed = OneEuroFilter(OneEuroParams(min_cutoff=1.0, beta=0.0), FPS)
    adaptive = OneEuroFilter(OneEuroParams(min_cutoff=1.0, beta=2.0), FPS)

    # WHEN both filter the track
    plain = np.array([fixed(sample, scale=50.0) for sample in noisy])
    quick = np.array([adaptive(sample, scale=50.0) for sample in noisy])

    # THEN the adaptive one follows the motion more closely and still removes most jitter
    assert np.abs(quick - truth)[20:].mean() < 0.8 * np.abs(plain - truth)[20:].mean()
    assert _jitter(quick) < _jitter(noisy) / 2


def test_kalman_filter_reduces_jitter_and_stays_close_to_the_truth() -> None:
    # GIVEN the same noisy track
    truth, noisy = _noisy_track(seed=1)
    smoother = KalmanFilter(KalmanParams(process_noise=0.3, measurement_noise=0.01), FPS)

    # WHEN filtered
    filtered = np.array([smoother(sample) for sample in noisy])

    # THEN jitter drops and the error to the truth drops too
    assert _jitter(filtered) < _jitter(noisy) / 4
    assert np.abs(filtered - truth)[20:].mean() < np.abs(noisy - truth)[20:].mean()


def test_motion_compensation_removes_the_lag_on_a_panning_face() -> None:
    # GIVEN a 3-point "face" panning 4 px per frame, measured with small noise
    rng = np.random.default_rng(3)
    shape = np.array([[0.0, 0.0], [30.0, 0.0], [15.0, 25.0]])
    truth = [shape + np.array([4.0 * i, 0.0]) for i in range(60)]
    measured = [points + rng.normal(0, 0.3, points.shape) for points in truth]
    plain = OneEuroFilter(OneEuroParams(min_cutoff=1.0, beta=0.0), FPS)
    compensated = OneEuroFilter(OneEuroParams(min_cutoff=1.0, beta=0.0), FPS)

    # WHEN one filter is told the rigid motion between frames and the other is not
    lag_plain, lag_compensated = [], []
    for index, points in enumerate(measured):
        if index:
            compensated.follow(similarity_transform(measured[index - 1], points))
        lag_plain.append(float(np.abs(plain(points, 30.0) - truth[index]).mean()))
        lag_compensated.append(float(np.abs(compensated(points, 30.0) - truth[index]).mean()))

    # THEN the plain filter trails the face by pixels, the compensated one by a fraction of one
    assert np.mean(lag_plain[30:]) > 5.0
    assert np.mean(lag_compensated[30:]) < 0.5


def test_similarity_transform_recovers_rotation_scale_and_shift() -> None:
    # GIVEN points and a known similarity transform of them
    rng = np.random.default_rng(4)
    points = rng.uniform(0, 100, (20, 2))
    angle, scale = np.deg2rad(12.0), 1.15
    linear = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    matrix = np.hstack([linear, [[5.0], [-7.0]]])

    # WHEN it is estimated back from the point pairs
    estimated = similarity_transform(points, apply_affine(matrix, points))

    # THEN it is the same transform
    np.testing.assert_allclose(estimated, matrix, atol=1e-9)
