"""What the dashboard reads and does: a small protocol that `fusionfleet.services.operations.Operations` satisfies.

The server depends on this protocol only, so its tests run against an in-memory source
(`tests/support/dashboard.py`) and the page never sees boto3. An unknown job raises `JobNotFound`,
an action the job's state does not allow raises `OperationRefused` (both from `fusionfleet.errors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fusionfleet.errors import JobNotFound, OperationRefused
from fusionfleet.services.operations import JobDetail, JobSummary, WorkerView

__all__ = ["DashboardSource", "JobNotFound", "OperationRefused"]


class DashboardSource(Protocol):
    def list_jobs(self, state: str | None = None, limit: int = 20) -> Sequence[JobSummary]: ...
    def job(self, job_id: str) -> JobDetail: ...
    def workers(self) -> Sequence[WorkerView]: ...
    def cancel(self, job_id: str) -> str: ...
    def retry(self, job_id: str) -> str: ...
    def preview(self, job_id: str) -> bytes | None: ...
    def tenants(self) -> Sequence[dict[str, object]]: ...
