"""Issue 45: the first read of a failed job of many attempts makes a bounded number of reads (the API
function has 29 s), and its cost comes from the follower of its final notice, which prices every attempt
once, outside the API."""

from __future__ import annotations

import pytest

from fusionfleet import layout
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs import summary
from fusionfleet.jobs.cost import GpuPrices
from fusionfleet.jobs.final_notice import STATE_MACHINE, NoticeRecord
from fusionfleet.jobs.reader import DEFAULT_ATTEMPT_PAGE, PRICED_IN_A_READ
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.services.job_end import JobEnded
from fusionfleet.webhooks.outbox import WebhookOutbox
from tests.support.farm import MACHINE, Farm
from tests.support.jobs import job_context
from tests.support.webhook_fakes import FakeOrderedQueue
from tests.unit.test_job_summary import summarized

SEGMENTS = PRICED_IN_A_READ // 2 + 10  # two attempts each: more records than a read prices itself


def failed_job(farm: Farm, job_id: str) -> None:
    """A job that failed after every segment failed twice, its notice sent by the state machine."""
    summarized(farm, job_id, "FAILED", segments=SEGMENTS, error="JobFailed")
    for index in range(SEGMENTS):
        for attempt in (1, 2):
            farm.attempt(job_id, index, attempt, "failed")
    notice = NoticeRecord(by=STATE_MACHINE, status="failed", error="JobFailed", reason="segment 0 failed")
    farm.storage.put_json("work", layout.notice_key(job_id), notice.model_dump(mode="json"))


def attempt_reads(farm: Farm, since: int) -> int:
    return sum(1 for call in farm.storage.calls[since:] if call[0] == "get_bytes" and ".attempts/" in call[2])


def follower(farm: Farm) -> JobEnded:
    outbox = WebhookOutbox(FakeOrderedQueue(), "q/events.fifo", farm.storage, "work")
    admitter = Admitter(farm.storage, farm.orchestrator, AdmissionConfig("work", MACHINE, TenantLimits(1)), outbox)
    return JobEnded(farm.storage, "work", outbox, admitter, GpuPrices(), clock=farm.clock)


def test_the_first_read_of_a_failed_job_of_many_attempts_reads_only_its_first_page() -> None:
    # GIVEN a failed job of more attempt records than a read prices, its end recorded by nobody yet
    farm = Farm()
    failed_job(farm, "job-big")
    since = len(farm.storage.calls)
    # WHEN the API reads its detail for the first time
    detail, _more = farm.reader.detail_page("job-big")
    # THEN it read its first page of attempts, not every record (the old read priced all 2 × SEGMENTS),
    # and shows the end without a cost rather than spend the function's time on it
    assert detail.job.state.value == "FAILED"
    assert attempt_reads(farm, since) <= DEFAULT_ATTEMPT_PAGE
    assert detail.cost is None
    # AND the end is recorded: the next read is as small
    since = len(farm.storage.calls)
    assert farm.reader.detail_page("job-big")[0].job.state.value == "FAILED"
    assert attempt_reads(farm, since) <= DEFAULT_ATTEMPT_PAGE


@pytest.mark.parametrize("read_first", [True, False], ids=["read-then-followed", "followed-then-read"])
def test_the_follower_of_the_notice_prices_the_run_and_every_read_shows_it(read_first: bool) -> None:
    # GIVEN the same failed job, read by the API before or after its notice is followed
    farm = Farm()
    failed_job(farm, "job-big")
    if read_first:
        farm.reader.detail_page("job-big")
    # WHEN the follower of its final notice handles it (the job-events function: no API timeout)
    followed = follower(farm).handle({"status": "failed", "job_id": "job-big", "stage": "render"})
    assert followed is not None
    since = len(farm.storage.calls)
    detail, _more = farm.reader.detail_page("job-big")
    # THEN the detail shows its cost, every failed attempt billed, without reading them again
    assert detail.cost is not None and detail.cost["final"] is True
    assert detail.cost["billed_gpu_s"] == pytest.approx(2 * SEGMENTS * 8.0, rel=0.2)
    assert attempt_reads(farm, since) <= DEFAULT_ATTEMPT_PAGE
    found = summary.read(farm.storage, "work", "job-big")
    assert found is not None and found.priced is not None and found.priced.run == 0


def test_a_retry_shows_no_cost_of_the_run_before() -> None:
    priced = summary.costed(0, {"billed_gpu_s": 1.0})(summary.started(job_context("job-a")))
    ended = summary.ended(summary.EndedView(run=0, state="FAILED"))(priced)
    assert ended.ended_cost == {"billed_gpu_s": 1.0}
    retried = summary.retried(1)(ended)
    assert retried.priced is None and retried.ended_cost is None
    # AND a late pricing of the run before is not recorded over the new one
    assert summary.costed(0, {"billed_gpu_s": 2.0})(retried).priced is None
