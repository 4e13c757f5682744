"""What `fusionfleet local up` is asked for (`UpOptions`, its flags' defaults) and the environment it gives
each of the processes it starts, from each component's configuration class (fusionfleet.environment)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fleetctl.local import recording
from fleetctl.local.recording import role_env
from fleetctl.local.tokens import TENANT_CLAIM
from fleetctl.stack import StackResources
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.contract import env_of
from fusionfleet.environment.job_events import JobEventsEnvironment
from fusionfleet.environment.settings import POWERTOOLS_SERVICE_NAME
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.environment.watchdog import WatchdogEnvironment
from fusionfleet.environment.worker import WorkerEnvironment
from fusionfleet.fleet.stragglers import BackupPolicy
from fusionfleet.jobs.timeouts import DEFAULT_VISIBILITY_S

DEFAULT_STACK = "fusionfleet"
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class UpOptions:
    workers: int = 2
    # Above `workers`: an autoscaler process keeps between `workers` and this many render workers
    # (fusionfleet.fleet.autoscale), and the slicer sizes plans to it. None: a fixed fleet, fixed plans.
    max_workers: int | None = None
    backlog_per_worker: float = 1.0
    port: int | None = None
    stack: str = DEFAULT_STACK
    region: str = DEFAULT_REGION
    default_engine: str = SlicerEnvironment.default_engine
    visibility_s: int = DEFAULT_VISIBILITY_S
    # The longest a segment may wait in the render queues; every task timeout derives from it.
    accepted_backlog_s: int = 2 * 3600
    # Segments of one job in flight at once: LocalStack keeps several threads per waiting task.
    render_concurrency: int = 16
    # About 3 threads per segment in flight, and threads share the machine's 32768 process ids:
    # 150 jobs × 16 segments × 3 threads stays well inside them.
    max_running_jobs: int = 150
    # Per tenant: jobs at once, and segments in flight shared among them (8 each).
    tenant_max_running_jobs: int = 8
    tenant_max_segments: int = 64
    watchdog_every_s: float = 10.0
    watchdog_stall_s: int = 2 * 3600 + 1800
    watchdog_dispatch_grace_s: int = WatchdogEnvironment.dispatch_grace_s
    # Straggler backup copies (fusionfleet.fleet.stragglers): the watchdog's rule, as on AWS.
    backups: bool = BackupPolicy.enabled
    backup_factor: float = BackupPolicy.factor
    backup_min_age_s: float = BackupPolicy.min_age_s
    backup_done_fraction: float = BackupPolicy.done_fraction
    backup_last_segments: int = BackupPolicy.last_segments
    faults_file: Path | None = None
    # The dashboard's port on 127.0.0.1; None keeps the running one, or takes a free one.
    dashboard_port: int | None = None
    # The HTTP API's port on 127.0.0.1; None keeps the running one, or takes a free one.
    api_port: int | None = None
    stage_parameters: tuple[tuple[str, str], ...] = ()
    # What a GPU-hour costs on this stack's workers (attempts are billed at it; budgets count it);
    # None: the workers' default (fusionfleet.jobs.cost), or what the shell sets.
    gpu_hourly_price: float | None = None
    # Pauses between a webhook's attempts; None: the deployed default (fusionfleet.webhooks.retry).
    webhook_retry_delays_s: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ProcessEnvironments:
    """The variables `local up` gives each kind of process, beside the AWS ones every process gets."""

    slicer: dict[str, str]
    watchdog: dict[str, str]
    dead_letters: dict[str, str]
    merge: dict[str, str]
    render: dict[str, str]  # the render workers, and the autoscaler that starts them
    api: dict[str, str]
    job_events: dict[str, str]  # the webhook deliverer and the notice follower (two runners, one handler)


def process_environments(options: UpOptions, resources: StackResources, scratch: Path) -> ProcessEnvironments:
    """Each process's variables from its component's contract (fusionfleet.environment). Only what
    `local up` decides is set: the rest each process inherits from the shell, as it always has. Pure."""
    faults = str(options.faults_file.resolve()) if options.faults_file is not None else None
    webhooks = resources.webhook_queue_url or None
    workers = env_of(
        WorkerEnvironment, scratch=scratch, work_bucket=resources.work_bucket, faults_file=faults,
        gpu_hourly_price=options.gpu_hourly_price,
    )  # fmt: skip
    stack = {
        "work_bucket": resources.work_bucket,
        "state_machine_arn": resources.state_machine_arn,
        "topic_arn": resources.topic_arn,
    }
    slicer = env_of(
        SlicerEnvironment,
        **stack,
        default_engine=options.default_engine,
        visibility_s=options.visibility_s,
        accepted_backlog_s=options.accepted_backlog_s,
        render_concurrency=options.render_concurrency,
        max_running_jobs=options.max_running_jobs,
        tenant_max_running_jobs=options.tenant_max_running_jobs,
        tenant_max_segments=options.tenant_max_segments,
        fleet_max_workers=options.max_workers or 0,
        webhook_queue_url=webhooks,
        webhook_allow_loopback=True,
    )
    watchdog = env_of(
        WatchdogEnvironment,
        **stack,
        stall_s=options.watchdog_stall_s,
        dispatch_grace_s=options.watchdog_dispatch_grace_s,
        render_queue_urls=resources.render_queue_urls,
        ingest_queue_url=resources.ingest_queue_url,
        backups=options.backups,
        backup_factor=options.backup_factor,
        backup_min_age_s=options.backup_min_age_s,
        backup_done_fraction=options.backup_done_fraction,
        backup_last_segments=options.backup_last_segments,
        tenant_max_running_jobs=options.tenant_max_running_jobs,
        tenant_max_segments=options.tenant_max_segments,
        max_running_jobs=options.max_running_jobs,
        webhook_queue_url=webhooks,
    )
    render = env_of(
        WorkerEnvironment,
        queue_urls=resources.render_queue_urls,
        preload_engine=options.default_engine,
        visibility_s=options.visibility_s,
        webhook_queue_url=webhooks,
    )
    api = env_of(
        ApiEnvironment, media_bucket=resources.media_bucket, **stack, tenant_claim=TENANT_CLAIM,
        webhook_allow_loopback=True, default_engine=options.default_engine,
        # A tenant's retried job is admitted at once, with the limits the slicer's admitter has.
        tenant_max_running_jobs=options.tenant_max_running_jobs, tenant_max_segments=options.tenant_max_segments,
        max_running_jobs=options.max_running_jobs, webhook_queue_url=webhooks,
    )  # fmt: skip
    delays = tuple(str(delay) for delay in options.webhook_retry_delays_s or ())
    job_events = (
        env_of(
            JobEventsEnvironment, work_bucket=resources.work_bucket, state_machine_arn=resources.state_machine_arn,
            webhook_queue_url=webhooks, secret_prefix=webhook_secret_prefix(options.stack), allow_loopback=True,
            retry_delays_s=delays, tenant_max_running_jobs=options.tenant_max_running_jobs,
            tenant_max_segments=options.tenant_max_segments, max_running_jobs=options.max_running_jobs,
            gpu_hourly_price=options.gpu_hourly_price,
        )
        if webhooks
        else {}
    )  # fmt: skip
    return ProcessEnvironments(
        slicer={**slicer, **_powertools("fusionfleet-slicer"), **role_env(recording.SLICER_ROLE)},
        watchdog={**watchdog, **_powertools("fusionfleet-watchdog"), **role_env(recording.WATCHDOG_ROLE)},
        dead_letters={**_powertools("fusionfleet-dead-letters"), **role_env(recording.DEAD_LETTERS_ROLE)},
        merge={
            **workers, **env_of(WorkerEnvironment, queue_urls=(resources.merge_queue_url,)),
            **role_env(recording.MERGE_ROLE),
        },
        render={**workers, **render, **role_env(recording.RENDER_ROLE)},
        api={**api, **_powertools("fusionfleet-api"), **role_env(recording.API_ROLE)},
        job_events={**job_events, **_powertools("fusionfleet-job-events"), **role_env(recording.JOB_EVENTS_ROLE)},
    )  # fmt: skip


def webhook_secret_prefix(stack: str) -> str:
    """Where the stack's tenants' webhook secrets live in Secrets Manager (the template's, on AWS)."""
    return f"fusionfleet/{stack}/webhooks"


def _powertools(service: str) -> dict[str, str]:
    """What Powertools reads in a handler's process (its service name in every log line)."""
    return {POWERTOOLS_SERVICE_NAME: service}
