"""Which engines the local stack's render workers run, so `submit` refuses a job none of them can render.

On AWS every GPU worker runs every engine (the image carries FaceFusion); locally the workers are this
checkout's Python, which runs the built-in engines and FaceFusion only where it is given one. A job
for an engine no worker runs would be accepted and then fail on the worker: it is refused at submit,
with the reason, before anything is uploaded.
"""

from __future__ import annotations

from collections.abc import Mapping

from fusionfleet.environment.settings import FUSIONFLEET_FACEFUSION_HOME
from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.catalogue import FACEFUSION_VERSION

BUILT_IN = ("classic", "copy")
FACEFUSION = "facefusion"


def worker_engines(env: Mapping[str, str], facefusion_importable: bool) -> tuple[str, ...]:
    """The engines workers started with `env` run: the built-in ones, and FaceFusion where they find it
    (its folder named, or its package importable by their interpreter, as the worker itself looks)."""
    found = set(BUILT_IN)
    if env.get(FUSIONFLEET_FACEFUSION_HOME, "").strip() or facefusion_importable:
        found.add(FACEFUSION)
    return tuple(sorted(found))


def check_engine(asked: str | None, default: str | None, engines: tuple[str, ...]) -> None:
    """Raises JobRejected when no worker runs the engine the job asks for (or the stack's default);
    nothing is known of a stack whose state file predates the record (`engines` empty)."""
    engine = asked or default
    if not engines or engine is None or engine in engines:
        return
    which = f"engine {engine!r}" + ("" if asked else " (the local stack's default)")
    hint = (
        f"; start the stack with {FUSIONFLEET_FACEFUSION_HOME} naming a FaceFusion {FACEFUSION_VERSION} folder"
        " to run it"
        if engine == FACEFUSION
        else ""
    )
    raise JobRejected(f"{which}: no worker of the local stack runs it (they run {', '.join(engines)}){hint}")
