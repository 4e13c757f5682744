"""Locating the dlib models without importing face_recognition_models, and loading them once."""

from __future__ import annotations

import sys

from gpu_worker.engines.classic.models import load_models, locate_models


def test_models_are_found_without_importing_the_package() -> None:
    # GIVEN face-recognition-models installed (its __init__ needs the removed pkg_resources)
    # WHEN the model files are located
    paths = locate_models()

    # THEN both files exist and the package itself was never imported
    assert paths.landmarks_68.is_file() and paths.landmarks_68.stat().st_size > 50_000_000
    assert paths.descriptor.is_file()
    assert "face_recognition_models" not in sys.modules


def test_models_load_once_per_process() -> None:
    # GIVEN models loaded by a prepare() (loaded here: the session's `models` fixture may have been loaded
    # before another test's engine closed and released them, which the suite run side by side showed)
    models = load_models()
    # WHEN they are asked for again (another segment, another engine instance)
    again = load_models()

    # THEN the very same objects come back: no reload
    assert again is models
    assert again.predictor is models.predictor
