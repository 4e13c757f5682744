"""`submit --wait`: the client learns of a job's end from its notice, and still by its status without one."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from fleetctl.client import Client
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.farm import MACHINE, RESOURCES

ARN = execution_arn(MACHINE, "clip-1")


class EndingInbox:
    """Long-polls as SQS would; the job ends (its notice arrives) at the `ends_on`-th receive."""

    def __init__(self, orchestrator: FakeOrchestrator, ends_on: int | None) -> None:
        self.orchestrator = orchestrator
        self.ends_on = ends_on
        self.waits: list[float] = []

    def next_notice(self, wait_s: float) -> dict[str, Any] | None:
        self.waits.append(wait_s)
        if len(self.waits) == self.ends_on:
            self.orchestrator.states[ARN] = Execution(ARN, "SUCCEEDED", datetime.now(UTC), datetime.now(UTC))
            return {"job_id": "clip-1", "status": "succeeded"}
        time.sleep(min(wait_s, 0.05))
        return None

    def close(self) -> None:
        pass


def running() -> FakeOrchestrator:
    orchestrator = FakeOrchestrator()
    orchestrator.states[ARN] = Execution(ARN, "RUNNING", datetime.now(UTC), None)
    return orchestrator


def test_the_wait_ends_on_the_notice_and_reads_the_status_only_for_progress_meanwhile() -> None:
    # GIVEN a running job whose notice arrives on the inbox's third receive
    orchestrator = running()
    inbox = EndingInbox(orchestrator, ends_on=3)
    seen: list[str] = []
    # WHEN the client waits on the inbox, reading progress every 5 s
    began = time.monotonic()
    status = Client(FakeStorage(), orchestrator, RESOURCES).wait(
        "clip-1", 60, lambda s: seen.append(s.state), notices=inbox, progress_s=5.0
    )
    # THEN it returns the succeeded status at once, having long-polled 5 s at a time between status reads
    assert status.state == "SUCCEEDED"
    assert inbox.waits == [5.0, 5.0, 5.0]
    assert seen == ["RUNNING", "RUNNING", "RUNNING", "SUCCEEDED"]
    assert time.monotonic() - began < 2.0


def test_a_job_that_ended_before_the_inbox_existed_is_seen_by_its_status() -> None:
    orchestrator = FakeOrchestrator()
    orchestrator.states[ARN] = Execution(ARN, "FAILED", datetime.now(UTC), datetime.now(UTC), cause="boom")
    inbox = EndingInbox(orchestrator, ends_on=None)
    status = Client(FakeStorage(), orchestrator, RESOURCES).wait("clip-1", 60, notices=inbox)
    assert status.state == "FAILED" and inbox.waits == []


def test_without_a_notice_the_wait_still_ends_at_its_timeout() -> None:
    inbox = EndingInbox(running(), ends_on=None)
    status = Client(FakeStorage(), inbox.orchestrator, RESOURCES).wait("clip-1", 0.3, notices=inbox, progress_s=0.1)
    # (the view it ends with has not ended: the caller gave up waiting)
    assert status.state == "RUNNING" and not status.ended
    assert all(wait <= 0.3 for wait in inbox.waits) and inbox.waits
