"""What the dashboard reads and does: a small protocol, and the stack's source that satisfies it.

The server depends on the protocol only, so its tests run against an in-memory source
(`tests/support/dashboard.py`) and the page never sees boto3. An unknown job raises `JobNotFound`,
an action the job's state does not allow raises `OperationRefused` (both from `fusionfleet.errors`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from fusionfleet.errors import JobNotFound, OperationRefused
from fusionfleet.fleet.workers import WorkerView, worker_views
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.views import JobDetail, JobView
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_overview import tenant_overviews

__all__ = ["DashboardSource", "JobNotFound", "OperationRefused", "StackSource"]


class DashboardSource(Protocol):
    def list_jobs(self, state: str | None = None, limit: int = 20) -> Sequence[JobView]: ...
    def list_page(
        self, state: str | None = None, limit: int = 20, after: str = ""
    ) -> tuple[Sequence[JobView], str | None]: ...
    def job(self, job_id: str) -> JobDetail: ...
    def workers(self) -> Sequence[WorkerView]: ...
    def cancel(self, job_id: str) -> str: ...
    def retry(self, job_id: str) -> str: ...
    def preview(self, job_id: str) -> bytes | None: ...
    def tenants(self) -> Sequence[dict[str, object]]: ...


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
