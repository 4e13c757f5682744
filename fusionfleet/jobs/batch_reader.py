"""Reading a batch for people and for the parties that end it: its record, and each item's job view."""

from __future__ import annotations

from fusionfleet import batch_layout
from fusionfleet.errors import JobNotFound
from fusionfleet.jobs.batch_views import BatchDetail, ItemView, batch_view
from fusionfleet.jobs.batches import BatchRecord
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.runs import is_cancelled
from fusionfleet.jobs.states import JobState


class BatchReader:
    def __init__(self, reader: JobReader) -> None:
        self.reader = reader

    def record(self, batch_id: str) -> BatchRecord:
        record = self.reader.batch_record(batch_id)
        if record is None:
            raise JobNotFound(f"no batch {batch_id!r} (no batch record in the work bucket)")
        return record

    def claimed(self, batch_id: str) -> set[int]:
        """The items somebody started (or is starting): one LIST of the batch's claims."""
        records = self.reader.records
        found = set()
        for key in records.storage.list_keys(records.bucket, batch_layout.batch_items_prefix(batch_id)):
            parsed = batch_layout.parse_batch_item_claim_key(key)
            if parsed is not None:
                found.add(parsed[1])
        return found

    def detail(self, batch_id: str, segments: bool = True, page: range | None = None) -> BatchDetail:
        """The batch's view and each item's; `segments=False` reads only each item's state (no segment listing),
        `page` lists the segments of those items only (the others' states are read: the batch's counts)."""
        record = self.record(batch_id)
        claimed = self.claimed(batch_id)
        items = []
        for target in record.targets:
            job_id = record.item_id(target.index)
            job = None
            if target.index in claimed:
                facts = self.reader.records.facts(job_id, known=False)
                started = facts.context is not None or facts.rejection is not None or facts.execution is not None
                listed = segments and (page is None or target.index in page)
                job = self.reader.view_of(facts, listed) if started else None
            items.append(ItemView(target.index, job_id, target.key, job))
        cancelled = is_cancelled(self.reader.records.storage, self.reader.records.bucket, batch_id)
        return BatchDetail(batch_view(record, items, cancelled), items)

    def ended(self, batch_id: str) -> BatchDetail | None:
        """The batch's detail once every item has ended (or will never start: a cancelled batch), else None."""
        detail = self.detail(batch_id, segments=False)
        return detail if detail.batch.state not in (JobState.PENDING, JobState.RUNNING) else None
