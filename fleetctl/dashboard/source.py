"""What the dashboard reads and does: a small protocol that `fleetctl.operations.Operations` satisfies.

The server depends on this protocol only, so its tests run against an in-memory source
(`tests/support/dashboard.py`) and the page never sees boto3.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class JobNotFound(LookupError):
    """No job has this id."""


class DashboardSource(Protocol):
    def list_jobs(self, state: str | None = None, limit: int = 20) -> Sequence[Any]: ...
    def job(self, job_id: str) -> Any: ...
    def workers(self) -> Sequence[Any]: ...
    def cancel(self, job_id: str) -> str: ...
    def retry(self, job_id: str) -> str: ...
    def preview(self, job_id: str) -> bytes | None: ...
