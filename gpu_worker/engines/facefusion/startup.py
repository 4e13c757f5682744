"""The FaceFusion worker's check at start: a GPU it is configured for must really run models.

The engine's own `prepare()` proves the provider too, but in the engine process, where a failure
would only fail segments one by one; a worker that preloads FaceFusion runs this in its main
process first and does not start at all when it fails (the task stops with the reason).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpu_worker.engines.facefusion.execution import PROVIDER_NAMES, choose_provider
from gpu_worker.engines.facefusion.host_facts import prove_provider
from gpu_worker.engines.facefusion.process import probe_providers
from gpu_worker.engines.facefusion.settings import resolve_home, settings_from_env


def check_accelerator(env: Mapping[str, str]) -> str:
    """The provider FaceFusion will use, proven; EngineUnavailable with the reason otherwise."""
    settings = settings_from_env(env)
    home = resolve_home(settings)
    provider = PROVIDER_NAMES[choose_provider(probe_providers(settings.python, home, env))]
    prove_provider(settings, home, env, provider)
    return provider
