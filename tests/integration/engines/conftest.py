"""Fixtures for the classic engine's tests: the dlib models and sample faces, loaded once."""

from __future__ import annotations

import numpy as np
import pytest

from fleetctl import samples
from gpu_worker.engines.base import Image
from gpu_worker.engines.classic.engine import ClassicEngine
from gpu_worker.engines.classic.models import DlibModels, load_models


@pytest.fixture(scope="session")
def models() -> DlibModels:
    return load_models()


@pytest.fixture(scope="session")
def engine(models: DlibModels) -> ClassicEngine:
    engine = ClassicEngine()
    engine.prepare()
    return engine


@pytest.fixture(scope="session")
def grace() -> Image:
    return samples.grace_hopper()


@pytest.fixture(scope="session")
def astronaut_clip() -> list[Image]:
    """12 frames of the moving astronaut shot at 640x360."""
    return list(samples.astronaut_frames(12))


@pytest.fixture(scope="session")
def suit_only() -> Image:
    """The astronaut photo's lower part: her suit patch fools dlib's HOG detector, no real face."""
    photo = samples.astronaut()
    return np.ascontiguousarray(photo[300:, :, :])
