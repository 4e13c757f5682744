"""A batch's life in the slicer: opened from its manifest, its items started a window at a time, and its
one summary notice sent when the last item ends.

`open` resolves the targets (keys as named, a prefix's media in key order), writes the batch record and
the open-batch index the watchdog ticks. `advance` starts items while the batch's window has room
(fusionfleet.jobs.batches `room`): each is claimed with a conditional create, so two advances never start
the same item, then prepared and started like any job (`ItemStarter`), quietly unless the batch asked for
every item's notice. A tenant's item, like its jobs, is queued in its tenant's line and started by the
admitter once it holds one of the tenant's slots (a claim by conditional write): it may wait, WAITING,
and keeps its place in the window meanwhile. The slicer advances a batch when it is opened, when an item ends (the state
machine's `TellBatch` message), and on the watchdog's tick (a message lost, an item ended by a cancel or
by the watchdog). An item that ended unsuccessfully on an earlier run and is claimed again (a batch's
retry clears its claim) starts its next run instead (fusionfleet.services.operations). A claim left by a
slicer that died before starting its item is taken over after `STALE_CLAIM_S`; one that died after recording
the item's job but before queueing or starting it is resumed then, as a duplicate event resumes a job.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from fusionfleet import batch_layout, layout
from fusionfleet.adapters.orchestrator import Orchestrator
from fusionfleet.adapters.storage import Storage, put_json
from fusionfleet.errors import JobRejected, ObjectMissing, OperationRefused
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.batches import BatchRecord, BatchTarget, Room, expand_targets, output_stems, room
from fusionfleet.jobs.final_notice import SLICER, FinalNotices, NoticeChannel
from fusionfleet.jobs.ids import ITEM_SEPARATOR, item_id
from fusionfleet.jobs.manifest import MAX_TARGETS, Manifest, invalid_manifest
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.runs import is_cancelled
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.waiting import waiting_in_order
from fusionfleet.messages import ObjectRef
from fusionfleet.services.batch_summary import STALE_CLAIM_S, finish_batch

logger = logging.getLogger(__name__)


SETTLE_S = 10.0  # how long an advance waits for the item that told it it ended to read ended

# Starts one item as a job: "started", or "rejected" (its media refused: it ended at once).
ItemStarter = Callable[[BatchRecord, BatchTarget], Literal["started", "rejected"]]
# Retries an item that ended unsuccessfully (its next run): what `fusionfleet retry <item>` does.
ItemRetrier = Callable[[str], None]
# Resumes an item recorded by a slicer that died before queueing or starting it (True: started or queued now).
ItemResumer = Callable[[BatchRecord, str], bool]


@dataclass(frozen=True)
class Limits:
    """What bounds a batch's items at once: its window, and the stack's and its tenant's job limits (0: none)."""

    window: int
    stack_jobs: int = 0
    tenant_jobs: int = 0


@dataclass(frozen=True)
class Advanced:
    started: tuple[int, ...] = ()
    rejected: tuple[int, ...] = ()
    retried: tuple[int, ...] = ()
    waiting: int = 0  # items not yet started
    why_waiting: str = ""
    summary: str = ""  # the summary's status when this advance sent it


@dataclass
class Batches:
    storage: Storage
    orchestrator: Orchestrator
    work_bucket: str
    state_machine_arn: str
    channels: tuple[NoticeChannel, ...]
    start_item: ItemStarter
    retry_item: ItemRetrier
    resume_item: ItemResumer
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    @property
    def reader(self) -> BatchReader:
        return BatchReader(JobReader(self.storage, self.orchestrator, self.work_bucket, self.state_machine_arn))

    # ------------------------------------------------------------------ opening
    def open(self, batch_id: str, manifest: Manifest, manifest_ref: ObjectRef, submitted_at: str) -> BatchRecord:
        """The batch's record, written once (a duplicate event finds it and changes nothing)."""
        existing = self.reader.reader.batch_record(batch_id)
        if existing is not None:
            # A slicer that died between the record and the open-batch index left the batch unlisted: its
            # redelivered event lists it again, or no tick would ever move it on (until its summary is sent).
            held = FinalNotices(self.storage, self.work_bucket, self.channels).record(batch_id)
            if held is None or not held.published:
                self.reopen(batch_id)
            return existing
        keys = self._targets(manifest, manifest_ref.bucket)
        prefix = manifest.output or layout.default_output_prefix(manifest_ref.key)
        targets = tuple(
            BatchTarget(index=index, key=key, output_stem=stem)
            for index, (key, stem) in enumerate(zip(keys, output_stems(keys, prefix), strict=True))
        )
        record = BatchRecord(
            batch_id=batch_id, tenant=layout.tenant_of(manifest_ref.key), manifest=manifest_ref, output_prefix=prefix,
            priority=manifest.priority, submitted_at=submitted_at, item_notices=manifest.item_notices, targets=targets,
            settings=manifest.model_dump(mode="json", exclude={"targets", "output", "item_notices"}),
        )  # fmt: skip
        put_json(self.storage, self.work_bucket, batch_layout.batch_key(batch_id), record.model_dump(mode="json"))
        self.reopen(batch_id)
        logger.info("batch %s opened with %s items", batch_id, len(targets))
        return record

    def reopen(self, batch_id: str) -> None:
        """List the batch for the watchdog's ticks until its summary is sent."""
        put_json(self.storage, self.work_bucket, batch_layout.open_batch_key(batch_id), {"batch_id": batch_id})

    def _targets(self, manifest: Manifest, bucket: str) -> list[str]:
        """Every target key: a key must exist; a prefix must hold media. All problems are named at once."""
        listed: dict[str, list[str]] = {}
        problems = []
        for index, entry in enumerate(manifest.targets):
            if entry.endswith("/"):
                listed[entry] = self.storage.list_keys(bucket, entry)
                if not expand_targets([entry], listed):
                    problems.append(f"targets[{index}]: no images or videos under s3://{bucket}/{entry}")
                continue
            try:
                self.storage.head(bucket, entry)
            except ObjectMissing:
                problems.append(f"targets[{index}]: s3://{bucket}/{entry} does not exist")
        if problems:
            raise JobRejected("the batch names targets that are not there: " + "; ".join(problems), tuple(problems))
        keys = expand_targets(manifest.targets, listed)
        if len(keys) > MAX_TARGETS:
            raise invalid_manifest([f"targets: {len(keys)} targets in all, more than a batch takes ({MAX_TARGETS})"])
        return keys

    # ------------------------------------------------------------------ advancing
    def advance(
        self, batch_id: str, limits: Limits, running_jobs: Callable[[], list[str]], ended: str = ""
    ) -> Advanced:
        """Start what the window has room for; send the summary when nothing is left to run.

        `running_jobs`: the names of the stack's running executions; `ended`: the item whose end
        triggered this advance (waited for, briefly, until its execution reads ended)."""
        record = self.reader.reader.batch_record(batch_id)
        if record is None:
            logger.warning("batch %s: no record; nothing to advance", batch_id)
            return Advanced()
        if ended:
            self._settle(ended)
        claimed = self.reader.claimed(batch_id)
        cancelled = is_cancelled(self.storage, self.work_bucket, batch_id)
        names = running_jobs()
        # Its items running, and those queued for their tenant's turn (they hold a place in the window too).
        mine = [name for name in names if name.startswith(f"{batch_id}.")] + self._queued_items(record)
        if not cancelled and not ended and not mine:
            # A tick with nothing of the batch running: a claim without a job behind it is a dead slicer's.
            claimed -= self._take_over_stale(record, claimed)
        waiting = [target for target in record.targets if target.index not in claimed]
        started: list[int] = []
        rejected: list[int] = []
        retried: list[int] = []
        why = ""
        if waiting and not cancelled:
            tenant_running = sum(1 for name in names if record.tenant and name.startswith(f"{record.tenant}_"))
            bounds = [
                (limits.stack_jobs, len(names), "stack"),
                (limits.tenant_jobs, tenant_running, f"tenant {record.tenant}"),
            ]
            space = room(limits.window, len(mine), bounds)
            why = space.why
            taken: set[int] = set()
            for target in waiting:
                if len(started) + len(retried) >= space.items:
                    break
                outcome = self._start(record, target)
                taken.add(target.index)
                if outcome:
                    {"started": started, "rejected": rejected, "retried": retried}[outcome].append(target.index)
            waiting = [target for target in waiting if target.index not in taken]
        if started or rejected or retried:
            logger.info("batch %s: started items %s, rejected %s, retried %s; %s waiting",
                        batch_id, started, rejected, retried, len(waiting))  # fmt: skip
        summary = ""
        if (not waiting or cancelled) and not (mine or started or retried):
            summary = self.finish(batch_id)
        return Advanced(tuple(started), tuple(rejected), tuple(retried), len(waiting), why, summary)

    def _queued_items(self, record: BatchRecord) -> list[str]:
        """The batch's items waiting in their tenant's line (one LIST of its waiting index)."""
        if record.tenant is None:
            return []
        head = f"{record.batch_id}{ITEM_SEPARATOR}"
        return [job for _order, job, _key in waiting_in_order(self.storage, self.work_bucket, record.tenant)
                if job.startswith(head)]  # fmt: skip

    def _settle(self, job_id: str, within_s: float = SETTLE_S) -> None:
        """Wait (briefly) for the item that told us it ended to be ended: its tell is its execution's last
        step but one, so its execution may still read RUNNING for a moment."""
        deadline = time.monotonic() + within_s
        records = self.reader.reader.records
        while time.monotonic() < deadline:
            facts = records.facts(job_id, known=False)
            if facts.execution is None or facts.execution.status != JobState.RUNNING:
                return
            time.sleep(0.2)
        logger.info("item %s told its batch it ended, but its execution still runs after %.0f s", job_id, within_s)

    def _start(self, record: BatchRecord, target: BatchTarget) -> Literal["started", "rejected", "retried", ""]:
        key = batch_layout.batch_item_claim_key(record.batch_id, target.index)
        claim = json.dumps({"claimed_at": self.now().isoformat()}).encode()
        if not self.storage.create(self.work_bucket, key, claim):
            return ""  # another advance holds it
        job_id = item_id(record.batch_id, target.index)
        try:
            facts = self.reader.reader.records.facts(job_id, known=False)
            if facts.context is not None and facts.state.unsuccessful and facts.state is not JobState.REJECTED:
                try:
                    self.retry_item(job_id)  # a batch's retry: the item's next run, only its missing segments
                except OperationRefused as refused:
                    # Its cancelled execution is still stopping, say: the next tick tries again.
                    logger.info("batch %s: item %s not retried yet: %s", record.batch_id, target.index, refused.reason)
                    self.storage.delete_prefix(self.work_bucket, key)
                    return ""
                return "retried"
            if facts.context is not None or facts.rejection is not None:
                return "started" if facts.state is JobState.RUNNING else ""
            return self.start_item(record, target)
        except BaseException:
            # Whoever comes next (the retried message, a tick) starts it: the claim must not hold it back.
            self.storage.delete_prefix(self.work_bucket, key)
            raise

    def _take_over_stale(self, record: BatchRecord, claimed: set[int]) -> set[int]:
        """Claims older than STALE_CLAIM_S left by a slicer that died: with neither a job record nor a rejection
        behind them, dropped (claimed again now); with a job record whose execution never started (nor queued),
        the item resumed."""
        records = self.reader.reader.records
        dropped = set()
        for index in sorted(claimed):
            job_id = record.item_id(index)
            if records.json(layout.rejection_key(job_id)) is not None:
                continue
            recorded = records.json(layout.job_key(job_id)) is not None
            if recorded and records.facts(job_id, known=False).execution is not None:
                continue
            held = records.json(batch_layout.batch_item_claim_key(record.batch_id, index)) or {}
            try:
                age = (self.now() - datetime.fromisoformat(str(held.get("claimed_at")))).total_seconds()
            except (TypeError, ValueError):
                age = float("inf")
            if age <= STALE_CLAIM_S:
                continue
            if recorded:
                if self.resume_item(record, job_id):
                    logger.warning("batch %s: item %s was recorded %.0f s ago and never started: resumed",
                                   record.batch_id, index, age)  # fmt: skip
                continue
            logger.warning("batch %s: item %s was claimed %.0f s ago and never started: claiming it again",
                           record.batch_id, index, age)  # fmt: skip
            self.storage.delete_prefix(self.work_bucket, batch_layout.batch_item_claim_key(record.batch_id, index))
            dropped.add(index)
        return dropped

    # ------------------------------------------------------------------ the end
    def finish(self, batch_id: str) -> str:
        return finish_batch(self.reader, self.storage, self.work_bucket, self.channels, batch_id, SLICER, self.now())


__all__ = ["Advanced", "Batches", "Limits", "Room"]
