"""The work bucket's batch records, every key format both ways (as fusionfleet/layout.py for jobs): a
batch's record and its items' start claims, and the index of batches not yet ended (the watchdog ticks them)."""

from __future__ import annotations

from fusionfleet.key_format import KeyFormat
from fusionfleet.layout import WORK_PREFIX, work_prefix

OPEN_BATCHES_PREFIX = f"{WORK_PREFIX}_batches/"  # one record per batch not yet ended: the watchdog's to tick
OPEN_BATCH_FILE = KeyFormat(OPEN_BATCHES_PREFIX + "{batch}.json")
ITEM_CLAIM_FILE = KeyFormat(WORK_PREFIX + "{batch}/items/{index:04d}.json")


def batch_key(batch_id: str) -> str:
    """A batch's record: its targets, their outputs, what its items share (fusionfleet.jobs.batches)."""
    return f"{work_prefix(batch_id)}batch.json"


def batch_items_prefix(batch_id: str) -> str:
    return f"{work_prefix(batch_id)}items/"


def batch_item_claim_key(batch_id: str, index: int) -> str:
    """Created once (conditional PUT) by whoever starts item `index` of a batch."""
    return ITEM_CLAIM_FILE.key(batch=batch_id, index=index)


def open_batch_key(batch_id: str) -> str:
    return OPEN_BATCH_FILE.key(batch=batch_id)


def parse_open_batch_key(key: str) -> str | None:
    """The batch id of `open_batch_key`."""
    found = OPEN_BATCH_FILE.parse(key)
    return str(found["batch"]) if found else None


def parse_batch_item_claim_key(key: str) -> tuple[str, int] | None:
    """(batch id, index) of `batch_item_claim_key`."""
    found = ITEM_CLAIM_FILE.parse(key)
    return (str(found["batch"]), int(found["index"])) if found else None
