"""The winner rule for a segment rendered by two copies (a straggler and its backup).

Each copy uploads to its own key (`layout.copy_segment_key`); the first to create the segment's
winner record (a conditional PUT, If-None-Match) has committed, and only the winner's record becomes
the segment record the merge reads, naming the one output it concatenates. A copy that finds a
winner already there drops its own output. Every later SendTaskSuccess for the segment, from either
copy, carries the winner's result, so whichever reaches Step Functions first says the same thing.
"""

from __future__ import annotations

import logging

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage, get_json, put_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.jobs import summary
from fusionfleet.messages import SegmentRecord, SegmentResult

logger = logging.getLogger(__name__)


def winner(storage: Storage, bucket: str, job_id: str, index: int, run: int) -> SegmentRecord | None:
    """The committed record of the segment in this run, or None while no copy has finished."""
    try:
        return SegmentRecord.model_validate(get_json(storage, bucket, layout.segment_winner_key(job_id, index, run)))
    except ObjectMissing:
        return None


def commit(storage: Storage, bucket: str, run: int, record: SegmentRecord) -> SegmentRecord:
    """Commit `record` if no copy did first; returns the winning record (which is `record` when it won).

    The segment record is (re)written from the winner either way, so a winner that died between its
    commit and its segment record is completed by whichever delivery comes next.
    """
    key = layout.segment_winner_key(record.job_id, record.index, run)
    won = storage.create(bucket, key, record.model_dump_json().encode())
    committed = record if won else winner(storage, bucket, record.job_id, record.index, run)
    if committed is None:
        # Created by another copy and gone again (the job's work files deleted): keep ours.
        committed = record
    put_json(storage, bucket, layout.segment_record_key(record.job_id, record.index), committed.model_dump())
    change = summary.segment_done(committed.index, committed.worker, committed.attempt, committed.engine_s)
    summary.try_update(storage, bucket, record.job_id, change)
    return committed


def result_of(record: SegmentRecord) -> SegmentResult:
    return SegmentResult(
        index=record.index,
        key=record.key,
        frames=record.frames,
        engine_s=record.engine_s,
        copy_number=record.copy_number,
    )


def drop_output(
    storage: Storage, bucket: str, job_id: str, index: int, copy: int, committed: SegmentRecord, delivery: int = 0
) -> None:
    """The losing copy's (or delivery's) own upload, if it made one: never what the merge reads (best effort)."""
    suffix = committed.key.rsplit(".", 1)[-1] if committed.key else "mp4"
    key = layout.copy_segment_key(job_id, index, copy, suffix, delivery)
    if key == committed.key:
        return
    try:
        storage.delete_prefix(bucket, key)
    except Exception:
        logger.warning("segment %s of %s: the losing copy's output %s stays", index, job_id, key, exc_info=True)
