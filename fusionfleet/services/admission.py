"""The admitter: starts a tenant's waiting jobs in submission order while it has a free slot and budget.

Called by the slicer right after it queues a job (so a tenant with a free slot starts at once), by the
notice follower when one of the tenant's jobs ends (the next one starts within that event), and by
the watchdog every sweep (the backstop). Only one party admits a tenant's jobs at a time: each holds a
lease made with a conditional create of the next generation's record (`work/_tenants/<T>/admit/…`),
released at the end, taken over once it is older than `lease_s` (its holder died). Running jobs are
counted from Step Functions (its list of running executions, by the tenant's `T_` name prefix), plus
the jobs this admitter started lately, described one by one: the list is eventually consistent and may
not show an execution just started.

The count decides who waits, and a slot decides who starts: before its start a job claims one of the
tenant's `max-running-jobs` slots (`work/_tenants/<T>/slots/<k>.json`) with a conditional write, a
create or an If-Match replace of a slot whose job no longer runs. A party that counted before it
stalled past its lease (a slow call: the slicer's Lambda may run 300 s, the lease lasts 60) then finds
every slot taken instead of starting one job too many. A claim whose job has not started yet holds
for `claim_s`, longer than any party runs, so a start under way keeps its slot. A claim names the run
it starts (its execution's name): a job retried after its run ended claims afresh, its last run's claim
held only while that run ran.

Every start of a tenant's run goes through here: a new job (the slicer queues it), a batch's item (the
slicer queues it when its batch's window has room), a retried job (`fusionfleet.services.job_retry`
queues its next run) and a job its budget held (resumed by the watchdog's admitter). None starts by
itself, so none can run past the tenant's slots.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fusionfleet import tenant_layout
from fusionfleet.adapters.orchestrator import ExecutionMissing, Orchestrator, execution_arn
from fusionfleet.adapters.storage import Storage, get_json, put_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.fleet import budget
from fusionfleet.fleet.tenant_settings import TenantSettings, read_settings
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.ids import TENANT_SEPARATOR
from fusionfleet.jobs.ledger import month_of
from fusionfleet.jobs.runs import current_run, execution_name, parse_execution_name
from fusionfleet.jobs.states import segment_counts
from fusionfleet.jobs.waiting import WaitingRecord, dequeue, note_reason, read_waiting, waiting_in_order
from fusionfleet.webhooks.events import WebhookEvent, event_id
from fusionfleet.webhooks.outbox import WebhookOutbox

logger = logging.getLogger(__name__)

# Resumes a job held by its tenant's budget as its next run (an operator's retry, by the farm); the message.
Resume = Callable[[str], str]


@dataclass(frozen=True)
class AdmissionConfig:
    work_bucket: str
    state_machine_arn: str
    stack_limits: TenantLimits = field(default_factory=TenantLimits)  # a tenant's, unless it set its own
    max_running_jobs: int = 0  # the stack's, every tenant together; 0: none
    lease_s: float = 60.0
    recent_s: float = 600.0
    claim_s: float = 900.0  # a slot claimed for a job not started yet: longer than any Lambda may run


@dataclass(frozen=True)
class Admitted:
    job_id: str
    waited_s: float


class Admitter:
    def __init__(
        self,
        storage: Storage,
        orchestrator: Orchestrator,
        config: AdmissionConfig,
        outbox: WebhookOutbox | None = None,
        resume: Resume | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._storage = storage
        self._orchestrator = orchestrator
        self._config = config
        self._outbox = outbox
        self._resume = resume
        self._clock = clock

    def admit(self, tenant: str) -> list[Admitted]:
        """Start what may start of the tenant's waiting jobs, first submitted first; what was started."""
        generation = self._acquire(tenant)
        if generation is None:
            logger.info("admission of tenant %s is held by another party", tenant)
            return []
        try:
            return self._admit(tenant)
        finally:
            self._release(tenant, generation)

    def _admit(self, tenant: str) -> list[Admitted]:
        bucket = self._config.work_bucket
        queued = waiting_in_order(self._storage, bucket, tenant)
        if not queued:
            return []
        now = self._clock()
        settings = read_settings(self._storage, bucket, tenant)
        limit = settings.limits(self._config.stack_limits).max_running_jobs
        month = month_of(now)
        over = budget.is_over(self._storage, bucket, settings, month)
        running, stack_running = self._running(tenant, now)
        started: list[Admitted] = []
        for position, (_order, job_id, index_key) in enumerate(queued):
            record = read_waiting(self._storage, bucket, job_id)
            if record is None:
                self._storage.delete_prefix(bucket, index_key)  # its record went first: it started
                continue
            if self._has_started(record):
                dequeue(self._storage, bucket, record)
                continue
            why = self._why_wait(tenant, settings, over, month, running, limit, stack_running, position - len(started))
            if why:
                note_reason(self._storage, bucket, record, why)
                continue
            if record.resume and self._resume is None:
                # A held job resumes as its next run, which only a party given `resume` makes (the watchdog's):
                # StartExecution with its stopped run's name would find that execution and start nothing.
                note_reason(self._storage, bucket, record, "waiting: it resumes at the watchdog's next sweep")
                break
            if limit and not self._claim_slot(tenant, limit, job_id, now, self._next_name(record)):
                # Counted free, yet every slot is taken: the count was stale (a stalled party) or another
                # party started a job since. It waits, and so does every job after it.
                note_reason(self._storage, bucket, record, self._full(tenant, limit, position - len(started)))
                break
            try:
                self._start(record, now)
            except Exception as error:
                # A held job whose execution is still stopping cannot resume yet: it keeps its place.
                logger.warning("tenant %s: job %s could not start yet: %s", tenant, job_id, error)
                note_reason(self._storage, bucket, record, f"waiting: starting it failed, tried again soon ({error})")
                break
            running.add(job_id)
            stack_running += 1
            started.append(Admitted(job_id, max(0.0, now - record.submitted_at)))
        if started:
            self._remember(tenant, [item.job_id for item in started], now)
        return started

    def _why_wait(
        self, tenant: str, settings: TenantSettings, over: bool, month: str, running: set[str], limit: int,
        stack_running: int, ahead: int,
    ) -> str:  # fmt: skip
        """Why the next waiting job cannot start now ("" when it can)."""
        if over:
            status = budget.marker(self._storage, self._config.work_bucket, settings, month) or {}
            spent = float(str(status.get("spent_usd", 0.0)))
            cap = settings.monthly_budget_usd or 0.0
            return "waiting: " + budget.over_reason(tenant, cap, spent, month, "stop")
        if limit and len(running) >= limit:
            return self._full(tenant, limit, ahead, len(running))
        stack = self._config.max_running_jobs
        if stack and stack_running >= stack:
            return f"waiting: the stack is running {stack_running} jobs, as many as it runs at once ({stack})"
        return ""

    @staticmethod
    def _full(tenant: str, limit: int, ahead: int, running: int | None = None) -> str:
        where = f"; {ahead} of its jobs ahead of this one" if ahead > 0 else ""
        return (
            f"waiting: tenant {tenant} is running {limit if running is None else running} of the {limit} jobs it "
            f"may run at once{where}; it starts by itself when one of them ends"
        )

    def _claim_slot(self, tenant: str, limit: int, job_id: str, now: float, name: str = "") -> bool:
        """One of the tenant's `limit` slots for `job_id`'s run `name` (its execution's), by a conditional
        write; False when all are taken. A retried job's next run claims afresh: its last run's claim held
        only while that run ran."""
        bucket = self._config.work_bucket
        claim = json.dumps({"job_id": job_id, "at": now, **({"name": name} if name else {})}).encode()
        for slot in range(limit):
            key = tenant_layout.admission_slot_key(tenant, slot)
            try:
                data, etag = self._storage.get_tagged(bucket, key)
            except ObjectMissing:
                if self._storage.create(bucket, key, claim):
                    return True
                continue  # another party claimed it first
            try:
                held = json.loads(data)
            except ValueError:
                held = {}
            if held.get("job_id") == job_id:
                if held.get("name", "") == name:
                    return True  # claimed for this run already, by a start that did not finish
                # Its last run's (a job runs one run at a time, and this one is about to start): its own again.
                if self._storage.replace(bucket, key, claim, etag):
                    return True
                continue
            if self._holds(held, now):
                continue
            if self._storage.replace(bucket, key, claim, etag):
                return True
        return False

    def _holds(self, held: dict[str, object], now: float) -> bool:
        """Whether a slot's claim still holds: its job's current run is running, or it was claimed lately and
        its start may still be under way."""
        job_id = str(held.get("job_id") or "")
        if not job_id:
            return False
        name = str(held.get("name") or "") or self._current_name(job_id)
        arn = execution_arn(self._config.state_machine_arn, name)
        try:
            execution = self._orchestrator.describe(arn)
        except ExecutionMissing:
            return now - float(str(held.get("at", 0.0))) < self._config.claim_s
        return execution.running

    def _start(self, record: WaitingRecord, now: float) -> None:
        if record.resume and self._resume is not None:
            message = self._resume(record.job_id)
            logger.info("tenant %s: job %s resumed: %s", record.tenant, record.job_id, message)
        else:
            self._orchestrator.start(self._config.state_machine_arn, record.execution_name, record.execution_input)
            logger.info("tenant %s: job %s started after waiting", record.tenant, record.job_id)
        dequeue(self._storage, self._config.work_bucket, record)
        if self._outbox is not None:
            context = record.execution_input.get("job", {})
            # A held job resumed as its next run: the run the retry recorded.
            run = (
                current_run(self._storage, self._config.work_bucket, record.job_id).run if record.resume else record.run
            )
            started = WebhookEvent(
                event_id=event_id(record.job_id, run, "started"), job_id=record.job_id, run=run, kind="started",
                occurred_at=now,
                data={"segments": segment_counts(0, 0, int(context.get("segment_count", 0))),
                      "priority": context.get("priority"), "waited_s": round(now - record.submitted_at, 3)},
            )  # fmt: skip
            self._outbox.emit_quietly(started)

    def _has_started(self, record: WaitingRecord) -> bool:
        """Started already (a start that crashed before it dequeued the job): only a first run's name tells."""
        if record.resume:
            return False
        arn = execution_arn(self._config.state_machine_arn, record.execution_name)
        try:
            self._orchestrator.describe(arn)
        except ExecutionMissing:
            return False
        return True

    def _running(self, tenant: str, now: float) -> tuple[set[str], int]:
        """(the tenant's running job ids, how many jobs the whole stack runs)."""
        executions = self._orchestrator.running_executions(self._config.state_machine_arn)
        head = f"{tenant}{TENANT_SEPARATOR}"
        jobs = {parse_execution_name(execution.name)[0] for execution in executions if execution.name.startswith(head)}
        seen = {execution.name for execution in executions}
        for job_id, started_at in self._recent(tenant).items():
            if job_id in jobs or now - started_at > self._config.recent_s:
                continue
            record_run = self._current_name(job_id)
            if record_run in seen:
                continue
            try:
                execution = self._orchestrator.describe(execution_arn(self._config.state_machine_arn, record_run))
            except ExecutionMissing:
                continue
            if execution.running:
                jobs.add(job_id)
        return jobs, len(executions)

    def _next_name(self, record: WaitingRecord) -> str:
        """The execution a waiting job's start makes: its record's, or for a held job the run after its current."""
        if not record.resume:
            return record.execution_name
        run = current_run(self._storage, self._config.work_bucket, record.job_id).run
        return execution_name(record.job_id, run + 1)

    def _current_name(self, job_id: str) -> str:
        return execution_name(job_id, current_run(self._storage, self._config.work_bucket, job_id).run)

    # ------------------------------------------------------------------ recent starts and the lease
    def _recent_key(self, tenant: str) -> str:
        return f"{tenant_layout.tenant_records_prefix(tenant)}started.json"

    def _recent(self, tenant: str) -> dict[str, float]:
        try:
            value = get_json(self._storage, self._config.work_bucket, self._recent_key(tenant))
        except ObjectMissing:
            return {}
        return {str(k): float(v) for k, v in value.items()} if isinstance(value, dict) else {}

    def _remember(self, tenant: str, job_ids: list[str], now: float) -> None:
        kept = {k: v for k, v in self._recent(tenant).items() if now - v <= self._config.recent_s}
        kept.update({job_id: now for job_id in job_ids})
        put_json(self._storage, self._config.work_bucket, self._recent_key(tenant), kept)

    def _acquire(self, tenant: str) -> int | None:
        bucket = self._config.work_bucket
        generations = sorted(
            found
            for key in self._storage.list_keys(bucket, tenant_layout.admission_prefix(tenant))
            if (found := tenant_layout.parse_admission_lease_key(key)) is not None
        )
        latest = generations[-1] if generations else 0
        now = self._clock()
        if generations:
            try:
                held = get_json(self._storage, bucket, tenant_layout.admission_lease_key(tenant, latest))
            except ObjectMissing:
                held = {}
            if not held.get("released") and now - float(held.get("at", 0.0)) < self._config.lease_s:
                return None
        mine = latest + 1
        claim = {"at": now, "released": False, "since": datetime.fromtimestamp(now, UTC).isoformat()}
        if not self._storage.create(
            bucket, tenant_layout.admission_lease_key(tenant, mine), json.dumps(claim).encode()
        ):
            return None
        for old in generations[:-2]:
            self._storage.delete_prefix(bucket, tenant_layout.admission_lease_key(tenant, old))
        return mine

    def _release(self, tenant: str, generation: int) -> None:
        key = tenant_layout.admission_lease_key(tenant, generation)
        put_json(self._storage, self._config.work_bucket, key, {"at": self._clock(), "released": True})
