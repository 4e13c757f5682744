"""The watchdog's configuration (the scheduled Lambda; the local stack's schedule runner): one class,
each field read from the variable it names, the policies it applies built from the fields."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.environment import settings
from fusionfleet.fleet.stragglers import BackupPolicy
from fusionfleet.jobs.manifest import PRIORITIES
from fusionfleet.services.watchdog import WatchdogPolicy

read = settings.reader(settings.WATCHDOG)


@dataclass(frozen=True)
class WatchdogEnvironment:
    """What the watchdog reads from its environment; defaults are the domain's (WatchdogPolicy, BackupPolicy)."""

    region: str = read(settings.AWS_REGION)
    work_bucket: str = read(settings.WORK_BUCKET)
    state_machine_arn: str = read(settings.STATE_MACHINE_ARN)
    topic_arn: str = read(settings.NOTIFICATION_TOPIC_ARN)
    endpoint_url: str | None = read(settings.AWS_ENDPOINT_URL)
    stall_s: int = read(settings.WATCHDOG_STALL_SECONDS)
    dispatch_grace_s: int = read(settings.WATCHDOG_DISPATCH_GRACE_SECONDS)
    render_queue_urls: tuple[str, ...] = read(settings.RENDER_QUEUE_URLS)
    backups: bool = read(settings.WATCHDOG_BACKUPS)
    backup_factor: float = read(settings.WATCHDOG_BACKUP_FACTOR)
    backup_min_age_s: float = read(settings.WATCHDOG_BACKUP_MIN_AGE_SECONDS)
    backup_done_fraction: float = read(settings.WATCHDOG_BACKUP_DONE_FRACTION)
    backup_last_segments: int = read(settings.WATCHDOG_BACKUP_LAST_SEGMENTS)
    tenant_max_running_jobs: int = read(settings.TENANT_MAX_RUNNING_JOBS)
    tenant_max_segments: int = read(settings.TENANT_MAX_SEGMENTS)
    max_running_jobs: int = read(settings.MAX_RUNNING_JOBS)
    webhook_queue_url: str | None = read(settings.WEBHOOK_QUEUE_URL)
    # The slicer's queue: every sweep ticks each batch not yet ended there (fusionfleet.services.batch_ticks).
    ingest_queue_url: str = read(settings.INGEST_QUEUE_URL)

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
