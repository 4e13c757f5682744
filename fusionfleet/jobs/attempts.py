"""A job's attempt records (`work/<job>/segments/<index>.attempts/…`), read back in order."""

from __future__ import annotations

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import ObjectMissing
from fusionfleet.messages import SegmentAttempt


def read_attempts(storage: Storage, bucket: str, job_id: str) -> list[SegmentAttempt]:
    """Every attempt record of the job (every run, every copy), by segment, run, attempt and copy."""
    found: list[tuple[tuple[int, int, int, int], SegmentAttempt]] = []
    for key in storage.list_keys(bucket, layout.segments_prefix(job_id)):
        parsed = layout.parse_attempt_record_key(key)
        if parsed is None:
            continue
        try:
            record = SegmentAttempt.model_validate_json(storage.get_bytes(bucket, key))
        except (ObjectMissing, ValueError):
            continue
        found.append(((parsed.index, parsed.run, parsed.attempt, parsed.copy), record))
    return [record for _order, record in sorted(found, key=lambda item: item[0])]
