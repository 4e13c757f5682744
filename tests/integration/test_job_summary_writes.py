"""The S3 adapter's conditional replace and paged listing against moto (what a job's summary and the job
index are written and read with; the concurrent writers are in tests/unit/test_job_summary.py)."""

from __future__ import annotations

from fusionfleet import layout
from fusionfleet.adapters.storage import S3Storage
from tests.integration.conftest import Aws


def test_a_write_over_a_version_another_writer_replaced_is_refused(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    key = layout.summary_key("job-a")
    storage.put_bytes("work", key, b"{}")
    _data, etag = storage.get_tagged("work", key)
    # GIVEN another writer replaced the object after it was read
    assert storage.replace("work", key, b'{"a": 1}', etag)
    # THEN a write that names the version it read is refused, and the other writer's change stays
    assert not storage.replace("work", key, b'{"b": 2}', etag)
    assert storage.get_bytes("work", key) == b'{"a": 1}'
    # AND a write over an object that is gone is refused too (nothing is recreated from a stale read)
    storage.delete_prefix("work", key)
    assert not storage.replace("work", key, b'{"b": 2}', etag)


def test_a_page_of_keys_is_one_listing_after_the_cursor(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    for number in range(30):
        storage.put_bytes("work", f"work/_jobs/{number:04d}.json", b"{}")
    first = storage.list_after("work", "work/_jobs/", "", 10)
    second = storage.list_after("work", "work/_jobs/", first[-1], 10)
    assert first == [f"work/_jobs/{n:04d}.json" for n in range(10)]
    assert second == [f"work/_jobs/{n:04d}.json" for n in range(10, 20)]
