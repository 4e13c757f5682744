"""Steering a batch as a whole: cancel it, retry its unsuccessful items. One item is steered as any job
(`fusionfleet.services.operations`): its cancel leaves the batch running, its retry reopens the batch.

A cancel marks the batch (no item starts after it), cancels each running item quietly, and sends the
batch's one summary itself, CANCELLED, listing what had succeeded. A retry clears that and the claims of
the items that did not succeed, and lists the batch for the watchdog's next tick: the slicer then runs
them again a window at a time (an item that ran starts its next run, rendering only its missing
segments; one that never started is prepared as new).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from fusionfleet import batch_layout, layout
from fusionfleet.adapters.storage import put_json
from fusionfleet.errors import OperationRefused
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.final_notice import CANCEL, TopicChannel
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.states import Action, JobState, allowed, refusal
from fusionfleet.services.batch_summary import finish_batch
from fusionfleet.services.job_retry import reopen_batch
from fusionfleet.services.operations import Operations

logger = logging.getLogger(__name__)


@dataclass
class BatchOperations:
    ops: Operations

    @property
    def reader(self) -> BatchReader:
        ops = self.ops
        work, machine = ops.resources.work_bucket, ops.resources.state_machine_arn
        return BatchReader(JobReader(ops.storage, ops.orchestrator, work, machine))

    def cancel(self, batch_id: str) -> str:
        """Stop a batch: no item starts again; its running items end CANCELLED; one summary says so."""
        reader = self.reader
        detail = reader.detail(batch_id, segments=False)
        state = detail.batch.state
        if state.ended:
            raise OperationRefused(f"batch {batch_id} is {state}: {refusal(state, Action.CANCEL)}")
        ops = self.ops
        now = datetime.fromtimestamp(ops.clock(), UTC)
        bucket = ops.resources.work_bucket
        put_json(ops.storage, bucket, layout.cancel_key(batch_id), {"cancelled_at": now.isoformat()})
        stopped = 0
        for item in detail.items:
            if item.state in (JobState.RUNNING, JobState.WAITING):  # one waiting leaves its tenant's line
                try:
                    ops.cancel(item.job_id)
                    stopped += 1
                except OperationRefused as refused:
                    logger.info("batch %s: item %s not cancelled: %s", batch_id, item.index, refused.reason)
        channels = (TopicChannel(ops.notifier, ops.resources.topic_arn),)
        sent = finish_batch(reader, ops.storage, bucket, channels, batch_id, CANCEL, now)
        waiting = sum(1 for item in detail.items if item.job is None)
        done = detail.batch.items.done
        told = "its summary was sent" if sent else "its summary follows once its items have stopped"
        return (
            f"batch {batch_id} cancelled: {stopped} running items cancelled, {waiting} not started will not start, "
            f"{done} had succeeded; {told}"
        )

    def retry(self, batch_id: str) -> str:
        """Run a batch's unsuccessful items again (and those a cancel kept from starting), a window at a time."""
        reader = self.reader
        detail = reader.detail(batch_id, segments=False)
        state = detail.batch.state
        if not allowed(state, Action.RETRY):
            raise OperationRefused(f"batch {batch_id} is {state}: {refusal(state, Action.RETRY)}")
        ops = self.ops
        bucket = ops.resources.work_bucket
        again = [
            item for item in detail.items
            if item.job is None or (item.state.unsuccessful and item.state is not JobState.REJECTED)
        ]  # fmt: skip
        rejected = sum(1 for item in detail.items if item.state is JobState.REJECTED)
        if not again:
            raise OperationRefused(
                f"batch {batch_id}: no item can run again ({rejected} rejected: fix their media and submit them anew)"
            )
        ops.storage.delete_prefix(bucket, layout.cancel_key(batch_id))
        for item in again:
            ops.storage.delete_prefix(bucket, batch_layout.batch_item_claim_key(batch_id, item.index))
        reopen_batch(ops.storage, bucket, batch_id)
        also = f"; {rejected} rejected items stay rejected" if rejected else ""
        return (
            f"batch {batch_id} retried: {len(again)} items will run again, a window at a time, from the watchdog's "
            f"next tick{also}"
        )
