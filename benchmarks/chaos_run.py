"""A chaos run on the local stack: submit good, bad and poison jobs, inject faults (kills, stops,
engine faults, duplicate events) until the time limit, collect every notice, and report what happened
(benchmarks.chaos is its entry point and its goals)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from benchmarks.chaos_model import BAD_JOBS, ChaosConfig, Fault, Job, spread
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fleetctl.samples import grace_hopper_path, write_video
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.orchestrator import execution_arn
from fusionfleet.jobs.ids import job_id
from fusionfleet.jobs.manifest import PRIORITIES
from fusionfleet.jobs.plan import plan_segments


class Chaos:
    def __init__(
        self, stack: LocalStack, options: UpOptions, faults_file: Path, media: Path, config: ChaosConfig
    ) -> None:
        self.stack = stack
        self.options = options
        self.faults_file = faults_file
        self.media = media
        self.config = config
        self.random = random.Random(config.seed)
        state = stack.load()
        assert state is not None, "the local stack is not running"
        self.aws = AwsTarget(state.region, state.endpoint)
        self.resources = StackResources.from_outputs(state.outputs)
        self.s3 = self.aws.client("s3")
        self.sqs = self.aws.client("sqs")
        self.jobs: dict[str, Job] = {}
        self.faults: list[Fault] = []
        self.rules: list[dict[str, Any]] = []
        self.inbox = self._subscribe()
        self.reference: dict[str, str] = {}
        self.samples: list[tuple[float, int, int]] = []
        self.faults_stopped_s = 0.0
        self.references_s = 0.0
        self.reference_files: dict[str, str] = {}
        self.file_digests: dict[str, str] = {}
        self.poisoned: dict[str, int] = {}  # job id → its poison segment

    # ------------------------------------------------------------------ setup
    def _subscribe(self) -> str:
        url = str(self.sqs.create_queue(QueueName=f"chaos-inbox-{time.time_ns()}")["QueueUrl"])
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.aws.client("sns").subscribe(TopicArn=self.resources.topic_arn, Protocol="sqs", Endpoint=arn)
        return url

    def _write_rules(self) -> None:
        self.faults_file.write_text(json.dumps(self.rules))

    def prepare_inputs(self) -> list[str]:
        bucket = self.resources.media_bucket
        self.s3.upload_file(str(grace_hopper_path()), bucket, "inputs/chaos/face.jpg")
        names = []
        width, height = self.config.size
        lengths = [*self.config.seconds, *([self.config.long_seconds] if self.config.long_jobs else [])]
        for seconds in lengths:
            name = f"clip-{seconds:g}s.mp4"
            path = self.media / f"{width}x{height}-{name}"
            if not path.exists():
                write_video(path, seconds=seconds, fps=25, width=width, height=height, with_stamp=True)
            self.s3.upload_file(str(path), bucket, f"inputs/chaos/{name}")
            names.append(name)
        notes = self.media / "notes.mp4"
        notes.write_text("not a video\n")
        self.s3.upload_file(str(notes), bucket, "inputs/chaos/notes.mp4")
        return names

    @property
    def long_target(self) -> str | None:
        """The long clip's input name (the soak's), or None."""
        return f"clip-{self.config.long_seconds:g}s.mp4" if self.config.long_jobs else None

    def manifest(self, name: str, target: str, priority: str, engine: str = "copy") -> dict[str, Any]:
        manifest = {"version": 1, "source": ["inputs/chaos/face.jpg"], "target": f"inputs/chaos/{target}",
                    "engine": engine, "priority": priority, "output": f"outputs/chaos/{name}.mp4"}  # fmt: skip
        if engine == "classic":
            manifest["quality"] = "balanced"
        return manifest

    def submit(
        self, name: str, body: bytes, target: str | None, expect_failure: str | None = None, engine: str = "copy"
    ) -> Job:
        key = f"jobs/chaos/{name}.json"
        etag = self.s3.put_object(Bucket=self.resources.media_bucket, Key=key, Body=body)["ETag"]
        job = Job(name, job_id(self.resources.media_bucket, key, etag), target, engine, expect_failure,
                  time.monotonic())  # fmt: skip
        self.jobs[job.job_id] = job
        return job

    def choose(self, index: int, targets: list[str]) -> tuple[str, str]:
        """(target, engine) of good job `index`: the long clips first (the backlog), then the short ones."""
        short = targets[: len(self.config.seconds)]
        if index < self.config.long_jobs:
            return targets[-1], "classic"
        engine = "classic" if (index * 7919) % 100 < self.config.classic_share * 100 else "copy"
        return short[index % len(short)], engine

    def submit_good(self, index: int, targets: list[str]) -> Job:
        target, engine = self.choose(index, targets)
        priority = PRIORITIES[index % len(PRIORITIES)]
        name = f"job-{index:03d}"
        body = json.dumps(self.manifest(name, target, priority, engine)).encode()
        key = f"jobs/chaos/{name}.json"
        planned = job_id(self.resources.media_bucket, key, hashlib.md5(body).hexdigest())
        if self.is_poison(index):
            segment = self.plant_poison(planned, target)
            return self.submit(name, body, target, f"segment {segment} ", engine=engine)
        if self.random.random() < self.config.engine_fault_share:
            self.plan_engine_fault(planned, target)
        return self.submit(name, body, target, engine=engine)

    def is_poison(self, index: int) -> bool:
        return self.config.long_jobs <= index < self.config.long_jobs + self.config.poison_jobs

    def plant_poison(self, job: str, target: str) -> int:
        """A segment whose engine crashes on every attempt; its first crash is the fault (timed in report)."""
        seconds = float(target.removeprefix("clip-").removesuffix("s.mp4"))
        segment = self.random.choice(plan_segments(round(seconds * 25), Fraction(25)))
        self.rules.append({"job": job, "segment": segment.index, "action": "crash", "at_frame": 0})
        self._write_rules()
        self.poisoned[job] = segment.index
        return segment.index

    def first_crash(self, job: str) -> float | None:
        """When the poison segment's first attempt ended, on this run's monotonic clock (from its records)."""
        prefix = layout.segments_prefix(job)
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.resources.work_bucket, Prefix=prefix)
        ended = []
        for item in (item for page in pages for item in page.get("Contents", [])):
            parsed = layout.parse_attempt_record_key(item["Key"])
            if parsed is None or parsed.index != self.poisoned[job]:
                continue
            body = self.s3.get_object(Bucket=self.resources.work_bucket, Key=item["Key"])["Body"].read()
            record = json.loads(body)
            if record.get("status") == "failed" and record.get("finished_at"):
                ended.append(float(record["finished_at"]))
        if not ended:
            return None
        return time.monotonic() - (time.time() - min(ended))

    def plan_engine_fault(self, job: str, target: str) -> None:
        """Sabotage one segment's first attempt: written before the job exists, so it cannot be missed."""
        seconds = float(target.removeprefix("clip-").removesuffix("s.mp4"))
        segments = plan_segments(round(seconds * 25), Fraction(25))
        segment = self.random.choice(segments)
        action = self.random.choice(["fail", "crash", "slow"])
        at_frame = self.random.randrange(segment.frame_count)
        rule = {"job": job, "segment": segment.index, "attempt": 1, "action": action,
                "at_frame": at_frame, "seconds": self.random.uniform(2, 5)}  # fmt: skip
        self.rules.append(rule)
        self._write_rules()
        self.faults.append(Fault(f"engine-{action}", time.monotonic(), job, f"segment {segment.index}"))

    def submit_bad(self, index: int) -> Job:
        kind = list(BAD_JOBS)[index % len(BAD_JOBS)]
        name = f"bad-{index:03d}-{kind}"
        manifest = self.manifest(name, "notes.mp4", "normal")
        if kind == "bad-json":
            body = b'{"version": 1, "source": ['
        elif kind == "unknown-option":
            manifest.update(target="inputs/chaos/clip-3s.mp4", options={"face_swaper_model": "x"})
            body = json.dumps(manifest).encode()
        elif kind == "missing-target":
            manifest.update(target="inputs/chaos/nowhere.mp4")
            body = json.dumps(manifest).encode()
        else:
            body = json.dumps(manifest).encode()
        return self.submit(name, body, None, BAD_JOBS[kind])

    # ------------------------------------------------------------------ observing
    def collect(self) -> None:
        messages = self.sqs.receive_message(QueueUrl=self.inbox, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        )
        for message in messages:
            notice = json.loads(json.loads(message["Body"])["Message"])
            job = self.jobs.get(str(notice.get("job_id")))
            if job is not None:
                job.notices.append(notice)
                job.first_final_at = job.first_final_at or time.monotonic()
            self.sqs.delete_message(QueueUrl=self.inbox, ReceiptHandle=message["ReceiptHandle"])

    def open_jobs(self) -> list[Job]:
        return [job for job in self.jobs.values() if not job.notices]

    def output_digest(self, job: Job) -> str:
        """A digest of the output's video and audio packets: equal outputs are byte-for-byte equal streams."""
        path = self.media / f"out-{job.job_id}.mp4"
        self.s3.download_file(self.resources.media_bucket, f"outputs/chaos/{job.name}.mp4", str(path))
        digests = {"video": hashlib.sha256(), "audio": hashlib.sha256()}
        with av.open(str(path)) as container:
            for packet in container.demux():
                if packet.size:
                    digests[packet.stream.type].update(bytes(packet))
        with av.open(str(path)) as container:
            frames = sum(1 for _ in container.decode(video=0))
        self.file_digests[job.job_id] = hashlib.sha256(path.read_bytes()).hexdigest()
        return f"video {digests['video'].hexdigest()[:16]} audio {digests['audio'].hexdigest()[:16]} frames {frames}"

    # ------------------------------------------------------------------ faults
    def worker_names(self) -> list[str]:
        state = self.stack.load()
        return [p.name for p in state.processes if p.role == "worker" and p.alive()] if state else []

    def job_on(self, worker: str) -> str | None:
        """The job a worker is working on now, read from its log (its last attempt not yet done)."""
        log = (self.stack.paths.logs / f"{worker}.log").read_text(errors="replace").splitlines()
        for line in reversed(log[-200:]):
            if ": attempt " in line and " of " in line:
                return line.split(" of ", 1)[1].split(":", 1)[0]
            if line.endswith(": done") or "released for another worker" in line:
                return None
        return None

    def signal_worker(self, number: int, kind: str) -> None:
        names = self.worker_names()
        if not names:
            return
        name = self.random.choice(names)
        state = self.stack.load()
        assert state is not None
        (process,) = [p for p in state.processes if p.name == name]
        job = self.job_on(name)
        try:
            os.killpg(process.pid, number)
        except ProcessLookupError:
            return
        self.faults.append(Fault(kind, time.monotonic(), job, name))

    def duplicate_event(self) -> None:
        job = self.random.choice(list(self.jobs.values()))
        key = f"jobs/chaos/{job.name}.json"
        if self.random.random() < 0.5:
            # The same manifest uploaded again, unchanged.
            body = self.s3.get_object(Bucket=self.resources.media_bucket, Key=key)["Body"].read()
            self.s3.put_object(Bucket=self.resources.media_bucket, Key=key, Body=body)
            self.faults.append(Fault("duplicate-upload", time.monotonic(), job.job_id))
        else:
            s3 = {"bucket": {"name": self.resources.media_bucket}, "object": {"key": key.replace(" ", "+")}}
            event = {"Records": [{"eventName": "ObjectCreated:Put", "s3": s3}]}
            self.sqs.send_message(QueueUrl=self.resources.ingest_queue_url, MessageBody=json.dumps(event))
            self.faults.append(Fault("duplicate-event", time.monotonic(), job.job_id))

    def one_fault(self) -> None:
        roll = self.random.random()
        if roll < 0.4:
            self.signal_worker(signal.SIGKILL, "kill-9")
        elif roll < 0.7:
            self.signal_worker(signal.SIGTERM, "sigterm")
        else:
            self.duplicate_event()

    # ------------------------------------------------------------------ the run
    def run(self) -> dict[str, Any]:
        began = self.began = time.monotonic()
        self.rules = []
        self._write_rules()
        targets = self.prepare_inputs()
        # Undisturbed runs first: the reference output of each input and engine that the run uses.
        good_count = self.config.jobs - self.config.bad_jobs
        wanted = sorted({self.choose(index, targets) for index in range(good_count)})
        for number, (target, engine) in enumerate(wanted):
            name = f"reference-{number}"
            body = json.dumps(self.manifest(name, target, "high", engine)).encode()
            job = self.submit(name, body, target, engine=engine)
            while not job.notices and time.monotonic() - began < self.config.time_limit_s:
                self.collect()
            if not job.notices or job.notices[0].get("status") != "succeeded":
                raise RuntimeError(f"the undisturbed run of {target} ({engine}) did not succeed: {job.notices}")
            self.reference[f"{target}/{engine}"] = self.output_digest(job)
            self.reference_files[f"{target}/{engine}"] = self.file_digests[job.job_id]
            del self.jobs[job.job_id]
        self.references_s = time.monotonic() - began
        chaos_began = time.monotonic()
        good = self.config.jobs - self.config.bad_jobs
        order = [("good", i) for i in range(good)] + [("bad", i) for i in range(self.config.bad_jobs)]
        self.random.shuffle(order)
        next_fault = time.monotonic() + self.random.uniform(*self.config.fault_interval_s)
        deadline = chaos_began + self.config.time_limit_s
        while time.monotonic() < deadline:
            if order and self.random.random() < 0.6:
                kind, index = order.pop()
                if kind == "good":
                    self.submit_good(index, targets)
                else:
                    self.submit_bad(index)
            if time.monotonic() >= next_fault and (order or self.open_jobs()):
                self.one_fault()
                next_fault = time.monotonic() + self.random.uniform(*self.config.fault_interval_s)
            self.collect()
            self.sample(time.monotonic() - chaos_began)
            # Replace dead workers after a moment, as ECS does.
            if len(self.worker_names()) < self.config.workers:
                self.stack.respawn(self.options)
            if not order and not self.open_jobs():
                break
        # Past the time limit no fault is injected any more, but every open job still gets the time
        # to finish: a job is lost only if it never ends, not if the run was too short for it.
        self.faults_stopped_s = time.monotonic() - chaos_began
        drain_until = time.monotonic() + self.config.drain_s
        while self.open_jobs() and time.monotonic() < drain_until:
            self.collect()
            self.sample(time.monotonic() - chaos_began)
            if len(self.worker_names()) < self.config.workers:
                self.stack.respawn(self.options)
        # Let late duplicates show themselves before counting.
        settle = time.monotonic() + 10
        while time.monotonic() < settle:
            self.collect()
        return self.report(time.monotonic() - chaos_began)

    def sample(self, at_s: float) -> None:
        """Every few seconds: render segments waiting (not in flight) and LocalStack's thread count."""
        if at_s - getattr(self, "_last_sample", -10.0) < 5.0:
            return
        self._last_sample = at_s
        waiting = 0
        for url in self.resources.render_queue_urls:
            attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            waiting += int(attributes["Attributes"]["ApproximateNumberOfMessages"])
        self.samples.append((round(at_s, 1), waiting, self.emulator_threads() or 0))

    def segment_renders(self) -> dict[str, int]:
        """How many times each (job, segment) was rendered to the end and uploaded, from the worker logs."""
        counts: dict[str, int] = {}
        for log in self.stack.paths.logs.glob("*.log"):
            for line in log.read_text(errors="replace").splitlines():
                if " frames in " in line and "(engine " in line and "segment " in line:
                    what = line.split("] ", 1)[-1].split(":", 1)[0]
                    if any(job_id in what for job_id in self.jobs):
                        counts[what] = counts.get(what, 0) + 1
        return counts

    def execution_status(self, job: Job) -> str:
        """The job's execution status, or NONE when it never started (a rejected job, or a lost one)."""
        sfn = self.aws.client("stepfunctions")
        try:
            return str(
                sfn.describe_execution(executionArn=execution_arn(self.resources.state_machine_arn, job.job_id))[
                    "status"
                ]
            )
        except sfn.exceptions.ExecutionDoesNotExist:
            return "NONE"

    def emulator_threads(self) -> int | None:
        """LocalStack's thread count: its Step Functions emulation holds threads per waiting task."""
        state = self.stack.load()
        for process in state.by_role("localstack") if state else []:
            try:
                for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                    if line.startswith("Threads:"):
                        return int(line.split()[1])
            except OSError:
                return None
        return None

    def report(self, wall_s: float) -> dict[str, Any]:
        succeeded = failed_ok = failed_unexpected = lost = unfinished = duplicates = differing = byte_identical = 0
        long_succeeded = 0
        problems: list[str] = []
        for job in self.jobs.values():
            statuses = [notice.get("status") for notice in job.notices]
            if not job.notices:
                status = self.execution_status(job)
                if status == "RUNNING":
                    # Still rendering when the run's time was up: not lost (its execution is alive and
                    # the watchdog watches it), but not a result either; reported on its own line.
                    unfinished += 1
                    problems.append(f"{job.name}: still running when the run ended")
                else:
                    lost += 1
                    problems.append(f"{job.name}: no final notification (execution {status})")
                continue
            if len(job.notices) > 1:
                duplicates += 1
                problems.append(f"{job.name}: {len(job.notices)} final notifications {statuses}")
            notice = job.notices[0]
            if job.expect_failure is not None:
                if notice.get("status") == "failed" and job.expect_failure in str(notice.get("reason")):
                    failed_ok += 1
                else:
                    failed_unexpected += 1
                    problems.append(f"{job.name}: expected a failure naming {job.expect_failure!r}, got {notice}")
            elif notice.get("status") == "succeeded":
                succeeded += 1
                long_succeeded += job.target == self.long_target
                assert job.target is not None
                streams = self.output_digest(job)
                reference = f"{job.target}/{job.engine}"
                byte_identical += self.file_digests[job.job_id] == self.reference_files[reference]
                if streams == self.reference[reference]:
                    (self.media / f"out-{job.job_id}.mp4").unlink(missing_ok=True)
                else:
                    differing += 1
                    problems.append(
                        f"{job.name}: output differs from the undisturbed run: {streams} "
                        f"against {self.reference[reference]}"
                    )
            else:
                failed_unexpected += 1
                problems.append(f"{job.name}: failed under chaos: {notice.get('reason')}")
        # A poison segment's fault is its first crash (the records say when), not its job's submission.
        for job_id_, segment in self.poisoned.items():
            crashed = self.first_crash(job_id_)
            if crashed is not None:
                self.faults.append(Fault("engine-poison", crashed, job_id_, f"segment {segment}, every attempt"))
        # From each fault that hit a job to that job's first final notice; never clamped.
        latencies, failed_latencies, fatal_latencies = [], [], []
        for fault in self.faults:
            affected = self.jobs.get(fault.job or "")
            # A fault after the job's notice (a duplicate event of a finished job) hit no work.
            if affected is not None and affected.first_final_at is not None and fault.at < affected.first_final_at:
                latencies.append(affected.first_final_at - fault.at)
                if affected.notices and affected.notices[0].get("status") == "failed":
                    failed_latencies.append(affected.first_final_at - fault.at)
                    if fault.kind == "engine-poison":
                        fatal_latencies.append(affected.first_final_at - fault.at)
        renders = self.segment_renders()
        duplicate_renders = {what: count for what, count in renders.items() if count > 1}
        waiting_samples = [sample for sample in self.samples if sample[1] > 0]
        backlog_s = (waiting_samples[-1][0] - waiting_samples[0][0]) if waiting_samples else 0.0
        kinds: dict[str, int] = {}
        for fault in self.faults:
            kinds[fault.kind] = kinds.get(fault.kind, 0) + 1
        return {
            "benchmark": "chaos",
            "config": {**self.config.__dict__, "seconds": list(self.config.seconds)},
            "wall_s": round(wall_s, 1),
            "faults_stopped_at_s": round(self.faults_stopped_s, 1),
            "jobs_submitted": len(self.jobs),
            "succeeded": succeeded,
            "long_clips": self.config.long_jobs,
            "long_clips_succeeded": long_succeeded,
            "failed_with_notification": failed_ok + failed_unexpected,
            "failed_as_expected": failed_ok,
            "failed_under_chaos": failed_unexpected,
            "lost": lost,
            "still_running_at_the_end": unfinished,
            "duplicate_final_outputs": duplicates,
            "outputs_differing_from_undisturbed": differing,
            "outputs_byte_identical_files": byte_identical,
            "fault_log": [
                {"kind": f.kind, "job": f.job, "detail": f.detail, "at_s": round(f.at - self.began, 2)}
                for f in self.faults
            ],
            "faults": kinds,
            "faults_total": len(self.faults),
            "faults_that_hit_work": len(latencies),
            "fault_to_final_notification_s": spread(latencies),
            "fault_to_final_notification_of_failed_jobs_s": spread(failed_latencies),
            # The doomed-job goal: from the fatal fault (a poison segment's first crash) to the notice.
            "fatal_fault_to_final_notification_s": spread(fatal_latencies),
            "jobs_with_more_than_one_final_notice": duplicates,
            "segments_rendered_more_than_once": len(duplicate_renders),
            "segment_renders_total": sum(renders.values()),
            "duplicate_segment_renders": duplicate_renders,
            "references_s": round(self.references_s, 1),
            "backlog": {
                "render_queues_had_waiting_segments_for_s": round(backlog_s, 1),
                "max_waiting_segments": max((sample[1] for sample in self.samples), default=0),
            },
            "localstack_threads": {
                "peak": max((sample[2] for sample in self.samples), default=None),
                "at_end": self.emulator_threads(),
            },
            "samples": [
                {"at_s": at, "waiting_segments": waiting, "localstack_threads": threads}
                for at, waiting, threads in self.samples
            ],
            "problems": problems,
        }
