"""A job's attempt records (`work/<job>/segments/<index>.attempts/…`), read back in order."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import ObjectMissing
from fusionfleet.messages import SegmentAttempt

# Records read at once: botocore's default connection pool. One after another, a job of thousands of
# attempts took the follower of its notice (a 60 s function) about a minute at S3's tens of milliseconds.
READERS = 10


def read_attempts(storage: Storage, bucket: str, job_id: str) -> list[SegmentAttempt]:
    """Every attempt record of the job (every run, every copy), by segment, run, attempt and copy."""
    keyed = [
        ((parsed.index, parsed.run, parsed.attempt, parsed.copy), key)
        for key in storage.list_keys(bucket, layout.segments_prefix(job_id))
        if (parsed := layout.parse_attempt_record_key(key)) is not None
    ]

    def read(key: str) -> SegmentAttempt | None:
        try:
            return SegmentAttempt.model_validate_json(storage.get_bytes(bucket, key))
        except (ObjectMissing, ValueError):
            return None

    with ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="attempts") as pool:
        records = list(pool.map(read, [key for _order, key in keyed]))
    found = [(order, record) for (order, _key), record in zip(keyed, records, strict=True) if record is not None]
    return [record for _order, record in sorted(found, key=lambda item: item[0])]
