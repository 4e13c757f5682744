"""The job watchdog: every accepted job ends in exactly one final notification, whatever the orchestrator does.

The state machine publishes a job's notice itself: an execution that SUCCEEDED did so after its
success notice went out, and one that FAILED with `JobFailed` after its failure notice. Anything
else is a job nobody has told its user about: an execution that timed out, was aborted, or failed
elsewhere (a notice that could not be published), a Map Run that never dispatched its segments, a
job with no progress for too long. The watchdog finds those from Step Functions and the work bucket
alone (no database of our own), stops what is stuck and publishes the one notice that was missing:
the one the state machine had prepared when there is one (a success stays a success), or a failure
that says what happened.

Exactly one: every party that can end a job claims its notice first (`fusionfleet.jobs.final_notice`),
so two sweeps, two watchdogs, a cancel or the state machine reaching its notice as the watchdog stops
it never both publish; a sweep that died between claiming and publishing is finished by a later one once the
claim is older than `reclaim_s`, and so is a state machine's claim whose publish failed.

A retried job has one execution per run (`fusionfleet.jobs.runs`): only its current run is watched, and
the retry removes the old notice record so the new run gets its own notice. A job cancelled by an
operator has its notice record written (published) by the cancel, so its ABORTED execution is left
alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from fusionfleet import layout
from fusionfleet.adapters.notify import Notifier
from fusionfleet.adapters.orchestrator import (
    LISTED_STATUSES,
    Execution,
    ExecutionMissing,
    ExecutionStatus,
    Orchestrator,
    Progress,
)
from fusionfleet.adapters.storage import Storage
from fusionfleet.environment import settings
from fusionfleet.errors import ObjectMissing
from fusionfleet.fleet.stragglers import Backups, BackupSent
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs.facts import JobRecords
from fusionfleet.jobs.final_notice import (
    NOTICE_STATES,
    STATE_MACHINE,
    WATCHDOG,
    FinalNotices,
    NoticeRecord,
    TopicChannel,
    prepared_notice,
    told_by_itself,
    yielded,
)
from fusionfleet.jobs.loss import JobFailedMarker, job_failed
from fusionfleet.jobs.runs import RunRecord, current_run, parse_execution_name
from fusionfleet.jobs.states import NoticeStatus
from fusionfleet.jobs.waiting import is_waiting
from fusionfleet.messages import JobContext
from fusionfleet.services.job_retry import Machine

logger = logging.getLogger(__name__)

# Every execution status but a success may owe its job a notice.
WATCHED = tuple(status for status in LISTED_STATUSES if status != ExecutionStatus.SUCCEEDED)


@dataclass(frozen=True)
class WatchdogPolicy:
    # A running job with nothing written under its work prefix for this long is stuck. Longer than
    # the backlog the stack accepts, so a job waiting its turn is not mistaken for a stuck one.
    stall_s: int = settings.WATCHDOG_STALL_SECONDS.default
    # A running job none of whose segments was dispatched this long after it started is stuck.
    dispatch_grace_s: int = settings.WATCHDOG_DISPATCH_GRACE_SECONDS.default
    # Ended executions older than this are not looked at again.
    horizon_s: int = 24 * 3600
    # A claim without a published notice older than this was left by a sweep that died.
    reclaim_s: int = 120


@dataclass(frozen=True)
class Observation:
    """What Step Functions and the work bucket say about one job."""

    job_id: str
    status: str
    started: datetime | None = None
    stopped: datetime | None = None
    error: str | None = None
    cause: str | None = None
    progress: Progress | None = None
    last_change: datetime | None = None
    # The job's failed marker (fusionfleet.jobs.loss), read only while its execution runs.
    failed: JobFailedMarker | None = None
    # A job whose content analysis is its own step sends no segment before its verdict is kept:
    # `analysing` while it is not, and the verdict's time once it is (its segments' dispatch starts then).
    analysing: bool = False
    analysed_at: datetime | None = None


@dataclass(frozen=True)
class Verdict:
    action: Literal["none", "notify", "stop"]
    error: str = ""
    reason: str = ""


def judge(observation: Observation, now: datetime, policy: WatchdogPolicy) -> Verdict:
    """What the watchdog does about one job. Pure."""
    status = observation.status
    if told_by_itself(status, observation.error):
        return Verdict("none")
    if status != ExecutionStatus.RUNNING:
        detail = ": ".join(part for part in (observation.error, observation.cause) if part)
        return Verdict(
            "notify",
            error=f"Execution{status.title().replace('_', '')}",
            reason=f"the job's execution ended {status}{f' ({detail})' if detail else ''} without a notification",
        )
    if observation.failed is not None:
        # Doomed: LocalStack's Map would dispatch (and the merge gate wait for) every other segment.
        return Verdict("stop", error=observation.failed.error, reason=observation.failed.cause)
    started = observation.started or now
    progress = observation.progress
    dispatched = progress is not None and progress.running + progress.succeeded + progress.failed > 0
    # Its own clocks bound an analysis (fusionfleet.jobs.timeouts); its segments are due once it is done.
    due = max(started, observation.analysed_at) if observation.analysed_at else started
    age = (now - due).total_seconds()
    if not dispatched and not observation.analysing and age > policy.dispatch_grace_s:
        after = "it started" if due == started else "its content analysis ended"
        return Verdict(
            "stop",
            error="JobNeverDispatched",
            reason=f"no segment of the job was dispatched {age:.0f} s after {after} "
            "(the orchestrator never ran its segments)",
        )
    last = max(started, observation.last_change) if observation.last_change else started
    quiet = (now - last).total_seconds()
    if quiet > policy.stall_s:
        return Verdict(
            "stop",
            error="JobStalled",
            reason=f"no progress for {quiet:.0f} s (nothing rendered, checkpointed or merged since "
            f"{last.isoformat(timespec='seconds')})",
        )
    return Verdict("none")


class WatchdogSettings(Machine, Protocol):
    """What the watchdog needs of its configuration (fusionfleet.environment.watchdog)."""

    @property
    def topic_arn(self) -> str: ...
    @property
    def policy(self) -> WatchdogPolicy: ...


@dataclass(frozen=True)
class Closed:
    """A job the watchdog ended with a notice."""

    job_id: str
    action: str
    status: str
    reason: str


class Watchdog:
    def __init__(
        self,
        storage: Storage,
        orchestrator: Orchestrator,
        notifier: Notifier,
        config: WatchdogSettings,
        backups: Backups | None = None,
    ) -> None:
        self._storage = storage
        self._orchestrator = orchestrator
        self._config = config
        self._jobs = JobRecords(storage, orchestrator, config.work_bucket, config.state_machine_arn)
        self._notices = FinalNotices(storage, config.work_bucket, (TopicChannel(notifier, config.topic_arn),))
        # Sends straggler backup copies for running jobs nearly done (None: no backups).
        self._backups = backups
        self.backups_sent: list[BackupSent] = []  # by the last sweep
        # Executions that need nothing more, kept across sweeps of one process (a warm Lambda too).
        self._settled: set[str] = set()

    @property
    def storage(self) -> Storage:
        return self._storage

    def sweep(self, now: datetime | None = None) -> list[Closed]:
        now = now or datetime.now(UTC)
        closed = []
        self.backups_sent = []
        for status in WATCHED:
            for execution in self._orchestrator.list_executions(self._config.state_machine_arn, status):
                if execution.arn in self._settled:
                    continue
                try:
                    outcome = self._check(execution, now)
                except Exception:
                    # One job's trouble must not hide the others: it is looked at again next sweep.
                    logger.exception("watchdog: checking %s failed", execution.arn)
                    continue
                if outcome is not None:
                    closed.append(outcome)
        return closed

    def _check(self, execution: Execution, now: datetime) -> Closed | None:
        policy = self._config.policy
        if execution.stopped and (now - execution.stopped).total_seconds() > policy.horizon_s:
            self._settled.add(execution.arn)
            return None
        job_id, run = self._jobs.job_of(execution)
        context = self._jobs.context(job_id)
        if context is None:
            # Not a job of ours (a Map Run's child execution, or another tool's): nothing to watch.
            self._settled.add(execution.arn)
            return None
        if is_waiting(self._storage, self._config.work_bucket, context.job_id):
            # Held (its tenant's budget is spent): stopped, or still stopping, to wait, not ended; it
            # resumes as its next run, which is watched afresh.
            if execution.finished:
                self._settled.add(execution.arn)
            return None
        current = current_run(self._storage, self._config.work_bucket, context.job_id)
        if run < current.run:
            # An earlier run of a retried job: its successor is the one that owes the notice.
            self._settled.add(execution.arn)
            return None
        record = self._notices.record(context.job_id)
        if record is not None and record.published:
            self._settled.add(execution.arn)
            return None
        if record is not None and record.by == STATE_MACHINE and execution.status != ExecutionStatus.FAILED:
            # The state machine claimed the notice just before publishing it; only an execution that
            # then failed (its publish failed) left it unsent, and that one is finished at once: an
            # ended execution publishes nothing more. One stopped from outside (ABORTED) had most
            # likely sent it: a second notice is the worse mistake.
            if execution.finished:
                self._settled.add(execution.arn)
            return None
        ended_unsent = record is not None and record.by == STATE_MACHINE and execution.finished
        if record is not None and not ended_unsent and record.age_s(now) < policy.reclaim_s:
            return None  # another sweep is publishing it right now
        verdict = judge(self._observe(execution, context, now), now, policy)
        if verdict.action == "none":
            if execution.finished:
                self._settled.add(execution.arn)
            elif self._backups is not None and record is None:
                self._send_backups(context, current, now)
            return None
        # A claim another party left unsent is taken over by a conditional write, as a new one is created:
        # of two sweeps finishing it at once, only one sends
        claimed = (
            self._notices.take_over(context.job_id, WATCHDOG, now, record)
            if record is not None
            else self._notices.claim(context.job_id, WATCHDOG, now, error=verdict.error, reason=verdict.reason)
        )
        return self._close(execution, context, verdict, now, record) if claimed else None

    def _observe(self, execution: Execution, context: JobContext, now: datetime) -> Observation:
        """Only what the rule needs: a young job's map run and work files are not looked at."""
        job_id = context.job_id
        described = self._orchestrator.describe(execution.arn)
        progress = last_change = analysed_at = None
        analysing = False
        age = (now - described.started).total_seconds() if described.started else 0.0
        if described.running and age > self._config.policy.dispatch_grace_s:
            # This run's own Map Run: a retry that dispatched nothing has not progressed.
            progress = self._jobs.run_progress(execution.arn)
            if progress is None and context.content_analysis is not None:
                where = context.content_analysis
                try:
                    analysed_at = self._storage.head(where.bucket, where.key).last_modified
                except ObjectMissing:
                    analysing = True
        if described.running and age > self._config.policy.stall_s:
            # Segments, their records and chunk checkpoints all land under the job's work prefix.
            last_change = self._storage.latest_change(self._config.work_bucket, layout.work_prefix(job_id))
        failed = None
        if described.running:
            marker = job_failed(self._storage, self._config.work_bucket, job_id)
            # Only a marker of this run: a retry's run is not doomed by its predecessor's failure.
            failed = marker if marker is not None and marker.run == parse_execution_name(execution.name)[1] else None
        return Observation(
            job_id=job_id,
            failed=failed,
            status=described.status,
            started=described.started,
            stopped=described.stopped,
            error=described.error,
            cause=described.cause,
            progress=progress,
            last_change=last_change,
            analysing=analysing,
            analysed_at=analysed_at,
        )

    def _send_backups(self, context: JobContext, run: RunRecord, now: datetime) -> None:
        assert self._backups is not None
        try:
            sent = self._backups.sweep(context, run, now.timestamp())
        except Exception:
            # Backups are an optimisation: the job goes on without one.
            logger.exception("watchdog: straggler check of %s failed", context.job_id)
            return
        for item in sent:
            logger.warning(
                "watchdog: segment %s of %s has run %.1f s (threshold %.1f s): backup copy sent, avoiding %s",
                item.index, item.job_id, item.age_s, item.threshold_s, item.avoid_worker,
            )  # fmt: skip
        self.backups_sent.extend(sent)

    def _close(
        self, execution: Execution, context: JobContext, verdict: Verdict, now: datetime,
        taken_over: NoticeRecord | None = None,
    ) -> Closed | None:  # fmt: skip
        job_id = context.job_id
        prepared = verdict.action == "notify"
        if verdict.action == "stop":
            try:
                self._orchestrator.stop(execution.arn, verdict.error, verdict.reason)
            except ExecutionMissing:
                logger.warning("watchdog: execution %s disappeared", execution.arn)
            after = self._orchestrator.describe(execution.arn)
            # Still RUNNING is a stop under way (LocalStack wakes each waiting task first), not a notice.
            if told_by_itself(after.status, after.error):
                # It ended by itself, notice and all, while we were deciding: nothing to add. (Only
                # an execution of a definition older than the notice claim: today it cannot publish
                # while we hold the record.)
                self._notices.mark_published(job_id, STATE_MACHINE, f"it ended {after.status} by itself", now)
                return None
            # It reached its notice as we stopped it and yielded the claim to us: send what it built.
            prepared = yielded(after.status, after.error)
        notice = self._notice(execution, context, verdict, prepared, taken_over)
        self._notices.deliver(job_id, notice, WATCHDOG, now)
        logger.warning("watchdog: job %s ended with a %s notice: %s", job_id, notice["status"], verdict.reason)
        self._settled.add(execution.arn)
        return Closed(job_id, verdict.action, str(notice["status"]), verdict.reason)

    def _notice(
        self, execution: Execution, context: JobContext, verdict: Verdict, prepared: bool,
        taken_over: NoticeRecord | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        notice = prepared_notice(self._orchestrator.state_output(execution.arn, NOTICE_STATES)) if prepared else None
        if notice is not None:
            # The state machine built it and could not publish it: send exactly that, and say why late.
            return {**notice, "notified_by": "watchdog", "watchdog_reason": verdict.reason}
        # A claim another party left unsent (a cancel that died after claiming, or after publishing and
        # before recording it) already says what the job's end is: its notice repeats that, so a user
        # told "cancelled" is never told "failed" for the same job (found by the simulation, seed 3211767875).
        said = taken_over if taken_over is not None and taken_over.status else None
        return {
            "status": said.status if said else NoticeStatus.FAILED,
            "stage": "watchdog",
            "job_id": context.job_id,
            "tenant": notice_tenant(context.tenant),
            "manifest": context.manifest.model_dump(),
            "error": (said.error if said else "") or verdict.error,
            "reason": (said.reason if said else "") or verdict.reason,
            "notified_by": "watchdog",
            **({"watchdog_reason": verdict.reason} if said else {}),
        }
