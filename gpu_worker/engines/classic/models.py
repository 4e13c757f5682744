"""Locating and loading the dlib models, once per process.

The models come from two PyPI packages: `dlib-bin` (the library, with its built-in HOG frontal face
detector) and `face-recognition-models` (the `.dat` files). That package's `__init__` imports
`pkg_resources`, which current setuptools no longer ships, so the files are found through the
package's import spec without importing it.

Licence: the 68-point landmark model (`shape_predictor_68_face_landmarks.dat`) was trained on the
iBUG 300-W data set, whose licence excludes commercial use; the dataset's creators asked that the
trained model not be used in commercial products. It is therefore for NON-COMMERCIAL USE ONLY:
rendering commercially with the classic engine needs a 68-point model trained on commercially usable
data (same file format, swap the file). dlib's author released his other model files, the ResNet
face descriptor (`dlib_face_recognition_resnet_model_v1.dat`) among them, into the public domain.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_worker.engines.base import EngineUnavailable

LOG = logging.getLogger(__name__)

LANDMARKS_68 = "shape_predictor_68_face_landmarks.dat"
DESCRIPTOR_RESNET = "dlib_face_recognition_resnet_model_v1.dat"


@dataclass(frozen=True)
class ModelPaths:
    landmarks_68: Path
    descriptor: Path


@dataclass(frozen=True)
class DlibModels:
    """The loaded models. dlib objects are untyped (no stubs), hence `Any`."""

    detector: Any
    predictor: Any
    encoder: Any
    load_seconds: float


def models_dir() -> Path:
    """Where face-recognition-models keeps its `.dat` files, found without importing the package."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise EngineUnavailable(
            "the classic engine needs the face-recognition-models package (pip install face-recognition-models)"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "models"
        if candidate.is_dir():
            return candidate
    raise EngineUnavailable("face-recognition-models is installed but has no models/ folder")


def locate_models() -> ModelPaths:
    folder = models_dir()
    paths = ModelPaths(landmarks_68=folder / LANDMARKS_68, descriptor=folder / DESCRIPTOR_RESNET)
    for path in (paths.landmarks_68, paths.descriptor):
        if not path.is_file():
            raise EngineUnavailable(f"dlib model file {path.name} is missing from {folder}")
    return paths


def dlib_module() -> Any:
    """dlib, imported on first use so that a worker without it gets EngineUnavailable, not a crash."""
    try:
        import dlib
    except ImportError as error:
        raise EngineUnavailable("the classic engine needs dlib (pip install dlib-bin)") from error
    return dlib


_LOCK = threading.Lock()
_CACHE: dict[str, DlibModels] = {}


def release_models() -> None:
    """Forget the loaded models (the next `load_models()` loads them again)."""
    with _LOCK:
        _CACHE.clear()


def load_models() -> DlibModels:
    """Load the detector, the 68-point predictor and the descriptor network (cached per process)."""
    with _LOCK:
        cached = _CACHE.get("dlib")
        if cached is not None:
            return cached
        dlib = dlib_module()
        paths = locate_models()
        started = time.perf_counter()
        models = DlibModels(
            detector=dlib.get_frontal_face_detector(),
            predictor=dlib.shape_predictor(str(paths.landmarks_68)),
            encoder=dlib.face_recognition_model_v1(str(paths.descriptor)),
            load_seconds=time.perf_counter() - started,
        )
        LOG.info("loaded dlib models from %s in %.2f s", paths.landmarks_68.parent, models.load_seconds)
        _CACHE["dlib"] = models
        return models
