"""An in-memory `DashboardSource` for the dashboard's tests: jobs, workers and previews held in dicts.

The records are the frozen dataclasses `fusionfleet.services.operations` returns; `cancel` and `retry` follow its
rules closely enough for the API (only a running job is cancelled, only failed or cancelled jobs are
retried, anything else is `OperationRefused`), and every call is recorded.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fusionfleet.errors import JobNotFound, OperationRefused
from fusionfleet.services.operations import JOB_STATES, AttemptRecord, JobDetail, JobSummary, SegmentView, WorkerView

NOW = datetime(2026, 12, 3, 9, 0, 0, tzinfo=UTC)
JPEG_BYTES = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00fake-frame\xff\xd9"


RETRYABLE = frozenset({"FAILED", "CANCELLED", "TIMED_OUT", "ABORTED"})


def sample_job(
    job_id: str = "clip-0123456789abcdef",
    state: str = "RUNNING",
    states: tuple[str, ...] = ("done", "done", "running", "pending"),
    age_s: float = 90,
    preview: bool = True,
) -> JobDetail:
    """A job whose segments are in `states` (the first running one on worker-1, attempt 2)."""
    frames = 48
    segments = [
        SegmentView(
            i, i * frames, (i + 1) * frames - 1, s, "worker-1" if s != "pending" else "", 2 if s == "running" else 1
        )
        for i, s in enumerate(states)
    ]
    started = NOW.timestamp() - age_s
    attempts = [
        AttemptRecord(i, 1, "worker-1", "succeeded" if s == "done" else "failed", started + i, started + i + 4.5, 3.25,
                      "" if s == "done" else "SegmentFailed", "" if s == "done" else "engine <b>crashed</b>")
        for i, s in enumerate(states) if s in ("done", "failed")
    ]  # fmt: skip
    summary = JobSummary(
        job_id=job_id,
        name=job_id.rsplit("-", 1)[0],
        state=state,
        priority="high",
        segments_done=states.count("done"),
        segments_failed=states.count("failed"),
        segments_total=len(states),
        submitted_at=NOW - timedelta(seconds=age_s),
        output=f"s3://media/outputs/{job_id}.mp4",
        reason="",
    )
    timings = {"slice_s": 1.5, "render_s": 12.25}
    return JobDetail(summary, segments, attempts, timings, f"work/{job_id}/preview.jpg" if preview else None)


class FakeDashboardSource:
    def __init__(
        self, jobs: list[JobDetail] | None = None, workers: list[WorkerView] | None = None, broken: bool = False
    ) -> None:
        self.jobs = {job.summary.job_id: job for job in jobs or []}
        self.worker_views = list(workers or [])
        self.previews = {job_id: JPEG_BYTES for job_id, job in self.jobs.items() if job.preview_key}
        self.broken = broken  # every call raises, as when the stack does not answer
        self.calls: list[tuple[str, ...]] = []

    def _check(self, *call: str) -> None:
        self.calls.append(call)
        if self.broken:
            raise ConnectionError("Could not connect to the endpoint URL")

    def _get(self, job_id: str) -> JobDetail:
        found = self.jobs.get(job_id)
        if found is None:
            raise JobNotFound(job_id)
        return found

    def list_jobs(self, state: str | None = None, limit: int = 20) -> list[JobSummary]:
        self._check("list_jobs", str(state), str(limit))
        if state is not None and state not in JOB_STATES:
            raise OperationRefused(f"unknown state {state!r}: one of {', '.join(JOB_STATES)}")
        summaries = sorted((job.summary for job in self.jobs.values()), key=lambda s: s.submitted_at or NOW)
        return [s for s in reversed(summaries) if state is None or s.state == state][:limit]

    def job(self, job_id: str) -> JobDetail:
        self._check("job", job_id)
        return self._get(job_id)

    def workers(self) -> list[WorkerView]:
        self._check("workers")
        return self.worker_views

    def cancel(self, job_id: str) -> str:
        self._check("cancel", job_id)
        job = self._get(job_id)
        if job.summary.state != "RUNNING":
            raise OperationRefused(f"job {job_id} is {job.summary.state}: it has ended, nothing to cancel")
        self.jobs[job_id] = replace(job, summary=replace(job.summary, state="CANCELLED"))
        return f"job {job_id} cancelled"

    def retry(self, job_id: str) -> str:
        self._check("retry", job_id)
        job = self._get(job_id)
        if job.summary.state not in RETRYABLE:
            raise OperationRefused(f"job {job_id} is {job.summary.state}: only failed or cancelled jobs are retried")
        self.jobs[job_id] = replace(job, summary=replace(job.summary, state="RUNNING"))
        return f"job {job_id} runs again"

    def tenants(self) -> list[dict[str, object]]:
        self._check("tenants")
        return [{"tenant": "acme", "running": [], "waiting": [], "month": "2026-12", "spent_usd": 0.0123,
                 "budget_usd": 0.05, "over_budget": False, "settings": {"max_running_jobs": 1}}]  # fmt: skip

    def preview(self, job_id: str) -> bytes | None:
        self._check("preview", job_id)
        self._get(job_id)
        return self.previews.get(job_id)
