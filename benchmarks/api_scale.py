"""The tenant API at scale (issue 33 item 3): `GET /jobs` over 500 jobs and `GET /jobs/{id}/detail` of a
2,000-segment job, each timed and its storage requests counted, on LocalStack (host mode, over HTTP).

The farm's records are written as its parties write them — the job record, plan and summary as the
slicer does (`fusionfleet.jobs.summary.write`), each finished segment's record, output, attempt record and
summary mark as a worker does (the marks of the long job from 8 threads at once: conditional writes
racing on one object), the failed jobs' notice records as the state machine's claim does — and the
executions are real Step Functions executions (a small state machine that succeeds, fails or waits).
The API is the real route handler (`functions.api.routes.respond`) over the real read model.

The judge is independent of the code it judges: storage requests are counted by a botocore
`before-send` hook on the S3 client (every HTTP request that client sends, retries included), not by
the read model's own bookkeeping, and each page the fast path served is compared with the full read
of the same jobs (state, reason, counts). Before the measured rounds one pass pages through every job,
as any reader would: ended jobs are read in full once and their view recorded (the "cold" figures).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.provenance import write_results
from fleetctl.local import localstack
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.storage import S3Storage, put_json
from fusionfleet.jobs import summary
from fusionfleet.jobs.final_notice import STATE_MACHINE, NoticeRecord
from fusionfleet.jobs.ids import job_id as pipeline_job_id
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.runs import execution_name
from fusionfleet.messages import ObjectRef, SegmentAttempt, SegmentRecord
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_jobs import TenantJobs
from tests.support.api import call_api
from tests.support.fakes import FakeNotifier
from tests.support.jobs import api_config, job_context

ROOT = Path(__file__).resolve().parents[1]
MEDIA, WORK, TENANT = "bench-media", "bench-work", "acme"
GOALS = (
    Goal("list_worst_s", "<", 1.0, "GET /jobs of 500 jobs (default page): worst wall time, s"),
    Goal("list_storage_requests", "<", 20, "GET /jobs of 500 jobs: storage requests, most of any round"),
    Goal("detail_worst_s", "<", 1.0, "GET /jobs/{id}/detail of 2,000 segments: worst wall time, s"),
    Goal("detail_storage_requests", "<", 20, "GET /jobs/{id}/detail of 2,000 segments: storage requests"),
    Goal("views_disagreeing", "==", 0, "listed and detailed views that differ from a full read"),
    Goal("marks_lost", "==", 0, "segment marks of the long job lost by concurrent summary writes"),
)
MACHINE_DEFINITION = {
    "StartAt": "Ends",
    "States": {
        "Ends": {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.end", "StringEquals": "succeed", "Next": "Merged"},
                {"Variable": "$.end", "StringEquals": "fail", "Next": "JobFailed"},
            ],
            "Default": "Rendering",
        },
        "Merged": {"Type": "Pass", "Parameters": {"output.$": "$.output", "frames.$": "$.frames"}, "End": True},
        "JobFailed": {"Type": "Fail", "Error": "JobFailed", "Cause": "segment 3 failed: the engine crashed"},
        "Rendering": {"Type": "Wait", "Seconds": 3600, "End": True},
    },
}


class RequestCounter:
    """Every HTTP request a boto3 client sends (botocore's `before-send`), by operation."""

    def __init__(self, client: Any, service: str) -> None:
        self.count = 0
        self.operations: dict[str, int] = {}
        client.meta.events.register(f"before-send.{service}", self._sent)

    def _sent(self, event_name: str = "", **_: Any) -> None:
        self.count += 1
        name = event_name.rsplit(".", 1)[-1]  # before-send.s3.GetObject
        self.operations[name] = self.operations.get(name, 0) + 1

    def reset(self) -> None:
        self.count, self.operations = 0, {}


class Farm:
    """The buckets, the state machine and the records of `jobs` jobs, one of them `long_segments` long."""

    def __init__(self, aws: AwsTarget) -> None:
        self.s3, self.sfn = aws.client("s3"), aws.client("stepfunctions")
        self.storage = S3Storage(self.s3)
        for bucket in (MEDIA, WORK):
            self.s3.create_bucket(Bucket=bucket)
        self.machine = self.sfn.create_state_machine(
            name="bench-render", definition=json.dumps(MACHINE_DEFINITION),
            roleArn="arn:aws:iam::000000000000:role/bench-render",
        )["stateMachineArn"]  # fmt: skip

    def job(self, number: int, at: datetime, segments: int, end: str) -> tuple[str, str]:
        """One job, dropped as a manifest under the tenant's prefix: (its name, its pipeline id)."""
        name = f"{at:%Y%m%d-%H%M%S}-{number:06x}"
        key = layout.tenant_manifest_key(TENANT, name)
        etag = self.storage.put_bytes(MEDIA, key, json.dumps({"source": "a.jpg", "target": "b.mp4"}).encode())
        job_id = pipeline_job_id(MEDIA, key, etag)
        output = ObjectRef(bucket=MEDIA, key=f"tenants/{TENANT}/outputs/{name}.mp4")
        manifest = ObjectRef(bucket=MEDIA, key=key, etag=etag, size=40)
        context = job_context(
            job_id, frame_count=segments * 25, segment_count=segments, output=output, manifest=manifest,
            work_bucket=WORK, submitted_at=at.isoformat(), tenant=TENANT,
        )  # fmt: skip
        put_json(self.storage, WORK, layout.job_key(job_id), context.model_dump(mode="json"))
        plan = [Segment(i, i * 25, (i + 1) * 25, i * 40_000, (i + 1) * 40_000) for i in range(segments)]
        put_json(self.storage, WORK, layout.plan_key(job_id), [segment.to_dict() for segment in plan])
        summary.write(self.storage, WORK, summary.started(context), summary.submitted_ms(context.submitted_at))
        if end == "fail":
            notice = NoticeRecord(claimed_at=at.isoformat(), by=STATE_MACHINE, status="failed", error="JobFailed",
                                  reason="segment 3 failed: the engine crashed")  # fmt: skip
            put_json(self.storage, WORK, layout.notice_key(job_id), notice.model_dump(mode="json"))
        payload = {"end": end, "output": {"bucket": MEDIA, "key": output.key, "uri": f"s3://{MEDIA}/{output.key}"},
                   "frames": segments * 25}  # fmt: skip
        self.sfn.start_execution(
            stateMachineArn=self.machine, name=execution_name(job_id, 0), input=json.dumps(payload)
        )
        return name, job_id

    def segment(self, job_id: str, index: int, ok: bool, at: float) -> None:
        """What a worker leaves of one attempt: the attempt record, the output and segment record, its mark."""
        status: Literal["succeeded", "failed"] = "succeeded" if ok else "failed"
        attempt = SegmentAttempt(job_id=job_id, index=index, attempt=1, worker=f"w{index % 7}", status=status,
                                 started_at=at, finished_at=at + 30, engine_s=25.0 if ok else 0.0)  # fmt: skip
        put_json(self.storage, WORK, layout.attempt_record_key(job_id, index, 0, 1), attempt.model_dump())
        if ok:
            self.storage.put_bytes(WORK, layout.segment_key(job_id, index), b"mp4")
        record = SegmentRecord(job_id=job_id, index=index, status=status, attempt=1, worker=f"w{index % 7}",
                               engine_s=25.0 if ok else 0.0, frames=25 if ok else 0)  # fmt: skip
        put_json(self.storage, WORK, layout.segment_record_key(job_id, index), record.model_dump())
        change = (
            summary.segment_done(index, record.worker, 1, record.engine_s)
            if ok
            else summary.segment_failed(index, record.worker, 1)
        )
        summary.update(self.storage, WORK, job_id, change)


def timed(call: Callable[[], Any], counter: RequestCounter) -> tuple[Any, float, int]:
    counter.reset()
    began = time.perf_counter()
    answer = call()
    return answer, time.perf_counter() - began, counter.count


def shown(view: Any) -> tuple[Any, ...]:
    return (view.state, view.reason, view.segments.total, view.segments.done, view.segments.failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--long-segments", type=int, default=2000)
    parser.add_argument("--long-done", type=int, default=1500, help="of the long job's segments, those finished")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=4633)
    args = parser.parse_args()
    state = ROOT / ".fusionfleet" / "bench-api-scale"
    if localstack.port_in_use(args.port):
        raise SystemExit(f"port {args.port} is in use: choose another with --port")
    python, launcher = ROOT / ".venv-localstack" / "bin" / "python", ROOT / "infra" / "localstack" / "launch.py"
    process = localstack.start(
        python, launcher, args.port, state / "volume", state / "localstack.log", dict(os.environ)
    )
    endpoint = f"http://127.0.0.1:{args.port}"
    try:
        localstack.wait_healthy(endpoint, timeout_s=240, process=process)
        report = run(args, AwsTarget("us-east-1", endpoint, record_calls=False))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    verdicts = judge(GOALS, report["measures"])
    path = write_results("api-scale.json", {"benchmark": "api_scale", **recorded(verdicts), **report}, vars(args))
    print(f"\n{'request':<44} {'median s':>9} {'worst s':>8} {'requests':>9}")
    for row in report["rows"]:
        print(f"{row['request']:<44} {row['median_s']:>9.3f} {row['worst_s']:>8.3f} {row['storage_requests']:>9}")
    cold = report["cold_pass_over_every_job"]
    print(f"first pass over every job ({cold['pages']} pages of 200): {cold['seconds']} s, "
          f"{cold['storage_requests']} storage requests")  # fmt: skip
    return conclude(verdicts, path)


def run(args: argparse.Namespace, aws: AwsTarget) -> dict[str, Any]:
    farm = Farm(aws)
    began = time.monotonic()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    ends = ["succeed"] * (args.jobs - 1)
    for number in range(args.jobs - 1):
        if number >= args.jobs - 21:
            ends[number] = "run"  # the newest are running, as on a busy farm
        elif number % 40 == 7:
            ends[number] = "fail"
    with ThreadPoolExecutor(8) as pool:
        made = pool.map(
            lambda n: (*farm.job(n, start + timedelta(minutes=n), 8, ends[n]), ends[n]), range(args.jobs - 1)
        )
        small = list(made)
        long_name, long_job = farm.job(args.jobs, start + timedelta(minutes=args.jobs), args.long_segments, "run")
        work = [(job, i, end != "fail" or i != 3) for _n, job, end in small if end != "run" for i in range(8)]
        list(pool.map(lambda item: farm.segment(item[0], item[1], item[2], time.time()), work))
        # The long job's marks from 8 threads at once: conditional writes racing on one summary.
        list(pool.map(lambda i: farm.segment(long_job, i, i % 100 != 99, time.time()), range(args.long_done)))
    setup_s = time.monotonic() - began
    long_summary = summary.read(farm.storage, WORK, long_job)
    marks_lost = args.long_done - (len(long_summary.segments) if long_summary else 0)

    counter = RequestCounter(farm.s3, "s3")
    orchestrator = StepFunctions(farm.sfn)
    reader = JobReader(farm.storage, orchestrator, WORK, farm.machine)
    settings = api_config(MEDIA, WORK, farm.machine, "arn:aws:sns:us-east-1:000000000000:bench")
    jobs = TenantJobs(
        farm.storage, reader, Operations(farm.storage, orchestrator, FakeNotifier(), settings), MEDIA, WORK
    )

    def listed(query: str = "") -> Any:
        answer = call_api(jobs, "GET", "/jobs", tenant=TENANT, query=query)
        assert answer.status == 200, answer.body
        return answer.body

    def detailed() -> Any:
        answer = call_api(jobs, "GET", f"/jobs/{long_name}/detail", tenant=TENANT)
        assert answer.status == 200, answer.body
        return answer.body

    rows: list[dict[str, Any]] = []

    def measure(name: str, call: Callable[[], Any], rounds: int) -> Any:
        times, counts, answer = [], [], None
        for _ in range(rounds):
            answer, seconds, count = timed(call, counter)
            times.append(seconds)
            counts.append(count)
        rows.append({
            "request": name, "median_s": round(statistics.median(times), 4), "worst_s": round(max(times), 4),
            "storage_requests": max(counts), "rounds": rounds, "operations": dict(counter.operations),
        })  # fmt: skip
        return answer

    # Cold: the first page, and then every page, as the first reader after the jobs ended reads them.
    measure("cold: GET /jobs (first read)", listed, 1)
    cursor, pages = "", 0
    counter.reset()
    cold_began = time.perf_counter()
    while True:
        page = listed(f"limit=200&next={cursor}" if cursor else "limit=200")
        pages += 1
        if not page["next"]:
            break
        cursor = page["next"]
    cold_pass = {
        "pages": pages,
        "seconds": round(time.perf_counter() - cold_began, 3),
        "storage_requests": counter.count,
    }
    first = measure("GET /jobs (default page)", listed, args.rounds)
    measure("GET /jobs?limit=15&next=… (second page)", lambda: listed(f"next={first['next']}"), args.rounds)
    detail = measure(f"GET /jobs/{{id}}/detail ({args.long_segments} segments)", detailed, args.rounds)
    # What the read model did before summaries, for comparison: the listing from executions and each job's
    # records, and the detail that reads every attempt record (the operator's full `detail`).
    measure("before: list from executions (15 jobs)", lambda: reader._list_unindexed(None, 15, TENANT), 1)
    measure(f"before: full detail ({args.long_segments} segments)", lambda: reader.detail(long_job), 1)

    # The judge of the views: each listed job and the long job, against the full read of its facts.
    disagreeing: list[str] = []
    by_name = {name: job for name, job, _end in small} | {long_name: long_job}
    for shown_job in [*first["jobs"], detail["job"]]:
        job_id = by_name[shown_job["job_id"]]
        full = reader._view(reader.records.facts(job_id))
        full_shown = (full.state.public.value, full.reason, full.segments.total, full.segments.done,
                      full.segments.failed)  # fmt: skip
        fast_shown = (shown_job["state"], shown_job.get("reason", ""), shown_job["segments"]["total"],
                      shown_job["segments"]["done"], shown_job["segments"]["failed"])  # fmt: skip
        if full_shown != fast_shown:
            disagreeing.append(f"{shown_job['job_id']}: listed {fast_shown}, full read {full_shown}")
    by_row = {row["request"]: row for row in rows}
    list_row = by_row["GET /jobs (default page)"]
    detail_row = by_row[f"GET /jobs/{{id}}/detail ({args.long_segments} segments)"]
    return {
        "stack": "LocalStack (host mode) over HTTP, S3 and Step Functions; the API's route handler in process",
        "setup_s": round(setup_s, 1),
        # Every job read once at limit=200, right after they ended: the ended ones in full, once.
        "cold_pass_over_every_job": cold_pass,
        "jobs_on_first_page": len(first["jobs"]),
        "segments_on_detail_page": len(detail["segments"]),
        "disagreeing": disagreeing,
        "rows": rows,
        "measures": {
            "list_worst_s": list_row["worst_s"], "list_storage_requests": list_row["storage_requests"],
            "detail_worst_s": detail_row["worst_s"], "detail_storage_requests": detail_row["storage_requests"],
            "views_disagreeing": len(disagreeing), "marks_lost": marks_lost,
        },
    }  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
