"""The engine, quality and priority names are defined once, in fusionfleet.jobs.manifest; the workers agree."""

from __future__ import annotations

from fleetctl.stack import PRIORITY_ORDER
from fusionfleet.jobs.manifest import ENGINE_NAMES, PRIORITIES, QUALITIES
from gpu_worker.engines.base import QUALITY_PRESETS
from gpu_worker.engines.registry import engine_names


def test_every_engine_a_manifest_may_name_is_registered_on_the_workers() -> None:
    assert sorted(ENGINE_NAMES) == sorted(engine_names())


def test_the_qualities_are_the_built_in_engines_presets() -> None:
    assert tuple(QUALITY_PRESETS) == QUALITIES


def test_workers_ask_the_render_queues_in_priority_order() -> None:
    assert PRIORITY_ORDER == PRIORITIES == ("high", "normal", "low")
