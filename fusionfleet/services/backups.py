"""Sending straggler backup copies: what the watchdog does about a running job nearly done.

The facts come from the job's segment files alone (one LIST of `segments/`): each segment's winner
record (done, and its render time), its task record (token, worker, current attempt's start) and its
backup claim. The rule is `fusionfleet.fleet.stragglers`; the copy is the segment's render message again,
with the same task token, `copy_number` 1 and the original's worker to avoid, sent to the job's
priority queue. A claim created with a conditional PUT before sending makes it one backup per
segment, even with two watchdogs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from fusionfleet import layout
from fusionfleet.adapters.queues import WorkQueue
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.fleet.stragglers import (
    BackupPolicy,
    BackupSent,
    SegmentProgress,
    backups_due,
    nearly_done,
    straggler_threshold_s,
)
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.runs import RunRecord
from fusionfleet.messages import JobContext, RenderTask, SegmentHold, SegmentRecord

logger = logging.getLogger(__name__)

BACKUP_COPY = 1


class BackupSender:
    def __init__(
        self,
        storage: Storage,
        queue: WorkQueue,
        bucket: str,
        queue_urls: Mapping[str, str],
        policy: BackupPolicy,
    ) -> None:
        self._storage = storage
        self._queue = queue
        self._bucket = bucket
        self._queue_urls = dict(queue_urls)  # priority → render queue URL
        self._policy = policy
        # Finished segments' render times by (job, run): a warm watchdog reads each winner record once.
        self._times: dict[tuple[str, int], dict[int, float]] = {}

    @property
    def enabled(self) -> bool:
        return self._policy.enabled and bool(self._queue_urls)

    def sweep(self, context: JobContext, run: RunRecord, now: float) -> list[BackupSent]:
        """Send the backups one running job is due now; returns what was sent."""
        if not self.enabled:
            return []
        job_id = context.job_id
        indices = set(run.segments) if run.run > 0 and run.segments else set(range(context.segment_count))
        files: dict[str, set[int]] = {"winner": set(), "task": set(), "backup": set()}
        for key in self._storage.list_keys(self._bucket, layout.segments_prefix(job_id)):
            found = layout.parse_run_file(key)
            if found is not None and found.run == run.run and found.index in indices:
                files[found.kind].add(found.index)
        if not nearly_done(len(files["winner"]), len(indices), self._policy):
            return []  # the common case, decided without reading a record
        times = self._render_times(job_id, run.run, files["winner"])
        holds = {index: self._hold(job_id, index, run.run) for index in files["task"] - files["winner"]}
        progress = [
            SegmentProgress(
                index=index,
                render_s=times.get(index),
                running_since=hold.started_at if (hold := holds.get(index)) else None,
                backup_sent=index in files["backup"],
            )
            for index in sorted(indices)
        ]
        due = backups_due(progress, len(indices), now, self._policy)
        if not due:
            return []
        threshold = straggler_threshold_s(list(times.values()), self._policy)
        sent = []
        for index in due:
            hold = holds[index]
            if hold is not None and self._send(context, run.run, index, hold, now, threshold):
                sent.append(BackupSent(job_id, index, hold.worker, round(now - hold.started_at, 1), threshold))
        return sent

    def _render_times(self, job_id: str, run: int, winners: set[int]) -> dict[int, float]:
        known = self._times.setdefault((job_id, run), {})
        for index in winners - known.keys():
            try:
                record = SegmentRecord.model_validate(
                    get_json(self._storage, self._bucket, layout.segment_winner_key(job_id, index, run))
                )
            except ObjectMissing:
                continue
            known[index] = record.total_s
        return known

    def _hold(self, job_id: str, index: int, run: int) -> SegmentHold | None:
        try:
            return SegmentHold.model_validate(
                get_json(self._storage, self._bucket, layout.segment_task_key(job_id, index, run))
            )
        except (ObjectMissing, ValueError):
            return None

    def _send(self, context: JobContext, run: int, index: int, hold: SegmentHold, now: float, threshold: float) -> bool:
        url = self._queue_urls.get(context.priority)
        if url is None:
            return False
        segment = self._segment(context.job_id, index)
        if segment is None:
            return False
        claim = {
            "sent_at": now, "copy_number": BACKUP_COPY, "avoid_worker": hold.worker, "attempt": hold.attempt,
            "age_s": round(now - hold.started_at, 3), "threshold_s": round(threshold, 3),
        }  # fmt: skip
        claim_key = layout.segment_backup_key(context.job_id, index, run)
        if not self._storage.create(self._bucket, claim_key, json.dumps(claim, sort_keys=True).encode()):
            return False  # another sweep sent it
        task = RenderTask(
            task_token=hold.task_token,
            job=context.model_copy(update={"run": run}),
            segment=segment,
            copy_number=BACKUP_COPY,
            avoid_worker=hold.worker,
        )
        # A send that fails leaves the claim: that segment gets no backup (the error is logged by the
        # sweep), which keeps "at most one" without a delete permission.
        self._queue.send(url, task.wire_json())
        return True

    def _segment(self, job_id: str, index: int) -> Segment | None:
        items = get_json(self._storage, self._bucket, layout.plan_key(job_id))
        for item in items if isinstance(items, list) else []:
            if int(item.get("index", -1)) == index:
                return Segment.from_dict(item)
        return None
