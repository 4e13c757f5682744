"""Jobs that wait for their tenant's turn instead of being refused.

A job of a tenant with a job limit or a budget is prepared by the slicer like any other (probed,
planned, its record written) and then queued: a record beside the job (`work/<job>/waiting.json`)
holds the exact StartExecution it will make, and an index entry under the tenant
(`work/_waiting/<T>/<order>-<job>.json`) keeps the tenant's waiting jobs in submission order
with one LIST. The admitter (fusionfleet.services.admission) starts them in that order as slots free.
A job whose tenant's budget ran out while it ran waits the same way, to be resumed as its next run.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict

from fusionfleet import layout, tenant_layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import ObjectMissing

logger = logging.getLogger(__name__)


class WaitingRecord(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: str
    tenant: str
    order: int  # submission order (`submission_order`)
    submitted_at: float = 0.0  # epoch seconds, when the slicer queued it
    run: int = 0
    execution_name: str
    execution_input: dict[str, Any]  # what StartExecution gets, built once by the slicer
    waiting_since: str
    reason: str = ""  # why it waits, as the admitter last said
    # A job held when its tenant's budget ran out: it resumes as its next run, rendering only the
    # segments without a valid output (fusionfleet.jobs.runs), and its execution_input is its first run's.
    resume: bool = False


def submission_order(uploaded_s: float, queued_s: float) -> int:
    """The upload's second first (S3 keeps LastModified to the second), then when the slicer queued it
    (to the millisecond): two manifests of one second keep the order in which they were handled. Pure."""
    return int(uploaded_s) * 10**13 + round(queued_s * 1000)


def enqueue(storage: Storage, bucket: str, record: WaitingRecord) -> None:
    """The job record first, the index entry second: an index entry always has its record."""
    storage.put_bytes(bucket, layout.waiting_key(record.job_id), record.model_dump_json().encode(), "application/json")
    index = tenant_layout.waiting_index_key(record.tenant, record.order, record.job_id)
    storage.put_bytes(bucket, index, b"{}", "application/json")


def read_waiting(storage: Storage, bucket: str, job_id: str) -> WaitingRecord | None:
    try:
        return WaitingRecord.model_validate_json(storage.get_bytes(bucket, layout.waiting_key(job_id)))
    except ObjectMissing:
        return None


def is_waiting(storage: Storage, bucket: str, job_id: str) -> bool:
    try:
        storage.head(bucket, layout.waiting_key(job_id))
    except ObjectMissing:
        return False
    return True


def waiting_in_order(storage: Storage, bucket: str, tenant: str) -> list[tuple[int, str, str]]:
    """(order, job id, index key) of the tenant's waiting jobs, first submitted first."""
    found = []
    for key in storage.list_keys(bucket, tenant_layout.waiting_prefix(tenant)):
        parsed = tenant_layout.parse_waiting_index_key(key)
        if parsed is not None:
            found.append((parsed[1], parsed[2], key))
    return sorted(found)


def tenants_waiting(storage: Storage, bucket: str) -> list[str]:
    """Tenants with at least one waiting job (one LIST of the waiting index)."""
    tenants = set()
    for key in storage.list_keys(bucket, tenant_layout.WAITING_PREFIX):
        parsed = tenant_layout.parse_waiting_index_key(key)
        if parsed is not None:
            tenants.add(parsed[0])
    return sorted(tenants)


def dequeue(storage: Storage, bucket: str, record: WaitingRecord) -> None:
    """It started (or is gone): the record first, then its index entry (one without a record is skipped)."""
    storage.delete_prefix(bucket, layout.waiting_key(record.job_id))
    storage.delete_prefix(bucket, tenant_layout.waiting_index_key(record.tenant, record.order, record.job_id))


def note_reason(storage: Storage, bucket: str, record: WaitingRecord, reason: str) -> WaitingRecord:
    """Say why it still waits (status, list and the API show it); written only when it changed."""
    if record.reason == reason:
        return record
    updated = record.model_copy(update={"reason": reason})
    storage.put_bytes(bucket, layout.waiting_key(record.job_id), updated.model_dump_json().encode(), "application/json")
    return updated
