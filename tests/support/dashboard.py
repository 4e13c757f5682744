"""An in-memory `DashboardSource` for the dashboard's tests: jobs, workers and previews held in dicts.

The records are the read model's frozen views (`fusionfleet.jobs.views`); `cancel` and `retry` follow its
rules (`fusionfleet.jobs.states`: only what a job's state allows, anything else is `OperationRefused`),
and every call is recorded.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fusionfleet.errors import JobNotFound, OperationRefused
from fusionfleet.fleet.workers import WorkerView
from fusionfleet.jobs.states import ALLOWED, Action, JobState, SegmentState, allowed, parse_state, refusal
from fusionfleet.jobs.views import AttemptView, JobDetail, JobView, SegmentCounts, SegmentView

NOW = datetime(2026, 12, 3, 9, 0, 0, tzinfo=UTC)
JPEG_BYTES = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00fake-frame\xff\xd9"


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
            i, i * frames, (i + 1) * frames - 1, SegmentState(s), "worker-1" if s != "pending" else "",
            2 if s == "running" else 1,
        )
        for i, s in enumerate(states)
    ]  # fmt: skip
    started = NOW.timestamp() - age_s
    attempts = [
        AttemptView(i, 1, "worker-1", "succeeded" if s == "done" else "failed", started + i, started + i + 4.5, 3.25,
                      "" if s == "done" else "SegmentFailed", "" if s == "done" else "engine <b>crashed</b>")
        for i, s in enumerate(states) if s in ("done", "failed")
    ]  # fmt: skip
    job_state = JobState(state)
    view = JobView(
        job_id=job_id,
        name=job_id.rsplit("-", 1)[0],
        state=job_state,
        priority="high",
        segments=SegmentCounts(len(states), states.count("done"), states.count("failed")),
        submitted_at=NOW - timedelta(seconds=age_s),
        output=f"s3://media/outputs/{job_id}.mp4",
        actions=ALLOWED[job_state],
    )
    timings = {"slice_s": 1.5, "render_s": 12.25}
    return JobDetail(view, segments, attempts, timings, f"work/{job_id}/preview.jpg" if preview else None)


class FakeDashboardSource:
    def __init__(
        self, jobs: list[JobDetail] | None = None, workers: list[WorkerView] | None = None, broken: bool = False
    ) -> None:
        self.jobs = {job.job.job_id: job for job in jobs or []}
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

    def list_jobs(self, state: str | None = None, limit: int = 20) -> list[JobView]:
        self._check("list_jobs", str(state), str(limit))
        return self._listed(state)[:limit]

    def _listed(self, state: str | None) -> list[JobView]:
        wanted = parse_state(state) if state is not None else None
        if state is not None and wanted is None:
            raise OperationRefused(f"unknown state {state!r}: one of {', '.join(JobState)}")
        views = sorted((job.job for job in self.jobs.values()), key=lambda view: view.submitted_at or NOW)
        return [view for view in reversed(views) if wanted is None or view.state is wanted]

    def list_page(self, state: str | None = None, limit: int = 20, after: str = "") -> tuple[list[JobView], str | None]:
        """`list_jobs` paged by position: `next` is the index of the page's first job after this one."""
        self._check("list_page", str(state), str(limit), after)
        views = self._listed(state)
        start = int(after or 0)
        more = start + limit < len(views)
        return views[start : start + limit], str(start + limit) if more else None

    def job(self, job_id: str) -> JobDetail:
        self._check("job", job_id)
        return self._get(job_id)

    def workers(self) -> list[WorkerView]:
        self._check("workers")
        return self.worker_views

    def cancel(self, job_id: str) -> str:
        self._check("cancel", job_id)
        self._act(job_id, Action.CANCEL, JobState.CANCELLED)
        return f"job {job_id} cancelled"

    def retry(self, job_id: str) -> str:
        self._check("retry", job_id)
        self._act(job_id, Action.RETRY, JobState.RUNNING)
        return f"job {job_id} runs again"

    def _act(self, job_id: str, action: Action, then: JobState) -> None:
        job = self._get(job_id)
        state = job.job.state
        if not allowed(state, action):
            raise OperationRefused(f"job {job_id} is {state}: {refusal(state, action)}")
        self.jobs[job_id] = replace(job, job=replace(job.job, state=then, actions=ALLOWED[then]))

    def tenants(self) -> list[dict[str, object]]:
        self._check("tenants")
        return [{"tenant": "acme", "running": [], "waiting": [], "month": "2026-12", "spent_usd": 0.0123,
                 "budget_usd": 0.05, "over_budget": False, "settings": {"max_running_jobs": 1}}]  # fmt: skip

    def preview(self, job_id: str) -> bytes | None:
        self._check("preview", job_id)
        self._get(job_id)
        return self.previews.get(job_id)
