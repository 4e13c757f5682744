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
from fusionfleet.environment.contract import POWERTOOLS_SERVICE, env_of
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
    default_engine: str = "classic"
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
    watchdog_dispatch_grace_s: int = 300
    # Straggler backup copies (fusionfleet.fleet.stragglers): the watchdog's rule, as on AWS.
    backups: bool = True
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


@dataclass(frozen=True)
class ProcessEnvironments:
    """The variables `local up` gives each kind of process, beside the AWS ones every process gets."""

    slicer: dict[str, str]
    watchdog: dict[str, str]
    dead_letters: dict[str, str]
    merge: dict[str, str]
    render: dict[str, str]  # the render workers, and the autoscaler that starts them
    api: dict[str, str]


def process_environments(options: UpOptions, resources: StackResources, scratch: Path) -> ProcessEnvironments:
    """Each process's variables from its component's contract (fusionfleet.environment). Only what
    `local up` decides is set: the rest each process inherits from the shell, as it always has. Pure."""
    faults = str(options.faults_file.resolve()) if options.faults_file is not None else None
    workers = env_of(WorkerEnvironment, scratch=scratch, work_bucket=resources.work_bucket, faults_file=faults)
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
    )
    render = env_of(
        WorkerEnvironment,
        queue_urls=resources.render_queue_urls,
        preload_engine=options.default_engine,
        visibility_s=options.visibility_s,
    )
    api = env_of(ApiEnvironment, media_bucket=resources.media_bucket, **stack, tenant_claim=TENANT_CLAIM)
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
    )  # fmt: skip


def _powertools(service: str) -> dict[str, str]:
    """What Powertools reads in a handler's process (its service name in every log line)."""
    return {POWERTOOLS_SERVICE: service}
