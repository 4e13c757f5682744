"""A key format builds keys and reads them back to the fields that built them, and reads nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusionfleet import batch_layout, index_layout, layout, tenant_layout
from fusionfleet.key_format import KeyFormat

ATTEMPT = KeyFormat("work/{job}/segments/{index:05d}.attempts/r{run:03d}-{attempt:03d}[-c{copy:01d}].json")
JOB_IDS = st.from_regex(r"\A[a-z0-9][a-z0-9._+-]{0,40}\Z")
NUMBERS = st.integers(min_value=0, max_value=10**7)


@given(JOB_IDS, NUMBERS, NUMBERS, NUMBERS, st.integers(min_value=0, max_value=12))
def test_every_key_reads_back_to_the_fields_that_built_it(
    job: str, index: int, run: int, attempt: int, copy: int
) -> None:
    key = ATTEMPT.key(job=job, index=index, run=run, attempt=attempt, copy=copy)
    assert ATTEMPT.parse(key) == {"job": job, "index": index, "run": run, "attempt": attempt, "copy": copy}


def test_numbers_keep_their_width_and_an_absent_optional_part_is_not_written() -> None:
    assert ATTEMPT.key(job="j", index=3, run=0, attempt=1, copy=0) == "work/j/segments/00003.attempts/r000-001.json"
    assert ATTEMPT.key(job="j", index=3, run=0, attempt=1) == "work/j/segments/00003.attempts/r000-001.json"
    assert ATTEMPT.key(job="j", index=123456, run=1000, attempt=2, copy=1).endswith("123456.attempts/r1000-002-c1.json")


@pytest.mark.parametrize(
    "key",
    [
        "work/j/segments/00003.attempts/r000-001-c0.json",  # a copy is never written as 0
        "work/j/segments/3.attempts/r000-001.json",  # narrower than the format writes
        "work/_workers/segments/00003.attempts/r000-001.json",  # not a job id
        "work/j/segments/00003.attempts/r000-001.json.tmp",
        "prefix/work/j/segments/00003.attempts/r000-001.json",
        "work/j/x/segments/00003.attempts/r000-001.json",  # a job id is one path segment
    ],
)
def test_keys_of_another_shape_read_as_nothing(key: str) -> None:
    assert ATTEMPT.parse(key) is None


def test_words_are_checked_both_ways() -> None:
    chunk = layout.CHUNK_FILE
    with pytest.raises(ValueError, match="kind must be one of mp4, state"):
        chunk.key(job="j", index=1, first=0, end=25, kind="mov")
    assert chunk.parse("work/j/checkpoints/00001/0000000-0000025.mov") is None


def test_a_missing_or_unknown_field_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"missing \['attempt'\], unknown \['attempt_number'\]"):
        ATTEMPT.key(job="j", index=1, run=0, attempt_number=1)


def test_an_optional_part_holds_exactly_one_field() -> None:
    with pytest.raises(ValueError, match="exactly one field"):
        KeyFormat("work/{job}[-{run:03d}-{copy:01d}].json")
    with pytest.raises(ValueError, match="twice"):
        KeyFormat("work/{job}/{job}.json")


def test_tenant_batch_and_index_records_read_back() -> None:
    assert tenant_layout.parse_waiting_index_key(tenant_layout.waiting_index_key("acme", 42, "acme-j-1")) == (
        "acme", 42, "acme-j-1",
    )  # fmt: skip
    assert tenant_layout.parse_tenant_settings_key(tenant_layout.tenant_settings_key("acme")) == "acme"
    assert tenant_layout.parse_tenant_settings_key("work/_tenants/Not_A_Tenant/settings.json") is None
    assert tenant_layout.parse_admission_lease_key(tenant_layout.admission_lease_key("acme", 7)) == 7
    entry = tenant_layout.spend_entry_key("acme", "2026-12", "acme-j", 3, 1, 2, 0, 12345)
    assert tenant_layout.parse_spend_entry_key(entry) == tenant_layout.SpendEntry(
        "acme", "2026-12", "acme-j", 3, 1, 2, 0, 12345
    )
    assert entry.startswith(tenant_layout.spend_entry_prefix("acme", "2026-12", "acme-j", 3, 1, 2, 0))
    assert batch_layout.parse_batch_item_claim_key(batch_layout.batch_item_claim_key("b-1", 12)) == ("b-1", 12)
    assert batch_layout.parse_open_batch_key(batch_layout.open_batch_key("b-1")) == "b-1"
    assert index_layout.parse_job_index_key(index_layout.job_index_key("clip-1", 1_700_000_000_000)) == "clip-1"
    assert layout.parse_webhook_delivery_key(layout.webhook_state_key("clip-1")) is None
