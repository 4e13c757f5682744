"""Temporal filters for landmarks: the One-Euro filter and a constant-velocity Kalman filter.

One-Euro (Casiez et al., CHI 2012) is a low-pass filter whose cutoff rises with speed: still faces are
smoothed hard (no jitter), moving faces lightly (little lag). Speeds are measured in units of the
face's size, so the same parameters suit a 60-pixel and a 600-pixel face.

Both filters are motion-compensated: before each sample, `follow()` moves the filter's state by the
face's rigid motion (a similarity transform fitted between consecutive landmark sets), so the filter
smooths only the non-rigid part (landmark noise, expressions) and a panning or zooming face gets no
lag at all. Without this, a filter strong enough to stop jitter trails a moving face by a visible
fraction of its size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


def similarity_transform(source: npt.ArrayLike, target: npt.ArrayLike) -> Array:
    """The 2x3 least-squares similarity (rotation, uniform scale, shift) taking source onto target."""
    src = np.asarray(source, dtype=np.float64).reshape(-1, 2)
    dst = np.asarray(target, dtype=np.float64).reshape(-1, 2)
    src_mean, dst_mean = src.mean(axis=0), dst.mean(axis=0)
    a, b = src - src_mean, dst - dst_mean
    norm = float((a**2).sum())
    if norm < 1e-12:
        return np.array([[1.0, 0.0, dst_mean[0] - src_mean[0]], [0.0, 1.0, dst_mean[1] - src_mean[1]]])
    # Complex-number form of Umeyama's solution: dst = z * src, z = c + i s.
    c = float((a * b).sum()) / norm
    s = float((a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]).sum()) / norm
    linear = np.array([[c, -s], [s, c]])
    shift = dst_mean - linear @ src_mean
    return np.hstack([linear, shift[:, None]])


def apply_affine(matrix: Array, points: Array) -> Array:
    return np.asarray(points @ matrix[:, :2].T + matrix[:, 2], dtype=np.float64)


def _alpha(cutoff_hz: float | Array, dt: float) -> float | Array:
    tau = 1.0 / (2.0 * math.pi * np.asarray(cutoff_hz))
    result: float | Array = 1.0 / (1.0 + tau / dt)
    return result


@dataclass(frozen=True)
class OneEuroParams:
    min_cutoff: float = 1.0
    """Cutoff (Hz) at rest: lower is smoother and laggier."""
    beta: float = 0.5
    """How fast the cutoff rises with speed (per face-size per second)."""
    d_cutoff: float = 1.0
    """Cutoff (Hz) of the speed estimate itself."""


class OneEuroFilter:
    """Filters an array of any shape, element-wise, one sample per call."""

    def __init__(self, params: OneEuroParams, rate_hz: float) -> None:
        self.params = params
        self.dt = 1.0 / max(rate_hz, 1e-3)
        self._value: Array | None = None
        self._speed: Array | None = None

    def reset(self) -> None:
        self._value = None
        self._speed = None

    def state(self) -> dict[str, Array]:
        """What the filter carries from frame to frame (empty before its first sample)."""
        if self._value is None or self._speed is None:
            return {}
        return {"value": self._value.copy(), "speed": self._speed.copy()}

    def set_state(self, state: dict[str, Array]) -> None:
        """Continue from `state()` of an earlier filter with the same parameters."""
        self._value, self._speed = state.get("value"), state.get("speed")

    def follow(self, matrix: Array) -> None:
        """Carry the state along a 2x3 rigid motion (the state must be N x 2 points)."""
        if self._value is not None and self._value.ndim == 2 and self._value.shape[1] == 2:
            self._value = apply_affine(matrix, self._value)

    def __call__(self, sample: npt.ArrayLike, scale: float = 1.0) -> Array:
        """Filter `sample`; `scale` (e.g. the face's size in pixels) normalises speeds."""
        current = np.asarray(sample, dtype=np.float64)
        if self._value is None or self._speed is None or self._value.shape != current.shape:
            self._value = current.copy()
            self._speed = np.zeros_like(current)
            return current.copy()
        speed = (current - self._value) / self.dt / max(scale, 1e-6)
        self._speed = self._speed + _alpha(self.params.d_cutoff, self.dt) * (speed - self._speed)
        cutoff = self.params.min_cutoff + self.params.beta * np.abs(self._speed)
        self._value = self._value + _alpha(cutoff, self.dt) * (current - self._value)
        return self._value.copy()


@dataclass(frozen=True)
class KalmanParams:
    process_noise: float = 0.05
    """Acceleration noise (face sizes per second²): higher follows motion faster."""
    measurement_noise: float = 0.01
    """Measurement noise (face sizes): higher smooths more."""


class KalmanFilter:
    """Constant-velocity Kalman filter applied independently to every element of an array."""

    def __init__(self, params: KalmanParams, rate_hz: float) -> None:
        self.params = params
        self.dt = 1.0 / max(rate_hz, 1e-3)
        self._position: Array | None = None
        self._velocity: Array | None = None
        self._covariance = np.eye(2)

    def reset(self) -> None:
        self._position = None
        self._velocity = None
        self._covariance = np.eye(2)

    def state(self) -> dict[str, Array]:
        """What the filter carries from frame to frame (its covariance only, before its first sample)."""
        state = {"covariance": self._covariance.copy()}
        if self._position is not None and self._velocity is not None:
            state |= {"position": self._position.copy(), "velocity": self._velocity.copy()}
        return state

    def set_state(self, state: dict[str, Array]) -> None:
        """Continue from `state()` of an earlier filter with the same parameters."""
        self._position, self._velocity = state.get("position"), state.get("velocity")
        self._covariance = state["covariance"]

    def follow(self, matrix: Array) -> None:
        """Carry the state along a 2x3 rigid motion (the state must be N x 2 points)."""
        if self._position is not None and self._position.ndim == 2 and self._position.shape[1] == 2:
            self._position = apply_affine(matrix, self._position)
            if self._velocity is not None:
                self._velocity = self._velocity @ matrix[:, :2].T

    def __call__(self, sample: npt.ArrayLike, scale: float = 1.0) -> Array:
        # The gain depends only on the ratio of the two noises, which `scale` would multiply
        # alike, so positions stay in pixels and the covariance in face-size units.
        del scale
        current = np.asarray(sample, dtype=np.float64)
        if self._position is None or self._velocity is None or self._position.shape != current.shape:
            self._position = current.copy()
            self._velocity = np.zeros_like(current)
            self._covariance = np.diag([self.params.measurement_noise**2, 1.0])
            return current.copy()
        dt = self.dt
        transition = np.array([[1.0, dt], [0.0, 1.0]])
        q = self.params.process_noise**2
        noise = q * np.array([[dt**4 / 4, dt**3 / 2], [dt**3 / 2, dt**2]])
        # Every element shares the same covariance (same model, same noise), so one 2x2 suffices.
        covariance = transition @ self._covariance @ transition.T + noise
        position = self._position + dt * self._velocity
        innovation_var = covariance[0, 0] + self.params.measurement_noise**2
        gain = covariance[:, 0] / innovation_var
        innovation = current - position
        self._position = position + gain[0] * innovation
        self._velocity = self._velocity + gain[1] * innovation
        self._covariance = (np.eye(2) - np.outer(gain, [1.0, 0.0])) @ covariance
        return self._position.copy()
