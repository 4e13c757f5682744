"""The winner rule when a straggler and its backup copy both render a segment (gpu_worker.rendering.commit), and the
merge reading exactly the committed output of each segment."""

from __future__ import annotations

from fusionfleet import layout
from fusionfleet.messages import SegmentRecord
from gpu_worker.merging.merge import output_keys
from gpu_worker.rendering.commit import commit, drop_output, result_of, winner
from tests.support.fakes import FakeStorage
from tests.support.jobs import WORK, halves, job_context

JOB = job_context()


def finished(copy_number: int, worker: str) -> SegmentRecord:
    key = layout.copy_segment_key(JOB.job_id, 1, copy_number)
    return SegmentRecord(
        job_id=JOB.job_id, index=1, status="succeeded", frames=50, key=key, worker=worker, copy_number=copy_number
    )


def test_the_first_copy_to_commit_wins_and_the_later_one_gets_the_winner() -> None:
    # GIVEN both copies uploaded to their own keys
    storage = FakeStorage()
    for copy_number in (0, 1):
        storage.put_bytes(WORK, layout.copy_segment_key(JOB.job_id, 1, copy_number), b"video")
    # WHEN the backup commits first, then the original
    first = commit(storage, WORK, 0, finished(1, "w2"))
    second = commit(storage, WORK, 0, finished(0, "w1"))
    # THEN both are told the backup won, and the segment record (what the merge reads) names its key
    assert first.copy_number == second.copy_number == 1
    record = SegmentRecord.model_validate(storage.json(WORK, layout.segment_record_key(JOB.job_id, 1)))
    assert record.key.endswith("00001.c1.mp4") and record.worker == "w2"
    assert result_of(second).copy_number == 1 and result_of(second).key == record.key
    # AND the loser's own output is dropped, the winner's kept
    drop_output(storage, WORK, JOB.job_id, 1, 0, second)
    assert not storage.exists(WORK, layout.segment_key(JOB.job_id, 1))
    assert storage.exists(WORK, record.key)


def test_a_winner_that_died_before_its_segment_record_is_completed_by_the_next_delivery() -> None:
    # GIVEN a commit whose segment record was never written (the worker died in between)
    storage = FakeStorage()
    storage.create(WORK, layout.segment_winner_key(JOB.job_id, 1, 0), finished(0, "w1").model_dump_json().encode())
    assert not storage.exists(WORK, layout.segment_record_key(JOB.job_id, 1))
    # WHEN the redelivered message finds the winner and commits it again
    found = winner(storage, WORK, JOB.job_id, 1, 0)
    assert found is not None
    commit(storage, WORK, 0, found)
    # THEN the segment record is there, naming copy 0
    assert storage.json(WORK, layout.segment_record_key(JOB.job_id, 1))["copy_number"] == 0


def test_each_run_has_its_own_winner() -> None:
    storage = FakeStorage()
    commit(storage, WORK, 0, finished(0, "w1"))
    assert winner(storage, WORK, JOB.job_id, 1, 1) is None


def test_the_merge_reads_one_output_per_segment_the_committed_one() -> None:
    # GIVEN segment 0 by its original and segment 1 by its backup copy; an old record without a key
    plan = list(halves())
    records = [
        SegmentRecord(job_id=JOB.job_id, index=0, status="succeeded", frames=50, key=""),
        finished(1, "w2"),
    ]
    # THEN the merge concatenates exactly these, in plan order
    assert output_keys(JOB, plan, records) == [
        layout.segment_key(JOB.job_id, 0),
        f"{layout.segments_prefix(JOB.job_id)}00001.c1.mp4",
    ]


def test_a_later_delivery_of_a_copy_uploads_beside_the_first_and_drops_its_output_when_it_loses() -> None:
    # GIVEN copy 0's first delivery committed, and its second delivery uploaded to its own key
    storage = FakeStorage()
    first_key = layout.copy_segment_key(JOB.job_id, 1, 0, delivery=1)
    second_key = layout.copy_segment_key(JOB.job_id, 1, 0, delivery=2)
    assert first_key == layout.segment_key(JOB.job_id, 1) and second_key.endswith("00001.d2.mp4")
    assert layout.parse_segment_file(second_key) == layout.SegmentFile(JOB.job_id, 1, "mp4")
    storage.put_bytes(WORK, first_key, b"first")
    storage.put_bytes(WORK, second_key, b"second")
    committed = commit(storage, WORK, 0, finished(0, "w1"))
    # WHEN the second delivery's commit finds the first's and drops its own output
    drop_output(storage, WORK, JOB.job_id, 1, 0, committed, delivery=2)
    # THEN the committed output keeps its bytes, and the second's is gone
    assert storage.get_bytes(WORK, first_key) == b"first" and not storage.exists(WORK, second_key)
