"""A job's summary and the job index: kept current by the parties that change a job, read by the read
model in a bounded number of requests, believed only where it may be (fusionfleet.jobs.summary)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta

import pytest

from fusionfleet import batch_layout, index_layout, layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.errors import BadRequest
from fusionfleet.jobs import summary
from fusionfleet.jobs.batches import BatchRecord, BatchTarget
from fusionfleet.jobs.final_notice import STATE_MACHINE, NoticeRecord
from fusionfleet.jobs.loss import JobFailedMarker, mark_job_failed
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.states import JobState, SegmentState
from fusionfleet.messages import ObjectRef, SegmentAttempt, SegmentRecord
from tests.support.fakes import FakeStorage
from tests.support.farm import MACHINE, NOW, Farm
from tests.support.jobs import WORK, job_context


def summarized(farm: Farm, job_id: str, status: str, minutes_ago: float = 10, segments: int = 4,
               done: tuple[int, ...] = (), error: str | None = None) -> None:  # fmt: skip
    """A job as the slicer starts it (job record, plan, summary, index entry) and its workers finish
    segments (segment record, output, attempt record, summary mark); its execution in `status`."""
    farm.job(job_id, status, minutes_ago, segments, error=error)
    context = job_context(job_id, frame_count=segments * 25, segment_count=segments,
                          submitted_at=(NOW - timedelta(minutes=minutes_ago)).isoformat())  # fmt: skip
    summary.write(farm.storage, WORK, summary.started(context), summary.submitted_ms(context.submitted_at))
    for index in done:
        farm.segment_done(job_id, index)
        farm.attempt(job_id, index, 1, "succeeded")
        summary.update(farm.storage, WORK, job_id, summary.segment_done(index, "w1", 1, 1.5))


def storage_calls(farm: Farm, since: int) -> list[tuple[str, str, str]]:
    return farm.storage.calls[since:]


# ---------------------------------------------------------------------- the changes
def test_a_segment_marked_twice_counts_once_and_a_failure_never_hides_a_success() -> None:
    start = summary.started(job_context("job-a", segment_count=3))
    once = summary.segment_done(1, "w1", 1, 2.0)(start)
    assert summary.segment_done(1, "w1", 1, 2.0)(once) == once
    assert summary.segment_failed(1, "w2", 2)(once) == once
    failed = summary.segment_failed(2, "w2", 1)(once)
    assert (failed.done, failed.failed) == (frozenset({1}), frozenset({2}))
    # AND a later success of a failed segment moves it to done
    assert summary.segment_done(2, "w3", 2, 1.0)(failed).done == frozenset({1, 2})


def test_a_retry_starts_a_run_whose_end_nothing_recorded_yet() -> None:
    ended = summary.ended(summary.EndedView(run=0, state="FAILED", reason="boom"))
    start = summary.started(job_context("job-a"))
    finished = summary.doomed(0, "segment 1 failed")(summary.cancelled(ended(start)))
    assert finished.ended_view is not None and finished.doomed == "segment 1 failed" and finished.cancelled
    retried = summary.retried(1)(finished)
    assert (retried.run, retried.ended_view, retried.doomed, retried.cancelled) == (1, None, "", False)
    # AND the end of an earlier run is never recorded over the new one's
    assert summary.ended(summary.EndedView(run=0, state="FAILED"))(retried).ended_view is None
    assert summary.doomed(0, "late")(retried).doomed == ""


class SlowStorage(FakeStorage):
    """Reads that take a moment, so concurrent writers read the same version and race."""

    def get_tagged(self, bucket: str, key: str) -> tuple[bytes, str]:
        found = super().get_tagged(bucket, key)
        time.sleep(0.001)
        return found


def test_segments_finished_at_once_by_many_workers_are_all_counted() -> None:
    # GIVEN a job of 240 segments whose summary the slicer wrote
    storage = SlowStorage()
    context = job_context("long-0123456789abcdef", frame_count=240 * 25, segment_count=240)
    summary.write(storage, WORK, summary.started(context), summary.submitted_ms(context.submitted_at))

    # WHEN 12 workers mark its segments at the same time, each of 20 twice (a redelivery), and every tenth
    # reads as failed from a late delivery after it was rendered
    def work(worker: int) -> None:
        for index in range(worker, 240, 12):
            for _ in range(2):
                summary.update(storage, WORK, context.job_id, summary.segment_done(index, f"w{worker}", 1, 2.0))
            if index % 10 == 0:
                summary.update(storage, WORK, context.job_id, summary.segment_failed(index, f"w{worker}", 2))

    with ThreadPoolExecutor(12) as pool:
        list(pool.map(work, range(12)))
    # THEN the writers did race (conditional writes were refused) and yet every segment is counted once,
    # done, by the worker that rendered it
    assert storage.conflicts > 0
    found = summary.read(storage, WORK, context.job_id)
    assert found is not None
    assert (len(found.done), len(found.failed), found.total) == (240, 0, 240)
    assert {index: mark.w for index, mark in found.segments.items()} == {i: f"w{i % 12}" for i in range(240)}


def test_a_job_without_a_summary_is_left_alone_by_its_writers() -> None:
    storage = FakeStorage()
    assert summary.update(storage, WORK, "old-job", summary.segment_done(0, "w1", 1, 1.0)) is None
    assert storage.list_keys(WORK, "") == []


def test_a_job_failed_marker_records_its_cause_in_the_summary_for_its_run_only() -> None:
    farm = Farm()
    summarized(farm, "job-d", "RUNNING", done=(0,))
    marker = JobFailedMarker(job_id="job-d", run=0, segment=2, attempts=3, error="E", cause="segment 2 failed",
                             by="worker", at=NOW.timestamp())  # fmt: skip
    assert mark_job_failed(farm.storage, WORK, marker)
    view = farm.reader.view("job-d")
    assert (view.state, view.reason, view.segments.done) == (JobState.RUNNING, "segment 2 failed", 1)


# ---------------------------------------------------------------------- the read model
def test_the_listing_is_one_listing_and_one_read_per_job_and_pages_through_every_job_newest_first() -> None:
    # GIVEN 45 running jobs, one a minute
    farm = Farm()
    for number in range(45):
        summarized(farm, f"job-{number:02d}", "RUNNING", minutes_ago=100 - number, done=(0, 1))
    # WHEN the first page of 20 is read
    since = len(farm.storage.calls)
    page, cursor = farm.reader.list_page(limit=20)
    calls = storage_calls(farm, since)
    # THEN it is the 20 newest, from one listing of the index and one read of each summary
    assert [view.job_id for view in page] == [f"job-{n:02d}" for n in range(44, 24, -1)]
    assert [call[0] for call in calls] == ["list_after"] + ["get_bytes"] * 20
    assert all(call[2].endswith("summary.json") for call in calls[1:])
    assert (page[0].state, page[0].segments.done, page[0].segments.total) == (JobState.RUNNING, 2, 4)
    # AND the pages after it hold every other job once, and the last says there is no more
    second, cursor2 = farm.reader.list_page(limit=20, after=cursor or "")
    third, end = farm.reader.list_page(limit=20, after=cursor2 or "")
    listed = [view.job_id for view in page + second + third]
    assert listed == [f"job-{n:02d}" for n in range(44, -1, -1)] and end is None


def test_a_cursor_that_no_page_gave_is_a_bad_request() -> None:
    farm = Farm()
    summarized(farm, "job-a", "RUNNING")
    with pytest.raises(BadRequest, match="next"):
        farm.reader.list_page(after="bm90LWEtY3Vyc29y")  # base64 of "not-a-cursor"


def test_a_state_filter_and_a_tenant_filter_keep_only_their_jobs() -> None:
    farm = Farm()
    summarized(farm, "job-run", "RUNNING", minutes_ago=3)
    summarized(farm, "acme_job-ok", "SUCCEEDED", minutes_ago=2, done=(0, 1, 2, 3))
    assert [v.job_id for v in farm.reader.list_page(state="SUCCEEDED")[0]] == ["acme_job-ok"]
    assert [v.job_id for v in farm.reader.list_page(tenant="acme")[0]] == ["acme_job-ok"]


def test_an_ended_job_is_read_in_full_once_and_then_from_the_view_its_summary_recorded() -> None:
    # GIVEN a job whose execution failed, told by the state machine's notice, with nobody recording it
    farm = Farm()
    summarized(farm, "job-f", "FAILED", done=(0, 1), error="JobFailed")
    notice = NoticeRecord(by=STATE_MACHINE, status="failed", error="JobFailed", reason="segment 2 failed")
    farm.storage.put_json(WORK, layout.notice_key("job-f"), notice.model_dump(mode="json"))
    # WHEN it is listed: the summary says running, the execution has ended: the full read answers
    (first,) = farm.reader.list_page()[0]
    assert (first.state, first.reason, first.segments.done) == (JobState.FAILED, "segment 2 failed", 2)
    # THEN the next listing reads its summary alone and shows the same
    since = len(farm.storage.calls)
    (again,) = farm.reader.list_page()[0]
    assert again == first
    assert [call[0] for call in storage_calls(farm, since)] == ["list_after", "get_bytes"]


def test_a_mark_a_worker_failed_to_record_is_made_good_when_the_job_ends() -> None:
    # GIVEN a job whose segment 3 was rendered but whose worker could not mark it in the summary
    farm = Farm()
    summarized(farm, "job-s", "SUCCEEDED", done=(0, 1, 2))
    farm.segment_done("job-s", 3)
    # WHEN it is read after its end: its counts are its files'
    (first,) = farm.reader.list_page()[0]
    assert (first.state, first.segments.done) == (JobState.SUCCEEDED, 4)
    # THEN the recorded summary holds them for every later read
    found = summary.read(farm.storage, WORK, "job-s")
    assert found is not None and found.done == frozenset({0, 1, 2, 3})
    assert farm.reader.list_page()[0][0] == first


def test_a_job_that_ended_with_nobody_recording_it_is_never_shown_running() -> None:
    farm = Farm()
    summarized(farm, "job-t", "RUNNING", done=(0,))
    arn = execution_arn(MACHINE, "job-t")
    farm.orchestrator.states[arn] = Execution(arn, "TIMED_OUT", error="States.Timeout")
    (view,) = farm.reader.list_page()[0]
    assert view.state is JobState.TIMED_OUT


def test_a_cancel_sends_readers_to_the_full_read_and_a_retry_to_the_new_run() -> None:
    # GIVEN a running job
    farm = Farm()
    summarized(farm, "job-c", "RUNNING", done=(0,))
    # WHEN it is cancelled: it reads CANCELLED at once (the flag is set before the stop)
    farm.ops.cancel("job-c")
    assert farm.reader.list_page()[0][0].state is JobState.CANCELLED
    assert farm.reader.view("job-c").state is JobState.CANCELLED
    # AND once retried it is the new run's: RUNNING, its done segment still counted
    arn = execution_arn(MACHINE, "job-c")
    farm.orchestrator.states[arn] = replace(farm.orchestrator.states[arn], status="ABORTED", error="JobCancelled")
    farm.ops.retry("job-c")
    found = summary.read(farm.storage, WORK, "job-c")
    assert found is not None and (found.run, found.cancelled) == (1, False)
    (view,) = farm.reader.list_page()[0]
    assert (view.state, view.segments.done) == (JobState.RUNNING, 1)


def test_a_long_jobs_detail_is_a_page_of_segments_in_a_bounded_number_of_reads() -> None:
    # GIVEN a running job of 600 segments, 450 of them done (each with its attempt record)
    farm = Farm()
    summarized(farm, "job-long", "RUNNING", segments=600, done=tuple(range(450)))
    # WHEN its detail is read a page of 100 segments at a time from segment 400
    since = len(farm.storage.calls)
    detail, more = farm.reader.detail_page("job-long", 400, 100)
    calls = storage_calls(farm, since)
    # THEN the page is segments 400-499 (done up to 449), the next page starts at 500
    assert [s.index for s in detail.segments] == list(range(400, 500)) and more == 500
    states = [s.state for s in detail.segments]
    assert states == [SegmentState.DONE] * 50 + [SegmentState.PENDING] * 50
    assert (detail.segments[0].worker, detail.segments[0].attempt) == ("w1", 1)
    assert (detail.job.segments.done, detail.job.segments.total) == (450, 600)
    # AND it took a bounded number of reads: no listing of every segment file, no read of every attempt
    assert len(calls) < 20, calls
    # AND its attempts are the first of the page's segments
    assert [attempt.segment for attempt in detail.attempts] == list(range(400, 410))
    # AND the last page says there is none after it
    assert farm.reader.detail_page("job-long", 500, 100)[1] is None


def test_attempts_are_paged_by_an_opaque_cursor_in_segment_order() -> None:
    farm = Farm()
    summarized(farm, "job-a", "RUNNING", segments=30, done=tuple(range(25)))
    seen: list[int] = []
    cursor: str | None = ""
    pages = 0
    while cursor is not None:
        page, cursor = farm.reader.attempts_page("job-a", cursor, 10)
        seen += [attempt.segment for attempt in page]
        pages += 1
    assert seen == list(range(25)) and pages == 3


def test_a_job_from_before_summaries_is_read_in_full() -> None:
    farm = Farm()
    farm.job("old-job", "RUNNING", done=(0, 1))
    assert farm.reader.view("old-job").segments.done == 2
    detail, more = farm.reader.detail_page("old-job", 0, 2)
    assert [s.index for s in detail.segments] == [0, 1] and more == 2
    # AND a farm with no job index at all is listed the old way
    assert [v.job_id for v in farm.reader.list_page()[0]] == ["old-job"]


def test_index_keys_sort_newest_first_and_parse_back() -> None:
    older = index_layout.job_index_key("acme_a-1", 1_000)
    newer = index_layout.job_index_key("acme_b-2", 2_000)
    assert newer < older
    assert index_layout.parse_job_index_key(newer) == "acme_b-2"
    assert index_layout.parse_job_index_key(layout.job_key("x")) is None


def test_unused_records_are_what_a_worker_writes() -> None:
    # The records the helpers above write are the workers' own types (a guard against the helper drifting).
    SegmentRecord(job_id="j", index=0, status="succeeded")
    SegmentAttempt(job_id="j", index=0, attempt=1, worker="w", status="succeeded", started_at=0.0)
    assert Segment(0, 0, 25, 0, 10).index == 0


def test_an_ended_jobs_detail_shows_its_cost_priced_once_then_from_its_summary() -> None:
    # GIVEN a job that failed after two segments, each with a succeeded attempt record
    farm = Farm()
    summarized(farm, "job-p", "FAILED", done=(0, 1), error="JobFailed")
    notice = NoticeRecord(by=STATE_MACHINE, status="failed", error="JobFailed", reason="segment 2 failed")
    farm.storage.put_json(WORK, layout.notice_key("job-p"), notice.model_dump(mode="json"))
    # WHEN its detail is read: the read that records its end prices its attempts
    detail, _more = farm.reader.detail_page("job-p")
    assert detail.cost is not None and detail.cost["final"] is True
    assert detail.cost["engine_gpu_s"] == 3.0 and detail.cost["billed_gpu_s"] > 0
    # THEN the next read shows the same cost without reading any attempt record but its first page's
    since = len(farm.storage.calls)
    again, _more = farm.reader.detail_page("job-p")
    assert again.cost == detail.cost
    attempt_reads = [c for c in storage_calls(farm, since) if c[0] == "get_bytes" and ".attempts/" in c[2]]
    assert len(attempt_reads) <= 2, attempt_reads  # the page's own attempts, not a pricing of every one


def test_a_running_jobs_detail_has_no_cost_rather_than_a_partial_one() -> None:
    farm = Farm()
    summarized(farm, "job-r", "RUNNING", done=(0,))
    assert farm.reader.detail_page("job-r")[0].cost is None


def test_a_batch_is_one_row_of_the_indexed_listing_counting_its_items() -> None:
    # GIVEN a batch of three targets: its one index entry, two items started (one succeeded, one running)
    farm = Farm()
    record = BatchRecord(
        batch_id="batch-b", manifest=ObjectRef(bucket="media", key="jobs/batch-b.json"), output_prefix="out/b/",
        submitted_at=NOW.isoformat(), settings={"source": ["faces/a.png"]},
        targets=tuple(BatchTarget(index=i, key=f"t/{i}.png", output_stem=f"out/b/{i}") for i in range(3)),
    )  # fmt: skip
    farm.storage.put_json(WORK, batch_layout.batch_key("batch-b"), record.model_dump(mode="json"))
    summary.index_entry(farm.storage, WORK, "batch-b", summary.submitted_ms(NOW.isoformat()))
    for index, status in ((0, "SUCCEEDED"), (1, "RUNNING")):
        item = record.item_id(index)
        farm.storage.put_bytes(WORK, batch_layout.batch_item_claim_key("batch-b", index), b"{}")
        farm.job(item, status, done=(0, 1, 2, 3) if status == "SUCCEEDED" else (0,))
        context = job_context(item, frame_count=100, segment_count=4, submitted_at=NOW.isoformat())
        summary.write(farm.storage, WORK, summary.started(context), 0, indexed=False)
    # AND an ordinary job listed beside it
    summarized(farm, "job-o", "RUNNING", minutes_ago=60)
    # WHEN the farm's jobs are listed
    views = farm.reader.list_page()[0]
    # THEN the batch is one row (its items are not rows of their own), running, counting its items
    assert [view.job_id for view in views] == ["batch-b", "job-o"]
    batch = views[0]
    assert (batch.kind, batch.state) == ("batch", JobState.RUNNING)
    assert batch.items is not None and (batch.items.total, batch.items.done, batch.items.running) == (3, 1, 1)
