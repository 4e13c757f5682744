"""The work bucket's batch records, every key format both ways (as fusionfleet/layout.py for jobs): a
batch's record and its items' start claims, and the index of batches not yet ended (the watchdog ticks them)."""

from __future__ import annotations

from fusionfleet.layout import WORK_PREFIX, _name_under, job_of_work_key, work_prefix

OPEN_BATCHES_PREFIX = f"{WORK_PREFIX}_batches/"  # one record per batch not yet ended: the watchdog's to tick


def batch_key(batch_id: str) -> str:
    """A batch's record: its targets, their outputs, what its items share (fusionfleet.jobs.batches)."""
    return f"{work_prefix(batch_id)}batch.json"


def batch_items_prefix(batch_id: str) -> str:
    return f"{work_prefix(batch_id)}items/"


def batch_item_claim_key(batch_id: str, index: int) -> str:
    """Created once (conditional PUT) by whoever starts item `index` of a batch."""
    return f"{batch_items_prefix(batch_id)}{index:04d}.json"


def open_batch_key(batch_id: str) -> str:
    return f"{OPEN_BATCHES_PREFIX}{batch_id}.json"


def parse_open_batch_key(key: str) -> str | None:
    """The batch id of `open_batch_key`."""
    return _name_under(key, OPEN_BATCHES_PREFIX, ".json")


def parse_batch_item_claim_key(key: str) -> tuple[str, int] | None:
    """(batch id, index) of `batch_item_claim_key`."""
    batch = job_of_work_key(key)
    name = _name_under(key, batch_items_prefix(batch), ".json") if batch else None
    return (batch, int(name)) if batch and name is not None and name.isdigit() else None
