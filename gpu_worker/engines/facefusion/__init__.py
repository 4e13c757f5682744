"""The production engine: FaceFusion 3.8.1 run as a subprocess, one `headless-run` per segment."""

from __future__ import annotations

from gpu_worker.engines.facefusion.engine import FaceFusionEngine

__all__ = ["FaceFusionEngine"]
