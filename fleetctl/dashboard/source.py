"""What the dashboard reads and does: a small protocol, and the stack's source that satisfies it.

The server depends on the protocol only, so its tests run against an in-memory source
(`tests/support/dashboard.py`) and the page never sees boto3. An unknown job raises `JobNotFound`,
an action the job's state does not allow raises `OperationRefused` (both from `fusionfleet.errors`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from fusionfleet.errors import JobNotFound, OperationRefused
from fusionfleet.fleet.workers import WorkerView, worker_views
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.batch_views import BatchDetail, item_page
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.views import JobDetail, JobView
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_overview import tenant_overviews
from fusionfleet.services.trial_renders import TrialRenders

__all__ = ["DashboardSource", "JobNotFound", "OperationRefused", "StackSource"]


class DashboardSource(Protocol):
    def list_jobs(self, state: str | None = None, limit: int = 20) -> Sequence[JobView]: ...
    def list_page(
        self, state: str | None = None, limit: int = 20, after: str = ""
    ) -> tuple[Sequence[JobView], str | None]: ...
    def job(self, job_id: str) -> JobDetail: ...
    # A batch's view and a page of its items (from `first`, at most `limit`) with the next page's first
    # index; None when `job_id` is no batch.
    def batch(self, job_id: str, first: int, limit: int) -> tuple[BatchDetail, int | None] | None: ...
    def workers(self) -> Sequence[WorkerView]: ...
    def cancel(self, job_id: str) -> str: ...
    def retry(self, job_id: str) -> str: ...
    def preview(self, job_id: str) -> bytes | None: ...
    def tenants(self) -> Sequence[dict[str, object]]: ...
    def try_frames(self, job_id: str, frames: Sequence[int]) -> str: ...
    def pictures(self, job_id: str) -> Sequence[int]: ...
    def picture(self, job_id: str, frame: int) -> bytes | None: ...


@dataclass
class StackSource:
    """A stack's jobs through the read model, its workers' presence records, and the operator's actions."""

    reader: JobReader
    operations: Operations
    clock: Callable[[], float] = field(default=time.time)

    def list_jobs(self, state: str | None = None, limit: int = 20) -> Sequence[JobView]:
        return self.reader.list_jobs(state, limit)

    def list_page(
        self, state: str | None = None, limit: int = 20, after: str = ""
    ) -> tuple[Sequence[JobView], str | None]:
        return self.reader.list_page(state, limit, after=after)

    def job(self, job_id: str) -> JobDetail:
        return self.reader.detail(job_id)

    def batch(self, job_id: str, first: int, limit: int) -> tuple[BatchDetail, int | None] | None:
        batches = BatchReader(self.reader)
        if not batches.is_batch(job_id):  # a batch not yet opened is one too: PENDING with its targets
            return None
        detail = batches.detail(job_id, page=range(first, first + limit))
        items, more = item_page(detail.items, first, limit)
        return replace(detail, items=items), more

    def workers(self) -> Sequence[WorkerView]:
        records = self.reader.records
        return worker_views(records.storage, records.bucket, self.clock())

    def cancel(self, job_id: str) -> str:
        return self.operations.cancel(job_id)

    def retry(self, job_id: str) -> str:
        return self.operations.retry(job_id)

    def preview(self, job_id: str) -> bytes | None:
        return self.reader.preview(job_id)

    def tenants(self) -> Sequence[dict[str, object]]:
        """Every tenant with settings, a waiting job or spend this month (fusionfleet.services.tenant_overview)."""
        records = self.reader.records
        found = tenant_overviews(records.storage, records.orchestrator, records.bucket, records.state_machine_arn,
                                 self.clock())  # fmt: skip
        return [overview.as_dict() for overview in found]

    def _trials(self) -> TrialRenders:
        return TrialRenders(self.reader.records.storage, self.reader, self.clock)

    def try_frames(self, job_id: str, frames: Sequence[int]) -> str:
        """A test render of these frames with the job's settings (fusionfleet.services.trial_renders)."""
        started = self._trials().start(job_id, frames)
        return f"test render {started} of frame(s) {', '.join(map(str, frames))} started"

    def pictures(self, job_id: str) -> Sequence[int]:
        return self._trials().frames(job_id)

    def picture(self, job_id: str, frame: int) -> bytes | None:
        return self._trials().picture(job_id, frame)
