"""A batch's one summary notice: sent, through the final-notice protocol, by whoever sees its last item end.

The slicer (an item's end, a tick) and a batch's cancel can both end a batch: each claims the batch's
notice record (`work/<batch>/notice.json`, fusionfleet.jobs.final_notice) before sending, so the summary
goes out once. It lists every item's result; past SNS's message size only the unsuccessful ones.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from fusionfleet import batch_layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.batch_views import BatchDetail
from fusionfleet.jobs.batches import BatchRecord
from fusionfleet.jobs.final_notice import FinalNotices, NoticeChannel
from fusionfleet.jobs.states import JobState, NoticeStatus, notice_status

logger = logging.getLogger(__name__)

STALE_CLAIM_S = 300.0  # a claim nobody finished after this long was left by a process that died
MAX_NOTICE_BYTES = 200_000  # SNS takes 256 KiB: a summary past this lists only the items that did not succeed


def finish_batch(
    reader: BatchReader, storage: Storage, bucket: str, channels: tuple[NoticeChannel, ...], batch_id: str, by: str,
    now: datetime,
) -> str:  # fmt: skip
    """Send the batch's summary once every item has ended; its status, or "" when it is not time (or not ours)."""
    detail = reader.ended(batch_id)
    if detail is None:
        return ""
    notice = summary_notice(detail, reader.record(batch_id))
    notices = FinalNotices(storage, bucket, channels)
    if not notices.claim(batch_id, by, now, notice["status"], notice.get("error", ""), notice.get("reason", "")):
        held = notices.record(batch_id)
        if held is not None and held.published:
            storage.delete_prefix(bucket, batch_layout.open_batch_key(batch_id))  # sent: no more ticks
            return ""
        if held is None or held.age_s(now) < STALE_CLAIM_S:
            return ""  # being sent by the party that claimed it
    notices.deliver(batch_id, notice, by, now)
    storage.delete_prefix(bucket, batch_layout.open_batch_key(batch_id))
    logger.info("batch %s ended %s: summary sent by the %s", batch_id, notice["status"], by)
    return str(notice["status"])


def summary_notice(detail: BatchDetail, record: BatchRecord) -> dict[str, Any]:
    """The batch's one notice: its state and every item's result (the unsuccessful ones alone, past SNS's size)."""
    batch = detail.batch
    status = notice_status(batch.state)
    results = [
        {
            "index": item.index,
            "job_id": item.job_id,
            "target": item.target,
            "state": item.state.value if item.job is not None else "NOT_STARTED",
            **({"output": item.job.output} if item.job is not None and item.job.output else {}),
            **({"reason": item.job.reason[:500]} if item.job is not None and item.job.reason else {}),
        }
        for item in detail.items
    ]
    notice: dict[str, Any] = {
        "status": status,
        "stage": "batch",
        "job_id": batch.job_id,
        "batch_id": batch.job_id,
        "tenant": notice_tenant(record.tenant),
        "manifest": record.manifest.model_dump(),
        "output_prefix": batch.output,
        "items": {
            "total": batch.items.total,
            NoticeStatus.SUCCEEDED: batch.items.done,
            "unsuccessful": batch.items.failed,
        },
        "results": results,
    }
    if status is not NoticeStatus.SUCCEEDED:
        notice["error"] = "BatchCancelled" if status is NoticeStatus.CANCELLED else "BatchItemsFailed"
        notice["reason"] = batch.reason
    if len(json.dumps(notice)) > MAX_NOTICE_BYTES:
        notice["results"] = [result for result in results if result["state"] != JobState.SUCCEEDED.value]
        notice["results_note"] = "only the items that did not succeed are listed; `fusionfleet status` lists all"
    return notice
