"""The watchdog's part in batches: a tick, on the slicer's queue, for every batch not yet ended.

A batch moves on when one of its items tells it it ended (the state machine's TellBatch). A tell can be
lost, and some items end without the state machine reaching it (a cancel, the watchdog closing one), and
a batch can wait for room a job of its tenant or the stack held: the tick makes the slicer look again,
once a sweep (a minute on AWS, 10 s locally). The watchdog prepares nothing itself (it ships no media
library): starting items is the slicer's.
"""

from __future__ import annotations

from fusionfleet.adapters.queues import WorkQueue
from fusionfleet.adapters.storage import Storage
from fusionfleet.jobs.batches import open_batches
from fusionfleet.messages import BatchEvent


def tick_open_batches(storage: Storage, work_bucket: str, queue: WorkQueue, ingest_queue_url: str) -> list[str]:
    """Send each open batch's tick; the batches ticked."""
    ticked = []
    for batch_id in open_batches(storage, work_bucket):
        queue.send(ingest_queue_url, BatchEvent(batch_id=batch_id, event="tick").wire())
        ticked.append(batch_id)
    return ticked
