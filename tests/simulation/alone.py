"""The simulated farm driven one party at a time, for unit tests that step through a story rather than a schedule:
each call runs to its end with nobody else moving."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from fusionfleet.adapters.orchestrator import execution_arn
from tests.simulation.farm import MACHINE, TENANT, Farm, Submitted


def run(farm: Farm, work: Callable[[], object]) -> object:
    """One party run to its end, nobody else moving; what it returned (its error raised)."""
    actor = farm.scheduler.spawn("party", TENANT, farm.clock(), work)
    farm.scheduler.finish(actor)
    if actor.error is not None:
        raise actor.error
    return actor.result


def submit(farm: Farm, batch: bool = False) -> Submitted:
    """A manifest (or a batch's) put under the tenant's prefix and sliced."""
    submitted = farm.put_manifest(batch, TENANT)
    run(farm, partial(farm.slice, submitted.key))
    return submitted


def end(farm: Farm, name: str, status: str = "SUCCEEDED") -> None:
    """The execution `name` ends with `status`."""
    farm.orchestrator.end(execution_arn(MACHINE, name), status)
