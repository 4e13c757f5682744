"""The farm's render of a target: a local stack of its own (LocalStack over HTTP, the slicer runner, the
Map, warm `facefusion` workers, the merge, SNS) started as the e2e tests start it, the job dropped as a
user drops one (media, then a manifest under jobs/), the output fetched from the notice's key.

The workers run FaceFusion from the harness's folder (its stand-in models) through the warm engine,
the default; the plan (how many segments) is read back from the work bucket.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from fleetctl.harness.facefusion import Harness
from fleetctl.local.state import LocalState
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.environment.settings import FUSIONFLEET_FACEFUSION_HOME, FUSIONFLEET_FACEFUSION_PYTHON
from fusionfleet.jobs.ids import job_id

ROOT = Path(__file__).resolve().parents[2]
UP_TIMEOUT_S = 600.0
DOWN_TIMEOUT_S = 120.0
JOB_TIMEOUT_S = 3600.0


class FarmFailed(Exception):
    """The stack would not start."""


@dataclass
class FarmRun:
    job_id: str
    status: str  # the notice's: succeeded, failed, rejected
    notice: dict[str, Any]
    segments: int
    wall_s: float
    output: Path | None = None
    reason: str = ""
    segment_records: list[dict[str, Any]] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Farm:
    """A local stack whose render workers run the harness's FaceFusion; a context manager."""

    def __init__(self, harness: Harness, state_dir: Path, workers: int = 2) -> None:
        self.harness = harness
        self.state_dir = state_dir
        self.workers = workers
        self.port = free_port()
        self.aws: AwsTarget | None = None
        self.resources: StackResources | None = None
        self._inbox = ""
        self._notices: dict[str, dict[str, Any]] = {}
        self._count = 0
        self._owned = True  # started here, so stopped here

    @classmethod
    def running(cls, harness: Harness, state_dir: Path) -> Farm:
        """A farm someone else started (an e2e test's stack whose workers run this harness): used, not stopped."""
        farm = cls(harness, state_dir)
        farm._owned = False
        farm._attach()
        return farm

    def _attach(self) -> None:
        state = LocalState.load(self.state_dir / "state.json")
        if state is None:
            raise FarmFailed(f"no local stack in {self.state_dir}")
        self.aws = AwsTarget(region=state.region, endpoint_url=state.endpoint)
        self.resources = StackResources.from_outputs(state.outputs)
        self._inbox = self._subscribe()

    def _cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "fleetctl.cli", "local", *args, "--state-dir", str(self.state_dir)]

    def __enter__(self) -> Farm:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **self.harness.env,
            FUSIONFLEET_FACEFUSION_HOME: str(self.harness.home),
            FUSIONFLEET_FACEFUSION_PYTHON: self.harness.python,
        }
        up = subprocess.run(
            [*self._cli("up", "--workers", str(self.workers), "--port", str(self.port)), "--default-engine", "copy",
             "--no-backups"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False,
        )  # fmt: skip
        if up.returncode != 0 or LocalState.load(self.state_dir / "state.json") is None:
            self.__exit__(None, None, None)
            raise FarmFailed(f"local up failed ({up.returncode}):\n{up.stdout[-2000:]}\n{up.stderr[-2000:]}")
        self._attach()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._owned:
            subprocess.run(self._cli("down"), cwd=ROOT, capture_output=True, timeout=DOWN_TIMEOUT_S, check=False)

    def client(self, service: str) -> Any:
        assert self.aws is not None, "the farm is not up"
        return self.aws.client(service)

    def _subscribe(self) -> str:
        assert self.resources is not None
        sqs = self.client("sqs")
        url = str(sqs.create_queue(QueueName=f"parity-inbox-{time.time_ns()}")["QueueUrl"])
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.client("sns").subscribe(TopicArn=self.resources.topic_arn, Protocol="sqs", Endpoint=arn)
        return url

    def _notice(self, job: str, timeout_s: float) -> dict[str, Any]:
        sqs = self.client("sqs")
        deadline = time.monotonic() + timeout_s
        while job not in self._notices and time.monotonic() < deadline:
            for message in sqs.receive_message(QueueUrl=self._inbox, WaitTimeSeconds=10).get("Messages", []):
                sqs.delete_message(QueueUrl=self._inbox, ReceiptHandle=message["ReceiptHandle"])
                notice: dict[str, Any] = json.loads(json.loads(message["Body"])["Message"])
                self._notices[str(notice.get("job_id"))] = notice
        if job not in self._notices:
            raise TimeoutError(f"no notice for {job} within {timeout_s:.0f} s; the stack's logs: {self.logs_dir}")
        return self._notices[job]

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    def render(
        self,
        sources: Sequence[Path],
        target: Path,
        options: Mapping[str, Any],
        output: Path,
        name: str = "parity",
        plan: Mapping[str, Any] | None = None,
        faces: Sequence[Mapping[str, Any]] = (),
    ) -> FarmRun:
        """Drop the job, wait for its notice, fetch its output (when it succeeded) to `output`.

        `plan`: the manifest's own plan ({"segments": N} or {"cut_at": [...]}); the slicer's otherwise.
        `faces`: mappings of people whose `source` lists indices into `sources` (then no `source`)."""
        assert self.resources is not None
        self._count += 1
        prefix = f"inputs/{name}-{self._count}"
        s3, bucket = self.client("s3"), self.resources.media_bucket
        keys = []
        for index, source in enumerate(sources):
            key = f"{prefix}/source-{index}{source.suffix}"
            s3.upload_file(str(source), bucket, key)
            keys.append(key)
        target_key = f"{prefix}/{target.name}"
        s3.upload_file(str(target), bucket, target_key)
        manifest = {"version": 1, "source": keys, "target": target_key, "engine": "facefusion", "priority": "high",
                    "output": f"outputs/{name}-{self._count}{target.suffix}", "options": dict(options)}  # fmt: skip
        if plan:
            manifest["plan"] = dict(plan)
        if faces:
            del manifest["source"]
            manifest["faces"] = [{**face, "source": [keys[index] for index in face["source"]]} for face in faces]
        manifest_key = f"jobs/{name}-{self._count}.json"
        began = time.monotonic()
        etag = s3.put_object(Bucket=bucket, Key=manifest_key, Body=json.dumps(manifest).encode())["ETag"]
        job = job_id(bucket, manifest_key, etag)
        notice = self._notice(job, JOB_TIMEOUT_S)
        wall_s = time.monotonic() - began
        status = str(notice.get("status"))
        run = FarmRun(job, status, notice, self._segments(job), wall_s, reason=str(notice.get("reason") or ""))
        if status == "succeeded":
            where = notice["output"]
            s3.download_file(where["bucket"], where["key"], str(output))
            run.output = output
        elif not run.reason:
            run.reason = json.dumps({key: notice[key] for key in notice if key not in ("output",)})[:1500]
        return run

    def _segments(self, job: str) -> int:
        assert self.resources is not None
        try:
            body = self.client("s3").get_object(Bucket=self.resources.work_bucket, Key=layout.plan_key(job))["Body"]
        except Exception:  # a job refused before planning has no plan
            return 0
        return len(json.loads(body.read()))

    def worker_logs(self) -> str:
        return "\n".join(path.read_text(errors="replace")[-4000:] for path in sorted(self.logs_dir.glob("worker*.log")))
