"""Engines loaded once per worker process and reused across segments (no model reload per segment)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from gpu_worker.engines.base import Engine
from gpu_worker.engines.registry import create_engine

logger = logging.getLogger(__name__)


class EnginePool:
    def __init__(self, env: Mapping[str, str]) -> None:
        self._engines: dict[str, Engine] = {}
        self._env = env

    def get(self, name: str) -> Engine:
        engine = self._engines.get(name)
        if engine is None:
            started = time.monotonic()
            engine = create_engine(name, self._env)
            engine.prepare()
            logger.info("engine %s loaded in %.2f s", name, time.monotonic() - started)
            self._engines[name] = engine
        return engine

    def close(self) -> None:
        for name, engine in self._engines.items():
            try:
                engine.close()
            except Exception:
                logger.exception("closing engine %s failed", name)
        self._engines.clear()
