"""Engines by name. Each factory imports its engine lazily so a worker only loads what it runs."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping

from gpu_worker.engines.base import Engine, EngineUnavailable


def _copy(env: Mapping[str, str]) -> Engine:
    from gpu_worker.engines.copy import CopyEngine

    return CopyEngine()


def _classic(env: Mapping[str, str]) -> Engine:
    from gpu_worker.engines.classic.engine import ClassicEngine

    return ClassicEngine()


def _facefusion(env: Mapping[str, str]) -> Engine:
    from gpu_worker.engines.facefusion import create_facefusion_engine

    return create_facefusion_engine(env)


# Each factory gets the worker's environment as resolved at its entry point (engines read no os.environ).
FACTORIES: dict[str, Callable[[Mapping[str, str]], Engine]] = {
    "copy": _copy,
    "classic": _classic,
    "facefusion": _facefusion,
}


def engine_names() -> tuple[str, ...]:
    return tuple(sorted(FACTORIES))


def create_engine(name: str, env: Mapping[str, str]) -> Engine:
    """Build (not yet prepare) the engine called `name`, checking it follows the protocol."""
    try:
        factory = FACTORIES[name]
    except KeyError:
        raise EngineUnavailable(f"unknown engine {name!r}; this worker has {', '.join(engine_names())}") from None
    engine = factory(env)
    if not isinstance(engine, Engine):
        raise TypeError(f"engine {name!r} does not implement the Engine protocol")
    return engine


def facefusion_installed() -> bool:
    return importlib.util.find_spec("facefusion") is not None


def default_engine_name() -> str:
    """FaceFusion where it is installed (the GPU image), the built-in engine elsewhere."""
    if facefusion_installed() and "facefusion" in FACTORIES:
        return "facefusion"
    return "classic" if "classic" in FACTORIES else "copy"
