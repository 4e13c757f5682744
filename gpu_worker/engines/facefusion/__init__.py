"""The production engine: FaceFusion 3.8.1, warm in one process per engine (or one run per segment)."""

from __future__ import annotations

from collections.abc import Mapping

from gpu_worker.engines.base import Engine
from gpu_worker.engines.facefusion.engine import FaceFusionEngine
from gpu_worker.engines.facefusion.settings import engine_mode
from gpu_worker.engines.facefusion.warm import WarmFaceFusionEngine

__all__ = ["FaceFusionEngine", "WarmFaceFusionEngine", "create_facefusion_engine"]


def create_facefusion_engine(env: Mapping[str, str]) -> Engine:
    """The engine FUSIONFLEET_FACEFUSION_MODE names: warm (the default) or per-segment."""
    if engine_mode(env) == "per-segment":
        return FaceFusionEngine(env=env)
    return WarmFaceFusionEngine(env=env)
