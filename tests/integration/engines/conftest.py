"""Fixtures for the engines' tests: the classic engine's dlib models and sample faces, loaded once; the
FaceFusion harness's folder and a warm FaceFusion engine on it, once per test module."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from fleetctl import samples
from gpu_worker.engines.base import Image
from gpu_worker.engines.classic.engine import ClassicEngine
from gpu_worker.engines.classic.models import DlibModels, load_models
from gpu_worker.engines.facefusion import WarmFaceFusionEngine
from gpu_worker.engines.facefusion.settings import EngineSettings
from tests.support import facefusion_harness as harness


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


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> harness.Harness:
    """The harness's FaceFusion folder; skipped (failed in CI) where it cannot run."""
    return harness.prepare(tmp_path_factory.mktemp("facefusion-harness"))


@pytest.fixture(scope="module")
def warm(home: harness.Harness) -> Iterator[WarmFaceFusionEngine]:
    """The warm FaceFusion engine on the harness's folder, on the CPU, prepared once for the module."""
    engine = WarmFaceFusionEngine(EngineSettings(home=home.home, python=home.python), harness.CPU_FACTS, env=home.env)
    engine.prepare()
    yield engine
    engine.close()
