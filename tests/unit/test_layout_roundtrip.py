"""Every key kind `layout` builds parses back to what built it, and other keys parse to nothing."""

from __future__ import annotations

import pytest

from fusionfleet import layout
from fusionfleet.jobs.ids import job_id

# A real job id (as the slicer derives it) and a plain one; a tenant's job id carries its tenant.
JOBS = (job_id("media", "jobs/Zoë + friends.json", '"e1"'), "clip-1", job_id("m", "tenants/acme/jobs/a.json", "e"))

PER_JOB = (
    layout.work_prefix, layout.plan_key, layout.job_key, layout.rejection_key, layout.notice_key,
    layout.reference_frame_key, layout.content_analysis_key, layout.content_analysis_progress_key, layout.run_key,
    layout.cancel_key,
    layout.frame_preview_key, layout.segments_prefix, layout.blocklist_prefix,
)  # fmt: skip


@pytest.mark.parametrize("job", JOBS)
def test_every_per_job_key_parses_back_to_its_job(job: str) -> None:
    for build in (*PER_JOB, lambda j: layout.segment_key(j, 3), lambda j: layout.checkpoint_prefix(j, 3)):
        assert layout.job_of_work_key(build(job)) == job, build


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("index", [0, 7, 99_999, 100_000])
def test_segment_outputs_records_and_copies_round_trip(job: str, index: int) -> None:
    assert layout.parse_segment_file(layout.segment_key(job, index)) == layout.SegmentFile(job, index, "mp4")
    assert layout.parse_segment_file(layout.segment_record_key(job, index)) == layout.SegmentFile(job, index, "json")
    assert layout.parse_segment_file(layout.copy_segment_key(job, index, 0)) == layout.SegmentFile(job, index, "mp4")
    assert layout.parse_segment_file(layout.copy_segment_key(job, index, 1)) == layout.SegmentFile(job, index, "mp4", 1)


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize(("index", "run", "attempt", "copy"), [(0, 0, 1, 0), (12, 3, 7, 1), (100_000, 1000, 1000, 2)])
def test_attempt_records_round_trip(job: str, index: int, run: int, attempt: int, copy: int) -> None:
    key = layout.attempt_record_key(job, index, run, attempt, copy)
    assert layout.parse_attempt_record_key(key) == layout.AttemptFile(job, index, run, attempt, copy)
    assert layout.parse_segment_file(key) is None and layout.parse_run_file(key) is None


@pytest.mark.parametrize("job", JOBS)
def test_winner_task_and_backup_records_round_trip(job: str) -> None:
    builders = {
        "winner": layout.segment_winner_key,
        "task": layout.segment_task_key,
        "backup": layout.segment_backup_key,
    }
    for kind, build in builders.items():
        key = build(job, 4, 2)
        assert layout.parse_run_file(key) == layout.RunFile(job, 4, 2, kind)  # type: ignore[arg-type]
        assert layout.parse_attempt_record_key(key) is None


@pytest.mark.parametrize("job", JOBS)
def test_checkpoint_chunks_round_trip_and_run_plans_belong_to_their_job(job: str) -> None:
    assert layout.parse_chunk_key(layout.chunk_key(job, 3, 75, 100)) == layout.ChunkFile(job, 3, 75, 100)
    state = layout.chunk_state_key(job, 3, 75, 100)
    assert layout.parse_chunk_key(state) == layout.ChunkFile(job, 3, 75, 100, "state")
    assert layout.job_of_work_key(layout.run_plan_key(job, 2)) == job


def test_records_that_are_not_jobs_round_trip_and_belong_to_no_job() -> None:
    assert layout.parse_rejected_index_key(layout.rejected_index_key("clip-1")) == "clip-1"
    assert layout.job_of_work_key(layout.blocked_worker_key("clip-1", "w2")) == "clip-1"
    for key in (layout.worker_key("w"), layout.rejected_index_key("j"), layout.api_job_key("acme", "j")):
        assert layout.job_of_work_key(key) is None


def test_tenant_and_manifest_keys_round_trip() -> None:
    assert layout.tenant_of(layout.tenant_upload_key("acme", "j-1", "face.png")) == "acme"
    for tenant in (None, "acme"):
        key = layout.manifest_key("summer/alice", tenant)
        assert layout.is_manifest_key(key)
        assert layout.manifest_name(key) == "summer/alice" and layout.tenant_of(key) == tenant
        assert layout.tenant_of(layout.input_key("alice", "target.mp4", tenant)) == tenant
    assert layout.input_key("alice", "target.mp4") == "inputs/alice/target.mp4"
    assert layout.manifest_key("a", "acme") == layout.tenant_manifest_key("acme", "a")


def test_keys_of_other_kinds_parse_to_nothing() -> None:
    strangers = (
        "work/clip-1/segments/notes.txt", "work/clip-1/segments/7.mp4", "outputs/x.mp4",
        "work/clip-1/checkpoints/00001/notes.txt", "work/_workers/a/b.json", "tenants/Bad/inputs/j/f",
    )  # fmt: skip
    for key in strangers:
        parsed = (
            layout.parse_segment_file(key), layout.parse_attempt_record_key(key), layout.parse_run_file(key),
            layout.parse_chunk_key(key), layout.parse_rejected_index_key(key),
        )  # fmt: skip
        assert parsed == (None,) * 5, key
