"""In-memory fakes behind the read model and `Operations`, with helpers that lay out jobs as the farm keeps them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.reader import JobReader
from fusionfleet.messages import SegmentAttempt, SegmentRecord
from fusionfleet.services.operations import Operations
from tests.support.fakes import Clock, FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import MEDIA, WORK, job_context

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:render"
RESOURCES = StackResources(
    stage="local", media_bucket=MEDIA, work_bucket=WORK, ingest_queue_url="q/ingest", ingest_dlq_url="q/ingest-dlq",
    render_queue_urls=("q/high", "q/normal", "q/low"), render_dlq_url="q/render-dlq", merge_queue_url="q/merge",
    merge_dlq_url="q/merge-dlq", topic_arn="topic", state_machine_arn=MACHINE,
)  # fmt: skip
NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


class Farm:
    def __init__(self) -> None:
        self.storage, self.orchestrator, self.notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
        self.clock = Clock(NOW.timestamp())
        self.ops = Operations(self.storage, self.orchestrator, self.notifier, RESOURCES, clock=self.clock)
        self.reader = JobReader(self.storage, self.orchestrator, WORK, MACHINE)

    def job(
        self,
        job_id: str,
        status: str,
        minutes_ago: float = 10,
        segments: int = 4,
        done: tuple[int, ...] = (),
        failed: tuple[int, ...] = (),
        error: str | None = None,
    ) -> str:
        submitted = NOW - timedelta(minutes=minutes_ago)
        context = job_context(
            job_id, frame_count=segments * 25, segment_count=segments, submitted_at=submitted.isoformat()
        )
        self.storage.put_json(WORK, layout.job_key(job_id), context.model_dump(mode="json"))
        plan = [Segment(i, i * 25, (i + 1) * 25, i * 1_000_000, (i + 1) * 1_000_000) for i in range(segments)]
        self.storage.put_json(WORK, layout.plan_key(job_id), [segment.to_dict() for segment in plan])
        for index in done:
            self.segment_done(job_id, index)
        for index in failed:
            record = SegmentRecord(job_id=job_id, index=index, status="failed", error="EngineCrashed", reason="boom")
            self.storage.put_json(WORK, layout.segment_record_key(job_id, index), record.model_dump())
        arn = execution_arn(MACHINE, job_id)
        stopped = None if status == "RUNNING" else submitted + timedelta(minutes=1)
        self.orchestrator.states[arn] = Execution(
            arn, status, submitted, stopped, error=error, cause="why" if error else None,
            input={"job": context.model_dump(mode="json"), "plan": {"bucket": WORK, "key": layout.plan_key(job_id)},
                   "limits": {"render_heartbeat_s": 100}},
        )  # fmt: skip
        return arn

    def segment_done(self, job_id: str, index: int) -> None:
        self.storage.put_bytes(WORK, layout.segment_key(job_id, index), b"mp4")
        record = SegmentRecord(job_id=job_id, index=index, status="succeeded", frames=25, worker="w1", attempt=1)
        self.storage.put_json(WORK, layout.segment_record_key(job_id, index), record.model_dump())

    def attempt(self, job_id: str, index: int, attempt: int, status: str, run: int = 0, worker: str = "w1") -> None:
        record = SegmentAttempt(
            job_id=job_id, index=index, run=run, attempt=attempt, worker=worker, status=status,  # type: ignore[arg-type]
            started_at=NOW.timestamp() + attempt, finished_at=0.0 if status == "running" else NOW.timestamp() + 9,
            engine_s=1.5 if status == "succeeded" else 0.0, error="EngineCrashed" if status == "failed" else "",
        )  # fmt: skip
        self.storage.put_json(WORK, layout.attempt_record_key(job_id, index, run, attempt), record.model_dump())
