"""The farm's real parties wired to the simulated AWS: the slicer, the admitter, the retries and the readers.

Everything here is the production code (`fusionfleet.services.slicing.Slicer`,
`fusionfleet.services.admission.Admitter`, `fusionfleet.services.operations.Operations`, the CLI's
`Client.status` and `BatchClient.detail`) except one stand-in: preparing a job reads and probes media, so
`SimPreparer` writes the plan and returns a job context built in memory (`tests.support.jobs.job_context`)
— what the protocol needs of it. A retry's admission limits come from the callers' own code: the tenant
API's from its environment (`functions.api.app.admission`), the CLI's and the dashboards' from the local
stack's state file (`fleetctl.admission.stack_admission`, the state written with this stack's limits as
`local up` writes it). No caller here has a webhook queue: no `started` event is sent.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from fleetctl.admission import stack_admission
from fleetctl.batch_client import BatchClient
from fleetctl.client import Client
from fleetctl.connection import Connection
from fleetctl.local.state import LIMITS, LocalState
from fleetctl.stack import StackResources
from functions.api import app as api_app
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.storage import Storage, put_json
from fusionfleet.environment import settings
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.fleet.tenant_settings import TenantSettings
from fusionfleet.jobs.ids import batch_id as derive_batch_id
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.jobs.manifest import Manifest
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.views import JobView
from fusionfleet.messages import BatchItem, JobContext, ObjectRef
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.services.job_retry import JobRetry
from fusionfleet.services.operations import Operations
from fusionfleet.services.preparing import JobPreparer
from fusionfleet.services.slicing import SliceOutcome, Slicer
from fusionfleet.services.tenant_jobs import TenantJobs
from tests.simulation.aws import SimStepFunctions, SimStorage
from tests.simulation.scheduler import Scheduler
from tests.support.fakes import EPOCH, Clock
from tests.support.jobs import MEDIA, WORK, api_config, halves, job_context, slicer_config

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:render"
TOPIC = "arn:aws:sns:us-east-1:123456789012:notifications"
TENANT = "acme"
SOURCE = "inputs/face.jpg"
STACK = "fusionfleet"
LOCAL_PORT = 4566

# Who retries a failed job (`Farm.retry`), and so which limits its run is admitted with at once.
CLI = "cli"  # `fusionfleet retry` and the dashboards: the limits the local stack's state recorded
API = "api"  # `POST /jobs/{id}/retry`: the limits in the API Lambda's environment
BATCH = "batch"  # a batch's retry reaching its item: the slicer's admitter
NO_LIMITS = "no limits"  # the CLI on a stack whose state predates the limits: the job waits for the next admission
RETRIES = (CLI, API, BATCH, NO_LIMITS)


@dataclass(frozen=True)
class SimPreparer:
    """The slicer's media step, stood in: the plan written and a context returned, no media read."""

    storage: Storage
    work_bucket: str

    def prepare(
        self, job_id: str, manifest: Manifest, manifest_ref: ObjectRef, submitted_at: str, run: int = 0,
        batch: BatchItem | None = None, output_stem: str | None = None, tenant_settings: TenantSettings | None = None,
    ) -> tuple[JobContext, int]:  # fmt: skip
        context = job_context(
            job_id, manifest=manifest_ref, work_bucket=self.work_bucket, submitted_at=submitted_at, run=run,
            tenant=layout.tenant_of(manifest_ref.key), batch=batch, segment_count=2,
        )  # fmt: skip
        plan = [segment.to_dict() for segment in halves(context.frame_count)]
        put_json(self.storage, self.work_bucket, layout.plan_key(job_id), plan)
        return context, 0


@dataclass(frozen=True)
class SimSlicer(Slicer):
    """The real slicer with the media step stood in and its admitter on the virtual clock."""

    @property
    def preparer(self) -> JobPreparer:
        return SimPreparer(self.storage, self.config.work_bucket)  # type: ignore[return-value]

    @property
    def admitter(self) -> Admitter:
        config = AdmissionConfig(
            self.config.work_bucket, self.config.state_machine_arn, stack_limits=self.config.tenants,
            max_running_jobs=self.config.max_running_jobs,
        )  # fmt: skip
        return Admitter(self.storage, self.orchestrator, config, self.outbox, clock=self.clock)


class SimNotifier:
    """SNS publish as a checkpoint; what was published is kept for the invariants."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self.published: list[tuple[str, str, dict[str, Any]]] = []

    def publish(self, topic_arn: str, subject: str, message: dict[str, Any]) -> None:
        self._scheduler.checkpoint("sns.publish")
        self.published.append((topic_arn, subject, message))


@dataclass(frozen=True)
class Submitted:
    """A manifest the CLI put and got an ETag for: from then on its id must read as something."""

    key: str
    job_id: str
    batch: bool
    items: int = 0


@dataclass
class Farm:
    """One simulated stack: the virtual clock, the actors, S3, Step Functions, SNS and the parties."""

    tenant_limit: int = 0  # the stack's per-tenant max running jobs; 0: none
    faults: Counter[str] = field(default_factory=Counter)
    clock: Clock = field(default_factory=lambda: Clock(EPOCH))
    scheduler: Scheduler = field(default_factory=Scheduler)

    def __post_init__(self) -> None:
        self.storage = SimStorage(self.scheduler, self.clock, self.faults)
        self.orchestrator = SimStepFunctions(self.scheduler, self.clock, self.faults)
        self.notifier = SimNotifier(self.scheduler)
        self.config = slicer_config(
            WORK, MACHINE, TOPIC, batch_window=2, default_engine="copy", tenant_max_running_jobs=self.tenant_limit
        )
        self.storage.inner.put_bytes(MEDIA, SOURCE, b"face")
        self.storage.inner.put_bytes(MEDIA, "inputs/clip.mp4", b"video")
        self._manifests = 0

    # ------------------------------------------------------------------ the parties
    @property
    def slicer(self) -> SimSlicer:
        return SimSlicer(self.storage, self.orchestrator, self.notifier, self.config, clock=self.clock)

    def admitter(self, lease_s: float = 60.0) -> Admitter:
        config = AdmissionConfig(WORK, MACHINE, stack_limits=self.config.tenants, lease_s=lease_s)
        return Admitter(self.storage, self.orchestrator, config, clock=self.clock)

    @property
    def api(self) -> TenantJobs:
        """The tenants' HTTP API's service (functions/api routes to it): create, start, status, detail, retry."""
        reader = JobReader(self.storage, self.orchestrator, WORK, MACHINE, clock=self.clock)
        operations = self.operations(api_app.admission(self.api_config))
        return TenantJobs(self.storage, reader, operations, MEDIA, WORK, clock=self.clock, default_engine="copy")

    @property
    def api_config(self) -> ApiEnvironment:
        """The API Lambda's environment: this stack's buckets and ARNs, and the limits its slicer has."""
        return api_config(MEDIA, WORK, MACHINE, TOPIC, default_engine="copy", **self.limits)

    @property
    def limits(self) -> dict[str, int]:
        """The stack's admission limits by the names the settings and `local up`'s state give them."""
        return {name: getattr(self.config, name) for name in LIMITS}

    def operations(self, admission: AdmissionConfig | None) -> Operations:
        """Cancel and retry as the CLI, the dashboards and the API build them (`fleetctl.admission.operations`,
        `functions.api.app.tenant_jobs`) on this stack: a tenant's retried job admitted with `admission`."""
        return Operations(self.storage, self.orchestrator, self.notifier, self.resources, self.clock, admission)

    def api_submit(self, batch: bool, created: list[str]) -> Callable[[], str]:
        """A tenant's `POST /jobs` (the id is the tenant's from its answer: appended to `created`), the
        uploads to the presigned forms (S3 puts), then `POST /jobs/{id}/start` (the manifest, the trigger)."""

        def work() -> str:
            body: dict[str, Any] = {"source": ["face.jpg"], "engine": "copy"}
            body.update({"targets": ["clip.mp4", "clip2.mp4"]} if batch else {"target": "clip.mp4"})
            made = self.api.create(TENANT, json.dumps(body).encode())
            created.append(made.job_id)
            files = _media_files()
            for upload in made.uploads:
                self.storage.put_bytes(MEDIA, upload.key, (files / upload.name).read_bytes())
            self.api.start(TENANT, made.job_id)
            return made.job_id

        return work

    def retry(self, job_id: str, via: str = CLI) -> str:
        """A failed job retried: its run queued in its tenant's line, then the tenant admitted at once with the
        limits the caller learns as its own code does (`via`, one of `RETRIES`): the CLI's and the dashboards'
        `Operations` with the local stack's recorded limits (`fleetctl.admission.stack_admission`), the API's
        with its environment's (`functions.api.app.admission`), the slicer's admitter for a batch's retry
        (`JobRetry` with `admit`); or the CLI on a stack whose state recorded no limits, which admits nothing:
        the job waits for the next admission (the watchdog's sweep, a job of the tenant ending)."""
        if via == API:
            return self.operations(api_app.admission(self.api_config)).retry(job_id)
        if via in (CLI, NO_LIMITS):
            conn, env = _local_stack(tuple(sorted(self.limits.items())) if via == CLI else ())
            return self.operations(stack_admission(conn, self.resources, env)).retry(job_id)
        admitter = self.slicer.admitter
        retry = JobRetry(self.storage, self.orchestrator, self.resources, self.clock,
                         admit=lambda tenant: [item.job_id for item in admitter.admit(tenant)])  # fmt: skip
        return retry.retry(job_id)

    def tell_batch(self, batch_id: str, item: str) -> Any:
        """An item's execution told its batch it ended (render.asl.json's TellBatch): the slicer advances it."""
        return self.slicer.advance(batch_id, item)

    def job_status(self, job_id: str) -> JobView:
        """What `fusionfleet status <job>` and `submit --wait` read (fleetctl.client.Client.status)."""
        return Client(self.storage, self.orchestrator, self.resources).status(job_id)

    def batch_detail(self, batch_id: str) -> Any:
        """What `fusionfleet status <batch>` and `submit --wait` of a batch read (BatchClient.detail)."""
        return BatchClient(self.storage, self.orchestrator, MEDIA, WORK, MACHINE).detail(batch_id)

    @property
    def resources(self) -> StackResources:
        return StackResources(
            stage="local", media_bucket=MEDIA, work_bucket=WORK, ingest_queue_url="ingest", ingest_dlq_url="ingest-dlq",
            render_queue_urls=("high", "normal", "low"), render_dlq_url="render-dlq", merge_queue_url="merge",
            merge_dlq_url="merge-dlq", topic_arn=TOPIC, state_machine_arn=MACHINE,
        )  # fmt: skip

    # ------------------------------------------------------------------ the user's side
    def put_manifest(self, batch: bool, tenant: str | None = None) -> Submitted:
        """The CLI's upload of a manifest (its media are there already): the id it prints comes from the ETag."""
        self._manifests += 1
        name = f"clip{self._manifests}"
        key = layout.manifest_key(name, tenant)
        source = f"tenants/{tenant}/{SOURCE}" if tenant else SOURCE
        target = f"tenants/{tenant}/inputs/clip.mp4" if tenant else "inputs/clip.mp4"
        if tenant:
            self.storage.inner.put_bytes(MEDIA, source, b"face")
            self.storage.inner.put_bytes(MEDIA, target, b"video")
        manifest: dict[str, Any] = {"version": 1, "source": [source], "engine": "copy"}
        if batch:
            manifest["targets"] = [target, target.replace("clip.mp4", "clip2.mp4")]
            self.storage.inner.put_bytes(MEDIA, manifest["targets"][1], b"video")
        else:
            manifest["target"] = target
        etag = self.storage.inner.put_bytes(MEDIA, key, json.dumps(manifest).encode(), "application/json")
        derive = derive_batch_id if batch else derive_job_id
        return Submitted(key, derive(MEDIA, key, etag), batch, len(manifest.get("targets", ())))

    def cli_submit(self, batch: bool, tenant: str | None) -> tuple[str, Callable[[], Submitted]]:
        """The CLI's `submit` (fleetctl's Client or BatchClient, uploads and manifest): the manifest's key,
        and the work, which returns what the CLI prints once it has returned."""
        self._manifests += 1
        name = f"clip{self._manifests}"
        key = layout.manifest_key(name, tenant)
        files = _media_files()
        face, clips = [files / "face.jpg"], [files / "clip.mp4", files / "clip2.mp4"]

        def submit() -> Submitted:
            if batch:
                client = BatchClient(self.storage, self.orchestrator, MEDIA, WORK, MACHINE)
                made = client.submit(face, clips, engine="copy", name=name, tenant=tenant)
                return Submitted(made.manifest_key, made.batch_id, True, made.targets)
            job = Client(self.storage, self.orchestrator, self.resources)
            one = job.submit(face, clips[0], engine="copy", name=name, tenant=tenant)
            return Submitted(one.manifest_key, one.job_id, False)

        return key, submit

    def slice(self, key: str) -> SliceOutcome:
        """The slicer handling the manifest's S3 event (the ingest queue's message)."""
        return self.slicer.handle(MEDIA, key)


@cache
def _local_stack(limits: tuple[tuple[str, int], ...]) -> tuple[Connection, dict[str, str]]:
    """The CLI's connection to a local stack and its environment: the state file `local up` wrote for it,
    with these limits recorded (none: a state written before it recorded them)."""
    folder = Path(tempfile.mkdtemp(prefix="fusionfleet-sim-state-"))
    outputs = {"WorkBucketName": WORK, "MediaBucketName": MEDIA, "StateMachineArn": MACHINE}
    state = LocalState(port=LOCAL_PORT, region="us-east-1", stack=STACK, outputs=outputs, limits=dict(limits))
    state.save(folder / "state.json")
    target = AwsTarget(region="us-east-1", endpoint_url=state.endpoint)
    return Connection(target, STACK), {settings.FUSIONFLEET_LOCAL_DIR: str(folder)}


@cache
def _media_files() -> Path:
    """What the CLI uploads: a face and two clips, a few bytes each (the stand-in preparer reads none)."""
    folder = Path(tempfile.mkdtemp(prefix="fusionfleet-sim-"))
    for name, data in (("face.jpg", b"\xff\xd8\xff face"), ("clip.mp4", b"video one"), ("clip2.mp4", b"video two")):
        (folder / name).write_bytes(data)
    return folder
