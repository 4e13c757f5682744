"""Every environment variable FusionFleet reads, declared once: its name, type, default, the components
that read it, the flag that sets it (if any) and one line for the docs.

A `Setting` is the variable's name (a `str`, usable wherever a name is: `env.get(WORK_BUCKET)`), and
carries the rest. The components' environment classes take their fields from here (`reader`), the
local stack builds each process's environment through those classes, `python -m
fusionfleet.environment.docs` writes docs/configuration.md's tables from this table, and static tests
hold template.yaml and the rest of the code to it (no variable's name is written anywhere else).

A default that belongs to a pure domain policy is read from the policy (written there once); the
policies of modules that call AWS (the watchdog's, the webhooks', the quota check's, the waker's) read
theirs from here instead, so that this table imports no code that calls AWS (tests/static/test_iam.py
follows imports). Where one component reads a variable with another default, `defaults` says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fusionfleet.environment.contract import variable
from fusionfleet.fleet.blocklist import BlockPolicy
from fusionfleet.fleet.stragglers import BackupPolicy
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE
from fusionfleet.jobs.timeouts import DEFAULT_VISIBILITY_S, TimeoutPolicy

# The components, each with its own section in docs/configuration.md.
WORKER = "worker"  # python -m gpu_worker, the render and merge task definitions
FACEFUSION = "facefusion"  # the FaceFusion engine, on the workers
SLICER = "slicer"
DEAD_LETTERS = "dead_letters"
WATCHDOG = "watchdog"
JOB_EVENTS = "job_events"
API = "api"
CLIENT = "client"  # the CLI, the local stack, the dashboard and the development harness
RECORDING = "recording"  # every process: the IAM judge's call recording (a test instrument)
COMPONENTS = (WORKER, FACEFUSION, SLICER, DEAD_LETTERS, WATCHDOG, JOB_EVENTS, API, CLIENT, RECORDING)
FUNCTIONS = (SLICER, DEAD_LETTERS, WATCHDOG, JOB_EVENTS, API)  # the Lambdas
TENANT_ROUND = (SLICER, WATCHDOG, JOB_EVENTS)
REQUIRED: Any = dataclasses.MISSING
Tuple = tuple[str, ...]  # comma-separated


class Setting(str):
    """One variable: the string is its name."""

    kind: Any
    default: Any
    read_by: tuple[str, ...]
    _flag: str | Mapping[str, str] | None
    _doc: str | Mapping[str, str]
    _shown: str | Mapping[str, str] | None
    _defaults: Mapping[str, Any]
    library: str | None  # read by this library, not by FusionFleet's code (no class has a field for it)

    def __new__(
        cls,
        name: str,
        kind: Any,
        default: Any = REQUIRED,
        *,
        read_by: tuple[str, ...],
        doc: str | Mapping[str, str],
        shown: str | Mapping[str, str] | None = None,
        flag: str | Mapping[str, str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        library: str | None = None,
    ) -> Setting:
        setting = super().__new__(cls, name)
        setting.kind, setting.default, setting.read_by, setting._flag = kind, default, read_by, flag
        setting._doc, setting._shown, setting._defaults, setting.library = doc, shown, defaults or {}, library
        unknown = sorted({*read_by, *setting._defaults, *_keys(doc), *_keys(shown), *_keys(flag)} - set(COMPONENTS))
        if unknown:
            raise ValueError(f"{name}: no component {', '.join(unknown)}")
        return setting

    @property
    def name(self) -> str:
        return str(self)

    def default_for(self, component: str) -> Any:
        return self._defaults.get(component, self.default)

    def doc_for(self, component: str) -> str:
        return self._doc if isinstance(self._doc, str) else self._doc[component]

    def flag_for(self, component: str) -> str | None:
        """The flag that sets it for `component`: `--x` of that component's own command (the worker's, the
        CLI's), or `local up --x` (the local stack passes it on)."""
        flag = self._flag
        return flag.get(component) if isinstance(flag, Mapping) else flag

    def shown_for(self, component: str) -> str:
        """The default as the docs write it."""
        shown = self._shown
        if isinstance(shown, str):
            return shown
        if shown is not None and component in shown:
            return shown[component]
        return _shown(self.default_for(component))


def _keys(value: object) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, Mapping) else ()


def _shown(default: Any) -> str:
    if default is REQUIRED:
        return "(required)"
    if default is None or default == ():
        return "none"
    if isinstance(default, bool):
        return "1" if default else "0"
    if isinstance(default, str | Path):
        return f"`{default}`" if str(default) else "empty"
    return f"{default:g}" if isinstance(default, float) else str(default)


def reader(component: str) -> Any:
    """`read(SETTING)`: a dataclass field of `component`'s environment class, named and defaulted by the
    table (fusionfleet.environment.contract); a setting the table does not give `component` is refused."""

    def read(setting: Setting) -> Any:
        if component not in setting.read_by:
            raise ValueError(f"the table does not say {component} reads {setting}")
        return variable(setting, setting.default_for(component))

    return read


# ---- Where AWS is: every process ----------------------------------------------------------------------
AWS_REGION = Setting(
    "AWS_REGION", str, read_by=(*FUNCTIONS, WORKER, CLIENT), defaults={WORKER: ""},
    flag={WORKER: "--region", CLIENT: "--region"},
    shown={SLICER: "(set by Lambda)", JOB_EVENTS: "(set by Lambda)", API: "(set by Lambda)",
           WORKER: "(required, or `AWS_DEFAULT_REGION`)", CLIENT: "the local stack's"},
    doc="the region",
)  # fmt: skip
AWS_DEFAULT_REGION = Setting(
    "AWS_DEFAULT_REGION", str, "", read_by=(WORKER, CLIENT), shown="",
    doc="the SDK's older name for the region, read when `AWS_REGION` is unset",
)  # fmt: skip
AWS_ENDPOINT_URL = Setting(
    "AWS_ENDPOINT_URL", str, None, read_by=(*FUNCTIONS, WORKER), shown="AWS", doc="another endpoint (LocalStack)",
    flag={WORKER: "--endpoint-url"},
)  # fmt: skip

# ---- Workers -------------------------------------------------------------------------------------------
FUSIONFLEET_ROLE = Setting(
    "FUSIONFLEET_ROLE", str, "render", read_by=(WORKER,), flag="--role", doc="`render` or `merge`"
)
FUSIONFLEET_QUEUE_URLS = Setting(
    "FUSIONFLEET_QUEUE_URLS", Tuple, (), read_by=(WORKER,), shown="(required)", flag="--queue-url",
    doc="queues, highest priority first, comma-separated (the flag: once per queue)",
)  # fmt: skip
FUSIONFLEET_WORKER_NAME = Setting(
    "FUSIONFLEET_WORKER_NAME", str, "", read_by=(WORKER,), shown="host-pid", flag="--name",
    doc="the worker's name in logs and segment records",
)  # fmt: skip
FUSIONFLEET_SCRATCH = Setting(
    "FUSIONFLEET_SCRATCH", Path, Path("/tmp/fusionfleet"), read_by=(WORKER, FACEFUSION), defaults={FACEFUSION: None},
    shown={FACEFUSION: "the worker's"}, flag={WORKER: "--scratch"},
    doc={WORKER: "directory for temporary files",
         FACEFUSION: "where the warm engine keeps its inputs and FaceFusion's log"},
)  # fmt: skip
FUSIONFLEET_VISIBILITY_SECONDS = Setting(
    "FUSIONFLEET_VISIBILITY_SECONDS", int, DEFAULT_VISIBILITY_S, read_by=(WORKER,), flag="--visibility-seconds",
    doc="how long a message is held between heartbeats",
)  # fmt: skip
FUSIONFLEET_IDLE_WAIT_SECONDS = Setting(
    "FUSIONFLEET_IDLE_WAIT_SECONDS", int, 1, read_by=(WORKER,), doc="how long an idle worker waits between empty polls"
)
FUSIONFLEET_CPU_THREADS = Setting(
    "FUSIONFLEET_CPU_THREADS", int, 0, read_by=(WORKER,), shown="0 (all)",
    doc="decoder/OpenCV threads per worker when several share a host",
)  # fmt: skip
FUSIONFLEET_PRELOAD_ENGINE = Setting(
    "FUSIONFLEET_PRELOAD_ENGINE", str, None, read_by=(WORKER,), shown="", flag="--preload-engine",
    doc="engine loaded at start rather than on first use",
)  # fmt: skip
FUSIONFLEET_ENGINE_ISOLATION = Setting(
    "FUSIONFLEET_ENGINE_ISOLATION", str, "process", read_by=(WORKER,),
    doc="`inline` runs the engine in the worker process (debugging)",
)  # fmt: skip
FUSIONFLEET_ENGINE_MAX_TASKS = Setting(
    "FUSIONFLEET_ENGINE_MAX_TASKS",
    int,
    100,
    read_by=(WORKER,),
    doc="segments after which the engine process is recycled",
)
FUSIONFLEET_ENGINE_MAX_RSS_MB = Setting(
    "FUSIONFLEET_ENGINE_MAX_RSS_MB", int, 8192, read_by=(WORKER,),
    doc="engine process memory above which it is recycled",
)  # fmt: skip
FUSIONFLEET_ENGINE_MAX_GPU_MB = Setting(
    "FUSIONFLEET_ENGINE_MAX_GPU_MB", int, None, read_by=(WORKER,),
    shown="85 % of the GPU's memory (none without a GPU)", doc="engine GPU memory above which it is recycled",
)  # fmt: skip
FUSIONFLEET_ENGINE_BASE_TIMEOUT_SECONDS = Setting(
    "FUSIONFLEET_ENGINE_BASE_TIMEOUT_SECONDS", float, TimeoutPolicy.engine_base_s, read_by=(WORKER,),
    doc="a segment's wall-clock limit: this much…",
)  # fmt: skip
FUSIONFLEET_SECONDS_PER_FRAME = Setting(
    "FUSIONFLEET_SECONDS_PER_FRAME", float, TimeoutPolicy.engine_seconds_per_frame, read_by=(WORKER,),
    shown=f"{TimeoutPolicy.engine_seconds_per_frame:.1f}", doc="…plus this much a frame",
)  # fmt: skip
FUSIONFLEET_FAULTS_FILE = Setting(
    "FUSIONFLEET_FAULTS_FILE", Path, None, read_by=(WORKER,), shown="", flag="local up --faults-file",
    doc="fault injection rules (chaos runs and tests only)",
)  # fmt: skip
FUSIONFLEET_LIVENESS_FILE = Setting(
    "FUSIONFLEET_LIVENESS_FILE", Path, None, read_by=(WORKER,), shown="",
    doc="the render loop's liveness record, read by the container's health check (`python -m "
    "gpu_worker.lifecycle.health`; the render image and task definition set `/tmp/fusionfleet-liveness.json`; "
    "see [operations](operations.md#a-worker-hung-in-the-gpu-driver))",
)  # fmt: skip
FUSIONFLEET_GPU_HOURLY_PRICE = Setting(
    "FUSIONFLEET_GPU_HOURLY_PRICE", float, DEFAULT_GPU_HOURLY_PRICE, read_by=(WORKER,),
    doc="dollars per On-Demand GPU-hour (g5.xlarge in us-east-1 only: set the region's; the template passes "
    "`GpuHourlyPrice`): a render worker stamps each attempt record with its price, and the merge prices attempts "
    "without one (see [cost](tenants.md#the-true-cost-of-a-job))",
)  # fmt: skip
FUSIONFLEET_GPU_SPOT_HOURLY_PRICE = Setting(
    "FUSIONFLEET_GPU_SPOT_HOURLY_PRICE", float, 0.0, read_by=(WORKER,), shown="0 (priced as On-Demand)",
    doc="dollars per Spot GPU-hour (`GpuSpotHourlyPrice`)",
)  # fmt: skip
FUSIONFLEET_CAPACITY_TYPE = Setting(
    "FUSIONFLEET_CAPACITY_TYPE", str, "on-demand", read_by=(WORKER,),
    doc="what this worker's host is bought as, `on-demand` or `spot`",
)  # fmt: skip
FUSIONFLEET_CAPACITY_FILE = Setting(
    "FUSIONFLEET_CAPACITY_FILE", Path, None, read_by=(WORKER,),
    doc="a file holding it, which wins (the GPU host's user data writes its instance metadata's "
    "`instance-life-cycle` to `/etc/fusionfleet/instance-life-cycle`, mounted read-only into the render task)",
)  # fmt: skip
FUSIONFLEET_WEBHOOK_QUEUE_URL = Setting(
    "FUSIONFLEET_WEBHOOK_QUEUE_URL", str, None, read_by=(WORKER,), shown="none (no events)",
    doc="the webhook queue: a render worker queues a job's `progress` and `preview` events there as its segments "
    "finish (see [webhooks](webhooks.md))",
)  # fmt: skip
WORK_BUCKET = Setting(
    "WORK_BUCKET", str, read_by=(WORKER, SLICER, WATCHDOG, JOB_EVENTS, API), defaults={WORKER: None},
    shown={WORKER: "none (no presence record)"},
    doc={
        WORKER: "the work bucket (the same variable as every other component's), where the worker keeps its "
        "presence record `work/_workers/<name>.json` for `fusionfleet workers`",
        SLICER: "the bucket for plans, segments and records",
        WATCHDOG: "job records and notice records",
        JOB_EVENTS: "subscriptions, delivery records, waiting jobs, tenants' settings and ledgers",
        API: "job records, and the API's records of the jobs it issued (`work/_api/<tenant>/`)",
    },
)  # fmt: skip
FUSIONFLEET_WORKER_BEAT_SECONDS = Setting(
    "FUSIONFLEET_WORKER_BEAT_SECONDS", float, 5.0, read_by=(WORKER,),
    doc="how often that record is refreshed (also at each task's start and end)",
)  # fmt: skip
ECS_AGENT_URI = Setting(
    "ECS_AGENT_URI", str, None, read_by=(WORKER,), shown="(set by ECS; unset locally)",
    doc="the ECS agent's endpoint: the worker protects its task from scale-in while it holds a task (see below); "
    "unset, no protection",
)  # fmt: skip
ECS_CONTAINER_METADATA_URI_V4 = Setting(
    "ECS_CONTAINER_METADATA_URI_V4", str, None, read_by=(WORKER,), shown="(set by ECS; unset locally)",
    doc="the task's own metadata endpoint: between segments the worker asks whether its deployment was replaced "
    "or its service is being deleted, and then retires (finishes its segment, clears its protection, exits); "
    "unset, it never retires that way",
)  # fmt: skip
FUSIONFLEET_MIN_FREE_GPU_MB = Setting(
    "FUSIONFLEET_MIN_FREE_GPU_MB", float, None, read_by=(WORKER,), shown="none (no check)",
    doc="a render worker takes a segment only while its GPUs (`CUDA_VISIBLE_DEVICES`) have this much memory free, "
    "read with nvidia-smi; below it the segment stays queued (`gpu_worker/lifecycle/capacity.py`)",
)  # fmt: skip
FUSIONFLEET_BLOCK_AFTER_FAILURES = Setting(
    "FUSIONFLEET_BLOCK_AFTER_FAILURES", int, 2, read_by=(WORKER,),
    doc="a render worker that fails this many distinct segments of one job stops taking that job's segments "
    "(per-job blocklist; failures of the network or AWS are not counted; needs `WORK_BUCKET`; 0: never)",
)  # fmt: skip
FUSIONFLEET_BLOCK_GRACE_SECONDS = Setting(
    "FUSIONFLEET_BLOCK_GRACE_SECONDS", float, BlockPolicy.stranded_grace_s, read_by=(WORKER,),
    doc="how long every live render worker must have been on a job's blocklist before the job fails with "
    "`WorkersBlocklisted` (a restarting or newly started worker gets this long to show up)",
)  # fmt: skip
FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG = Setting(
    "FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG", int, 0, read_by=(WORKER,),
    doc="a render worker overlaps segments: it takes its next task while one renders when its queues hold at least "
    "this many visible messages, and starts it while the last one finishes (upload, commit, report) in the "
    "background (`gpu_worker/delivery/lookahead.py`; 0: off, the default: measured one job at a time it helped one "
    "worker (render 71.4 → 66.7 s) and slowed 6 and 12 workers (12.4 → 13.2 s, 7.0 → 9.2 s), "
    "`benchmarks/results/fleet-overhead-lookahead-on.json` against "
    "`benchmarks/results/fleet-overhead-lookahead-off.json`; see [scheduling](scheduling.md))",
)  # fmt: skip
CUDA_VISIBLE_DEVICES = Setting(
    "CUDA_VISIBLE_DEVICES", Tuple, (), read_by=(WORKER, FACEFUSION), shown="all",
    doc="the GPUs this worker may see",
)  # fmt: skip

# ---- FaceFusion (on the workers; gpu_worker/engines/facefusion/settings.py) ------------------------------
FUSIONFLEET_FACEFUSION_HOME = Setting(
    "FUSIONFLEET_FACEFUSION_HOME", Path, None, read_by=(FACEFUSION, CLIENT),
    shown={FACEFUSION: "the importable `facefusion` package's checkout", CLIENT: "none"},
    doc={FACEFUSION: "FaceFusion's checkout (`/opt/facefusion` in the image)",
         CLIENT: "`local up` offers the `facefusion` engine when it is set (or the package is importable)"},
)  # fmt: skip
FUSIONFLEET_FACEFUSION_PYTHON = Setting(
    "FUSIONFLEET_FACEFUSION_PYTHON", str, None, read_by=(FACEFUSION, CLIENT),
    shown={FACEFUSION: "the worker's Python", CLIENT: "`.venv-facefusion/bin/python`"},
    doc={FACEFUSION: "the interpreter FaceFusion runs under (`/opt/facefusion-venv/bin/python` in the image: "
         "FaceFusion's own pins)",
         CLIENT: "the interpreter the development harness runs FaceFusion under"},
)  # fmt: skip
FUSIONFLEET_FACEFUSION_MODE = Setting(
    "FUSIONFLEET_FACEFUSION_MODE", str, "warm", read_by=(FACEFUSION,),
    doc="`warm`: one FaceFusion process per engine, frames in memory; `per-segment`: one `headless-run` per segment",
)  # fmt: skip
FUSIONFLEET_GPU_DEVICE = Setting(
    "FUSIONFLEET_GPU_DEVICE", int, None, read_by=(FACEFUSION,), shown="",
    doc="pin the GPU this worker uses (relative to the visible ones)",
)  # fmt: skip
FUSIONFLEET_WORKER_INDEX = Setting(
    "FUSIONFLEET_WORKER_INDEX", int, None, read_by=(FACEFUSION,), shown="",
    doc="spreads worker processes round-robin over a host's GPUs",
)  # fmt: skip
FUSIONFLEET_FACEFUSION_THREADS = Setting(
    "FUSIONFLEET_FACEFUSION_THREADS", int, None, read_by=(FACEFUSION,), shown="from CPUs and GPUs",
    doc="FaceFusion's `--execution-thread-count`",
)  # fmt: skip
FUSIONFLEET_FACEFUSION_TIMEOUT_BASE_S = Setting(
    "FUSIONFLEET_FACEFUSION_TIMEOUT_BASE_S", float, 75.0, read_by=(FACEFUSION,),
    doc="one FaceFusion run counts as hung after this much… (warm: one step, the job's checks or one frame)",
)  # fmt: skip
FUSIONFLEET_FACEFUSION_TIMEOUT_PER_FRAME_S = Setting(
    "FUSIONFLEET_FACEFUSION_TIMEOUT_PER_FRAME_S", float, 1.8, read_by=(FACEFUSION,), doc="…plus this much a frame"
)
FUSIONFLEET_FACEFUSION_RAW_OUTPUT_LIMIT_BYTES = Setting(
    "FUSIONFLEET_FACEFUSION_RAW_OUTPUT_LIMIT_BYTES", int, 4 * 1024**3, read_by=(FACEFUSION,), shown="4 GiB",
    doc="up to this size FaceFusion writes lossless video, above it x264 at quality 100",
)  # fmt: skip

# ---- The Lambdas: slicer, watchdog, job events, API --------------------------------------------------------
STATE_MACHINE_ARN = Setting(
    "STATE_MACHINE_ARN", str, read_by=(SLICER, WATCHDOG, JOB_EVENTS, API),
    doc={SLICER: "the render state machine", WATCHDOG: "the render state machine whose executions it watches",
         JOB_EVENTS: "the render state machine: a tenant's next waiting job starts there",
         API: "the render state machine (status, cancel)"},
)  # fmt: skip
NOTIFICATION_TOPIC_ARN = Setting(
    "NOTIFICATION_TOPIC_ARN", str, read_by=(SLICER, WATCHDOG, API),
    doc={SLICER: "where rejections are published", WATCHDOG: "where the notices it owes are published",
         API: "where a cancel's notice is published"},
)  # fmt: skip
DEFAULT_ENGINE = Setting(
    "DEFAULT_ENGINE", str, "classic", read_by=(SLICER, API), flag="local up --default-engine",
    doc={SLICER: "the engine of jobs that name none",
         API: "the slicer's: a job that names no engine is validated at `POST /jobs` and its start for the engine "
         "it will run on (the template passes `DefaultEngine`)"},
)  # fmt: skip
RENDER_VISIBILITY_SECONDS = Setting(
    "RENDER_VISIBILITY_SECONDS", int, TimeoutPolicy.visibility_s, read_by=(SLICER,),
    flag="local up --visibility-seconds",
    doc="the render queues' visibility (the template passes `RenderVisibilitySeconds`)",
)  # fmt: skip
RENDER_MAX_ATTEMPTS = Setting(
    "RENDER_MAX_ATTEMPTS", int, TimeoutPolicy.max_attempts, read_by=(SLICER,),
    doc="deliveries of a segment before it is dead-lettered (`RenderMaxAttempts`)",
)  # fmt: skip
ACCEPTED_BACKLOG_SECONDS = Setting(
    "ACCEPTED_BACKLOG_SECONDS", int, TimeoutPolicy.accepted_backlog_s, read_by=(SLICER,),
    shown=f"{TimeoutPolicy.accepted_backlog_s} ({TimeoutPolicy.accepted_backlog_s // 3600} h)",
    flag="local up --accepted-backlog-seconds",
    doc="the longest a segment may wait in the queues: each job's task heartbeats and timeouts derive from it "
    "(see [timeouts](operations.md#timeouts-chosen-together))",
)  # fmt: skip
RENDER_CONCURRENCY = Setting(
    "RENDER_CONCURRENCY", int, 1000, read_by=(SLICER,), flag="local up --render-concurrency",
    doc="segments of one job in flight at once",
)  # fmt: skip
MAX_RUNNING_JOBS = Setting(
    "MAX_RUNNING_JOBS", int, 0, read_by=(*TENANT_ROUND, API),
    shown={SLICER: "0 (no limit; 150 on the local stack)", WATCHDOG: "as the slicer's", JOB_EVENTS: "as the slicer's",
           API: "as the slicer's"},
    doc={SLICER: "jobs running at once; past it a new job is refused with a notice saying so",
         WATCHDOG: "the tenant round: the stack's limit a tenant's waiting jobs are admitted under",
         JOB_EVENTS: "the stack's limit, when a job's end admits the next",
         API: "the stack's limit, when a retried job (`POST /jobs/{id}/retry`) is admitted at once"},
)  # fmt: skip
TENANT_MAX_RUNNING_JOBS = Setting(
    "TENANT_MAX_RUNNING_JOBS", int, TenantLimits.max_running_jobs, read_by=(*TENANT_ROUND, API),
    flag="local up --tenant-max-running-jobs",
    shown={SLICER: "0 (no limit; the template's `TenantMaxRunningJobs` 10; 8 on the local stack)",
           WATCHDOG: "as the slicer's", JOB_EVENTS: "as the slicer's", API: "as the slicer's"},
    doc={SLICER: "jobs one tenant runs at once, unless its own settings say otherwise; past it the tenant's new job "
         "waits (`WAITING`) and starts by itself when one ends (see [tenants](tenants.md))",
         WATCHDOG: "the tenant round: the limit a tenant without settings of its own runs under, when it admits "
         "waiting jobs",
         JOB_EVENTS: "the limit of tenants without settings of their own, when a job's end admits the next",
         API: "the limit of tenants without settings of their own, when a retried job is admitted at once"},
)  # fmt: skip
TENANT_MAX_SEGMENTS = Setting(
    "TENANT_MAX_SEGMENTS", int, TenantLimits.max_segments, read_by=(*TENANT_ROUND, API),
    flag="local up --tenant-max-segments",
    shown={SLICER: "0 (no limit; `TenantMaxSegments` 200; 64 on the local stack)",
           WATCHDOG: "as the slicer's", JOB_EVENTS: "as the slicer's", API: "as the slicer's"},
    doc={SLICER: "segments one tenant has in flight, shared evenly among its `TENANT_MAX_RUNNING_JOBS` jobs; needs "
         "that limit, and is at least it",
         WATCHDOG: "the tenant round: the segments in flight of a tenant without settings of its own",
         JOB_EVENTS: "the segments in flight of tenants without settings of their own, when a job's end admits "
         "the next",
         API: "the segments in flight of tenants without settings of their own, when a retried job is admitted"},
)  # fmt: skip
ENCODER_THREADS = Setting(
    "ENCODER_THREADS", int, 2, read_by=(SLICER,), doc="x264 threads, fixed per job so every segment encodes alike"
)
VIDEO_ENCODER_DEVICE = Setting(
    "VIDEO_ENCODER_DEVICE", str, "cpu", read_by=(SLICER,),
    doc="`nvenc`: a job that names no encoder is encoded with NVENC (`h264_nvenc`), fixed per job at planning, and "
    "a job may name `h264_nvenc`/`hevc_nvenc` (refused at submit on a `cpu` fleet); only for a fleet whose every "
    "render worker passed `make device-check` ([occupancy](occupancy.md))",
)  # fmt: skip
GPU_INSTANCE_TYPES = Setting(
    "GPU_INSTANCE_TYPES", Tuple, (), read_by=(SLICER,), shown="none (no check)",
    doc="the render hosts' instance types, comma-separated (the template passes `GpuInstanceType` and "
    "`GpuInstanceTypeAlternative`): a job is refused with a notice while the account's G and VT vCPU quota cannot "
    "start one of them",
)  # fmt: skip
GPU_ON_DEMAND_PERCENTAGE = Setting(
    "GPU_ON_DEMAND_PERCENTAGE", int, 100, read_by=(SLICER,),
    doc="the hosts' On-Demand share (`GpuOnDemandPercentage`): above 0 the On-Demand quota `L-DB2E81BA` is read, "
    "below 100 the Spot quota `L-3819A6DF`; either with room is enough",
)  # fmt: skip
GPU_QUOTA_CACHE_SECONDS = Setting(
    "GPU_QUOTA_CACHE_SECONDS", int, 300, read_by=(SLICER,), doc="how long a quota reading is reused"
)
FLEET_MAX_WORKERS = Setting(
    "FLEET_MAX_WORKERS", int, 0, read_by=(SLICER,), flag="local up --max-workers",
    shown="0 (fixed 2–5 s plans; the template passes `RenderMaxTasks`)",
    doc="the most render workers the fleet may run: plans are sized to it, or to the live render workers when more "
    "run (see [scale](scheduling.md))",
)  # fmt: skip
BATCH_WINDOW = Setting(
    "BATCH_WINDOW", int, 0, read_by=(SLICER,),
    shown="0 (two rounds of the fleet: `2 × max(FLEET_MAX_WORKERS, live render workers)`)",
    doc="items of one batch running at once; each item's end starts the next (see [batches](batches.md))",
)  # fmt: skip
RENDER_CLUSTER = Setting(
    "RENDER_CLUSTER", str, "", read_by=(SLICER,), shown="unset (local stack)",
    doc="the cluster of the render service the slicer raises (AWS stages; the template sets it)",
)  # fmt: skip
RENDER_SERVICE = Setting(
    "RENDER_SERVICE", str, "", read_by=(SLICER,), shown="unset (local stack)",
    doc="the render service the slicer raises the moment a job starts, so a cold fleet starts its first host "
    "without waiting for queue metrics (AWS stages; the template sets it)",
)  # fmt: skip
RENDER_BACKLOG_PER_TASK = Setting(
    "RENDER_BACKLOG_PER_TASK", float, 2.0, read_by=(SLICER,),
    doc="segments per render task when raising the service (the template passes `RenderBacklogPerTask`)",
)  # fmt: skip
WEBHOOK_QUEUE_URL = Setting(
    "WEBHOOK_QUEUE_URL", str, None, read_by=(SLICER, WATCHDOG, JOB_EVENTS, API), defaults={JOB_EVENTS: REQUIRED},
    shown={SLICER: "none (no events)", API: "none (no events)"},
    doc={SLICER: "the webhook queue: a started job's `started` event goes there",
         WATCHDOG: "where an admitted job's `started` event goes",
         API: "where a retried job's `started` event goes when its retry admits it",
         JOB_EVENTS: "the webhook queue (FIFO): events to deliver, and where a job's final event is queued"},
)  # fmt: skip
WEBHOOK_ALLOW_LOOPBACK = Setting(
    "WEBHOOK_ALLOW_LOOPBACK", bool, False, read_by=(SLICER, JOB_EVENTS, API),
    doc={SLICER: "`1` lets a manifest's webhook be `http://` and a loopback address (the local stack's receivers; "
         "never on AWS)",
         JOB_EVENTS: "`1` lets webhooks go to the loopback over `http://` (the local stack); private and link-local "
         "addresses are refused either way",
         API: "`1` lets a job's webhook be `http://` and a loopback address (the local stack only)"},
)  # fmt: skip
WATCHDOG_STALL_SECONDS = Setting(
    "WATCHDOG_STALL_SECONDS", int, 7 * 3600, read_by=(WATCHDOG,),
    flag="local up --watchdog-stall-seconds", shown="25200 (7 h)",
    doc="a running job with no progress for this long is stopped with a failure notice",
)  # fmt: skip
WATCHDOG_DISPATCH_GRACE_SECONDS = Setting(
    "WATCHDOG_DISPATCH_GRACE_SECONDS", int, 300, read_by=(WATCHDOG,),
    flag="local up --watchdog-dispatch-grace-seconds",
    doc="a running job none of whose segments was dispatched this long after it started is stopped",
)  # fmt: skip
RENDER_QUEUE_URLS = Setting(
    "RENDER_QUEUE_URLS", Tuple, (), read_by=(WATCHDOG,), shown="none (no backup copies)",
    doc="the render queues, high, normal, low, comma-separated: where straggler backup copies go (the template and "
    "`local up` pass them)",
)  # fmt: skip
INGEST_QUEUE_URL = Setting(
    "INGEST_QUEUE_URL", str, "", read_by=(WATCHDOG,), shown="none (batches are not ticked)",
    doc="the slicer's queue: every sweep sends a tick there for each batch not yet ended, which the slicer advances "
    "(the template and `local up` pass it)",
)  # fmt: skip
WATCHDOG_BACKUPS = Setting(
    "WATCHDOG_BACKUPS", bool, BackupPolicy.enabled, read_by=(WATCHDOG,), flag="local up --backups",
    doc="`0` turns straggler backup copies off (`local up --no-backups`)",
)  # fmt: skip
WATCHDOG_BACKUP_FACTOR = Setting(
    "WATCHDOG_BACKUP_FACTOR", float, BackupPolicy.factor, read_by=(WATCHDOG,), flag="local up --backup-factor",
    shown=f"{BackupPolicy.factor:.1f}",
    doc="a segment's attempt is a straggler past this × the median time of the job's finished segments…",
)  # fmt: skip
WATCHDOG_BACKUP_MIN_AGE_SECONDS = Setting(
    "WATCHDOG_BACKUP_MIN_AGE_SECONDS", float, BackupPolicy.min_age_s, read_by=(WATCHDOG,),
    flag="local up --backup-min-age-seconds", doc="…and past this many seconds",
)  # fmt: skip
WATCHDOG_BACKUP_DONE_FRACTION = Setting(
    "WATCHDOG_BACKUP_DONE_FRACTION", float, BackupPolicy.done_fraction, read_by=(WATCHDOG,),
    flag="local up --backup-done-fraction", doc="backups only once this share of the job's segments is done…",
)  # fmt: skip
WATCHDOG_BACKUP_LAST_SEGMENTS = Setting(
    "WATCHDOG_BACKUP_LAST_SEGMENTS", int, BackupPolicy.last_segments, read_by=(WATCHDOG,),
    flag="local up --backup-last-segments", doc="…or at most this many are left",
)  # fmt: skip
WEBHOOK_SECRET_PREFIX = Setting(
    "WEBHOOK_SECRET_PREFIX", str, read_by=(JOB_EVENTS,),
    doc="where tenants' `whsec_` secrets live in Secrets Manager: `<prefix>/<tenant>` (`<prefix>/_default` for "
    "`jobs/` drops); the template passes `fusionfleet/<stack>/webhooks`",
)  # fmt: skip
WEBHOOK_RETRY_DELAYS_SECONDS = Setting(
    "WEBHOOK_RETRY_DELAYS_SECONDS", Tuple, (), read_by=(JOB_EVENTS,), shown="`5,30,120,300,900,1800,3600,7200`",
    doc="the pauses after each failed attempt (9 attempts over about 3.9 h)",
)  # fmt: skip
WEBHOOK_TIMEOUT_SECONDS = Setting(
    "WEBHOOK_TIMEOUT_SECONDS", float, 10.0, read_by=(JOB_EVENTS,),
    doc="one attempt's connect, send and answer, in all (less when its batch has less left)",
)  # fmt: skip
WEBHOOK_PROGRESS_EVERY_SECONDS = Setting(
    "WEBHOOK_PROGRESS_EVERY_SECONDS", float, 2.0, read_by=(JOB_EVENTS,),
    doc="a job's progress events at most this often (a preview at most every 10 s)",
)  # fmt: skip
GPU_HOURLY_PRICE = Setting(
    "GPU_HOURLY_PRICE", float, DEFAULT_GPU_HOURLY_PRICE, read_by=(JOB_EVENTS,),
    doc="the price of attempts whose workers did not stamp one, when a job's killed attempts are billed to its tenant",
)  # fmt: skip
GPU_SPOT_HOURLY_PRICE = Setting(
    "GPU_SPOT_HOURLY_PRICE", float, 0.0, read_by=(JOB_EVENTS,), doc="likewise for Spot (0: priced as On-Demand)"
)
MEDIA_BUCKET = Setting("MEDIA_BUCKET", str, read_by=(API,), doc="where tenants' inputs, manifests and outputs live")
TENANT_CLAIM = Setting(
    "TENANT_CLAIM", str, "tenant", read_by=(API,),
    doc="the token claim that names the caller's tenant (`ApiTenantClaim`)",
)  # fmt: skip
UPLOAD_URL_SECONDS = Setting(
    "UPLOAD_URL_SECONDS", int, 300, read_by=(API,), doc="lifetime of the presigned upload URLs"
)
DOWNLOAD_URL_SECONDS = Setting(
    "DOWNLOAD_URL_SECONDS", int, 900, read_by=(API,), doc="lifetime of a finished job's `download_url`"
)
MAX_UPLOAD_MIB = Setting(
    "MAX_UPLOAD_MIB", int, 2048, read_by=(API,),
    doc="largest file a tenant may upload, signed into each presigned POST (`MaxUploadMiB`)",
)  # fmt: skip
API_AUDIENCE = Setting(
    "API_AUDIENCE", str, "", read_by=(API,), shown="empty (not checked again)",
    doc="the token's `aud` (or Cognito's `client_id`) the handler requires, checked again behind API Gateway's "
    "authorizer",
)  # fmt: skip
API_TOKEN_USE = Setting(
    "API_TOKEN_USE", str, "", read_by=(API,), shown="empty (not checked)",
    doc="Cognito's `token_use` the handler requires (`id` or `access`; the template passes `ApiTokenUse`)",
)  # fmt: skip

# ---- The CLI, the local stack, the dashboard and the development harness ------------------------------------
FUSIONFLEET_ENDPOINT_URL = Setting(
    "FUSIONFLEET_ENDPOINT_URL", str, None, read_by=(CLIENT,), flag="--endpoint-url",
    shown="a running local stack, else AWS", doc="AWS endpoint",
)  # fmt: skip
FUSIONFLEET_STACK = Setting(
    "FUSIONFLEET_STACK", str, "fusionfleet", read_by=(CLIENT,), flag="--stack", doc="the stack's name"
)
FUSIONFLEET_LOCAL_DIR = Setting(
    "FUSIONFLEET_LOCAL_DIR", Path, Path(".fusionfleet/local"), read_by=(CLIENT,), flag="--state-dir",
    doc="the local stack's state, logs and scratch",
)  # fmt: skip
FUSIONFLEET_LOCALSTACK_PYTHON = Setting(
    "FUSIONFLEET_LOCALSTACK_PYTHON", str, ".venv-localstack/bin/python", read_by=(CLIENT,),
    doc="the interpreter LocalStack runs under",
)  # fmt: skip
FUSIONFLEET_TARGET = Setting(
    "FUSIONFLEET_TARGET", str, None, read_by=(CLIENT,), flag="--local", shown="a running local stack, else AWS",
    doc="`local` or `aws`: which one the commands talk to (`--local`, `--aws`; "
    "[where a command goes](usage.md#where-a-command-goes))",
)  # fmt: skip
AWS_SHARED_CREDENTIALS_FILE = Setting(
    "AWS_SHARED_CREDENTIALS_FILE", Path, Path("~/.aws/credentials"), read_by=(CLIENT,),
    doc="read by boto3; the CLI only looks whether it exists, to say which stack it talks to when a local one runs too",
)  # fmt: skip
AWS_CONFIG_FILE = Setting(
    "AWS_CONFIG_FILE", Path, Path("~/.aws/config"), read_by=(CLIENT,), doc="likewise",
)  # fmt: skip
FUSIONFLEET_API_URL = Setting(
    "FUSIONFLEET_API_URL", str, None, read_by=(CLIENT,), flag="--api", shown="",
    doc="the job commands go through the HTTP API at this URL",
)  # fmt: skip
FUSIONFLEET_TOKEN = Setting(
    "FUSIONFLEET_TOKEN", str, None, read_by=(CLIENT,), flag="--token", shown="",
    doc="the bearer token for it",
)  # fmt: skip
FUSIONFLEET_FACEFUSION_SOURCE = Setting(
    "FUSIONFLEET_FACEFUSION_SOURCE", Path, None, read_by=(CLIENT,), shown="`../shared/third_party/facefusion-3.8.1`",
    doc="the FaceFusion 3.8.1 checkout the development harness (`fleetctl/harness`: tests, the parity tool) copies "
    "and runs ([engines](engines.md#facefusion-harness-tests-and-ci))",
)  # fmt: skip

# ---- IAM call recording (every process; fusionfleet/environment/recording.py) ------------------------------
FUSIONFLEET_IAM_RECORD_DIR = Setting(
    "FUSIONFLEET_IAM_RECORD_DIR", Path, None, read_by=(RECORDING,), shown="(unset: nothing recorded)",
    doc="the folder the calls are written to (`calls-<process>-<pid>.jsonl`)",
)  # fmt: skip
FUSIONFLEET_IAM_ROLE = Setting(
    "FUSIONFLEET_IAM_ROLE", str, None, read_by=(RECORDING,), shown="(unset: nothing recorded)",
    doc="the template's logical id of the role (or policy) the process's AWS counterpart has",
)  # fmt: skip
FUSIONFLEET_IAM_PROCESS = Setting(
    "FUSIONFLEET_IAM_PROCESS", str, None, read_by=(RECORDING,), shown="the process's `--name`",
    doc="its name in the judge's report",
)  # fmt: skip

# ---- Read by Powertools in every Lambda handler, not by FusionFleet's code -----------------------------------
POWERTOOLS_SERVICE_NAME = Setting(
    "POWERTOOLS_SERVICE_NAME", str, None, read_by=FUNCTIONS, library="Powertools",
    shown="none (the template and `local up` name each function)",
    doc="read by Powertools: the service named in every log line",
)  # fmt: skip
LOG_LEVEL = Setting(
    "LOG_LEVEL", str, "INFO", read_by=FUNCTIONS, library="Powertools", shown="`INFO` (the template's `LogLevel`)",
    doc="read by Powertools: the least severe log line written",
)  # fmt: skip

TABLE: tuple[Setting, ...] = tuple(value for value in list(globals().values()) if isinstance(value, Setting))


POWERTOOLS = frozenset(setting for setting in TABLE if setting.library == "Powertools")


def read_by(component: str) -> tuple[Setting, ...]:
    """The settings `component` reads, in the table's order."""
    return tuple(setting for setting in TABLE if component in setting.read_by)
