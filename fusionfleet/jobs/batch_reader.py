"""Reading a batch for people and for the parties that end it: its record, and each item's job view.

A batch the slicer has not opened yet (no record) is PENDING while its manifest is accepted
(fusionfleet.jobs.acceptance), REJECTED once the slicer refused it, and unknown otherwise.
"""

from __future__ import annotations

from dataclasses import replace

from fusionfleet import batch_layout
from fusionfleet.errors import JobNotFound
from fusionfleet.jobs.acceptance import read_acceptance
from fusionfleet.jobs.batch_views import BatchDetail, ItemView, batch_view, pending_batch
from fusionfleet.jobs.batches import BatchRecord
from fusionfleet.jobs.ids import batch_of_item
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.runs import is_cancelled
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.views import JobView, pending_view


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
        record = self.reader.batch_record(batch_id)
        if record is None:
            return self._unopened(batch_id)
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

    def _unopened(self, batch_id: str) -> BatchDetail:
        """A batch without a record: what its acceptance or its rejection says (JobNotFound: neither)."""
        facts = self.reader.records.facts(batch_id)
        if facts.state is JobState.REJECTED:
            return BatchDetail(replace(self.reader.view_of(facts, segments=False), kind="batch"), [])
        if facts.accepted is None or not facts.accepted.batch:
            raise JobNotFound(f"no batch {batch_id!r} (no batch record in the work bucket)")
        return pending_batch(facts.accepted)

    def is_batch(self, job_id: str) -> bool:
        """Whether `job_id` is a batch's: opened by the slicer, or its manifest accepted (not yet opened)."""
        if self.reader.batch_record(job_id) is not None:
            return True
        accepted = read_acceptance(self.reader.records.storage, self.reader.records.bucket, job_id)
        return accepted is not None and accepted.batch

    def unstarted_item(self, job_id: str) -> JobView:
        """An item of a known batch that has not started (not yet claimed, or its batch not yet opened):
        PENDING with its target. JobNotFound for any other id."""
        item = batch_of_item(job_id)
        target, priority = self._item_target(*item) if item is not None else (None, "")
        if target is None:
            raise JobNotFound(f"no job {job_id!r} (no record, and no batch that has it for an item)")
        return replace(pending_view(job_id, priority=priority), targets=(target,))

    def _item_target(self, batch_id: str, index: int) -> tuple[str | None, str]:
        """Item `index`'s target and its batch's priority, from the batch's record or its acceptance."""
        record = self.reader.batch_record(batch_id)
        if record is not None:
            return next((t.key for t in record.targets if t.index == index), None), record.priority
        accepted = read_acceptance(self.reader.records.storage, self.reader.records.bucket, batch_id)
        if accepted is None or not accepted.items_known or index >= len(accepted.targets):
            return None, ""
        return accepted.targets[index], accepted.priority

    def ended(self, batch_id: str) -> BatchDetail | None:
        """The batch's detail once every item has ended (or will never start: a cancelled batch), else None."""
        detail = self.detail(batch_id, segments=False)
        return detail if detail.batch.state not in (JobState.PENDING, JobState.RUNNING) else None
