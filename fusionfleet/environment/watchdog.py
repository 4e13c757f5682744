"""The watchdog's configuration (the scheduled Lambda; the local stack's schedule runner): one class,
each field read from the variable it names, the policies it applies built from the fields."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment.aws import ENV_ENDPOINT, ENV_REGION
from fusionfleet.environment.contract import variable
from fusionfleet.fleet.stragglers import BackupPolicy
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.manifest import PRIORITIES
from fusionfleet.services.watchdog import WatchdogPolicy

ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_STATE_MACHINE = "STATE_MACHINE_ARN"
ENV_TOPIC = "NOTIFICATION_TOPIC_ARN"
ENV_STALL = "WATCHDOG_STALL_SECONDS"
ENV_DISPATCH_GRACE = "WATCHDOG_DISPATCH_GRACE_SECONDS"
ENV_RENDER_QUEUES = "RENDER_QUEUE_URLS"  # high, normal, low; unset: no backup copies
ENV_BACKUPS = "WATCHDOG_BACKUPS"
ENV_BACKUP_FACTOR = "WATCHDOG_BACKUP_FACTOR"
ENV_BACKUP_MIN_AGE = "WATCHDOG_BACKUP_MIN_AGE_SECONDS"
ENV_BACKUP_DONE_FRACTION = "WATCHDOG_BACKUP_DONE_FRACTION"
ENV_BACKUP_LAST_SEGMENTS = "WATCHDOG_BACKUP_LAST_SEGMENTS"
# The tenant round (fusionfleet.services.tenant_sweep): the stack's limits every tenant falls back to,
# and where admitted jobs' `started` webhook events go (unset: none).
ENV_TENANT_MAX_RUNNING_JOBS = "TENANT_MAX_RUNNING_JOBS"
ENV_TENANT_MAX_SEGMENTS = "TENANT_MAX_SEGMENTS"
ENV_MAX_RUNNING_JOBS = "MAX_RUNNING_JOBS"
ENV_WEBHOOK_QUEUE = "WEBHOOK_QUEUE_URL"
ENV_INGEST_QUEUE = "INGEST_QUEUE_URL"  # unset: batches are not ticked


@dataclass(frozen=True)
class WatchdogEnvironment:
    """What the watchdog reads from its environment; defaults are the domain's (WatchdogPolicy, BackupPolicy)."""

    region: str = variable(ENV_REGION)
    work_bucket: str = variable(ENV_WORK_BUCKET)
    state_machine_arn: str = variable(ENV_STATE_MACHINE)
    topic_arn: str = variable(ENV_TOPIC)
    endpoint_url: str | None = variable(ENV_ENDPOINT, None)
    stall_s: int = variable(ENV_STALL, WatchdogPolicy.stall_s)
    dispatch_grace_s: int = variable(ENV_DISPATCH_GRACE, WatchdogPolicy.dispatch_grace_s)
    render_queue_urls: tuple[str, ...] = variable(ENV_RENDER_QUEUES, ())
    backups: bool = variable(ENV_BACKUPS, BackupPolicy.enabled)
    backup_factor: float = variable(ENV_BACKUP_FACTOR, BackupPolicy.factor)
    backup_min_age_s: float = variable(ENV_BACKUP_MIN_AGE, BackupPolicy.min_age_s)
    backup_done_fraction: float = variable(ENV_BACKUP_DONE_FRACTION, BackupPolicy.done_fraction)
    backup_last_segments: int = variable(ENV_BACKUP_LAST_SEGMENTS, BackupPolicy.last_segments)
    tenant_max_running_jobs: int = variable(ENV_TENANT_MAX_RUNNING_JOBS, TenantLimits.max_running_jobs)
    tenant_max_segments: int = variable(ENV_TENANT_MAX_SEGMENTS, TenantLimits.max_segments)
    max_running_jobs: int = variable(ENV_MAX_RUNNING_JOBS, 0)
    webhook_queue_url: str | None = variable(ENV_WEBHOOK_QUEUE, None)
    # The slicer's queue: every sweep ticks each batch not yet ended there (fusionfleet.services.batch_ticks).
    ingest_queue_url: str = variable(ENV_INGEST_QUEUE, "")

    @property
    def policy(self) -> WatchdogPolicy:
        return WatchdogPolicy(stall_s=self.stall_s, dispatch_grace_s=self.dispatch_grace_s)

    @property
    def backup_policy(self) -> BackupPolicy:
        return BackupPolicy(
            enabled=self.backups,
            factor=self.backup_factor,
            min_age_s=self.backup_min_age_s,
            done_fraction=self.backup_done_fraction,
            last_segments=self.backup_last_segments,
        )

    @property
    def render_queues(self) -> dict[str, str]:
        """The render queues by priority (none: no backup copies)."""
        urls = self.render_queue_urls
        return dict(zip(PRIORITIES, urls, strict=True)) if len(urls) == len(PRIORITIES) else {}
