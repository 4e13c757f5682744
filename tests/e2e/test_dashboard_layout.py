"""The operator dashboard's jobs table fits its card at every width from 1024 px up.

Headless Chromium through Playwright (tests.support.browser.page) opens the dashboard over an in-memory
farm (no stack needed) whose jobs have the widest cells the table shows: long names, a batch's item
counts, TIMED_OUT badges, ages in hours. The table's right edge, and every cell's, must be inside its card.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from fleetctl.dashboard import DashboardServer
from fusionfleet.jobs.views import JobDetail
from tests.support.browser import page
from tests.support.dashboard import FakeDashboardSource, sample_batch, sample_job

STATES = ("RUNNING", "TIMED_OUT", "SUCCEEDED", "CANCELLED", "WAITING", "FAILED")


@pytest.fixture(scope="module")
def dashboard() -> Iterator[str]:
    jobs = [
        sample_job(f"interview-{state.lower()}-take-{n:02d}-0123456789abcdef", state=state, age_s=9_000 + n * 4_000,
                   states=("done",) * 120 + ("running",) * 8 + ("pending",) * 300)
        for n, state in enumerate(STATES)
    ]  # fmt: skip
    batch = sample_batch("summer-campaign-0123456789abcdef", items=240)
    jobs.append(JobDetail(batch.batch, [], [], {}, None))  # listed as one row, BATCH, its items' progress
    server = DashboardServer(FakeDashboardSource(jobs=jobs, batches=[batch]))
    server.start_in_thread()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()


# One reading of the layout (the page redraws its rows every poll, so cells are measured all at once).
RIGHT_EDGES = """table => ({
  table: table.getBoundingClientRect().right,
  cells: [...table.querySelectorAll("th, td")].map(cell => [cell.textContent, cell.getBoundingClientRect().right]),
})"""


@pytest.mark.parametrize("width", [1024, 1400, 1920])
def test_the_jobs_table_stays_inside_its_card(dashboard: str, browser: str, width: int) -> None:
    # GIVEN the dashboard in a window `width` pixels wide, listing every job
    with page((width, 900)) as shown:
        shown.goto(dashboard)
        card = shown.get_by_role("region", name="Jobs")
        table = card.get_by_role("table")
        expect(table.get_by_role("row")).to_have_count(len(STATES) + 2)  # the header, the jobs, the batch
        # THEN the table, and each of its cells, ends inside the card
        inside = card.evaluate("card => card.getBoundingClientRect().right")
        edges = table.evaluate(RIGHT_EDGES)
        assert edges["table"] <= inside, f"at {width} px the table spills out of its card"
        spilled = [text for text, right in edges["cells"] if right > inside]
        assert not spilled and edges["cells"], f"at {width} px these cells spill out: {spilled}"
        # AND the age column, the last, is there to read
        expect(table.get_by_role("columnheader", name="age")).to_be_visible()
