"""This worker's side of the per-job blocklist (fusionfleet.fleet.blocklist): count its failures at each job,
record itself in the job's blocklist when they reach the limit, and know which jobs it left.

The record is one object per worker (`work/<job>/blocklist/<worker>.json`), so two workers joining a
job's list never overwrite each other. Who is alive comes from the presence records.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.fleet.blocklist import BlockPolicy, nobody_left
from fusionfleet.fleet.presence import live_render_workers
from fusionfleet.messages import JobContext

logger = logging.getLogger(__name__)


class Blocklist:
    def __init__(
        self, storage: Storage, worker: str, policy: BlockPolicy, lost_after_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self._storage = storage
        self._worker = worker
        self._policy = policy
        self._lost_after_s = lost_after_s
        self._clock = clock
        # job id → when this worker first saw every live worker listed for it (cleared when one is not)
        self._all_listed_since: dict[str, float] = {}
        # job id → the segments that failed here (since this process started)
        self._failures: dict[str, set[int]] = {}
        self._blocked: dict[str, bool] = {}  # job id → listed; read from the bucket once per job and process

    def note_failure(self, job: JobContext, segment: int, error: str, reason: str) -> bool:
        """Count a failed attempt at `segment` (one that was the host's doing); True when this one put
        the worker on the job's blocklist.

        Distinct segments are counted, as Spark counts distinct tasks per executor: one segment failing
        twice here says more about the segment (a poison one fails everywhere) than about the host,
        and listing the host for it sent the poison segment's last attempt to the back of the queue
        to wait for another worker (the soak at c228519: 222 s)."""
        if not self._policy.counts(error):
            return False
        failed = self._failures.setdefault(job.job_id, set())
        failed.add(segment)
        failures = len(failed)
        if self._blocked.get(job.job_id) or not self._policy.blocks(failures):
            return False
        record = {"worker": self._worker, "failures": failures, "blocked_at": time.time(), "last_error": error,
                  "last_reason": reason[:500]}  # fmt: skip
        self._storage.put_bytes(
            job.work_bucket, layout.blocked_worker_key(job.job_id, self._worker), json.dumps(record).encode(),
            "application/json",
        )  # fmt: skip
        self._blocked[job.job_id] = True
        logger.warning(
            "worker %s failed %s segments of %s: it takes no more of that job's segments", self._worker, failures,
            job.job_id,
        )  # fmt: skip
        return True

    def blocked(self, job: JobContext) -> bool:
        known = self._blocked.get(job.job_id)
        if known is None:
            try:
                self._storage.head(job.work_bucket, layout.blocked_worker_key(job.job_id, self._worker))
                known = True
            except ObjectMissing:
                known = False
            self._blocked[job.job_id] = known
        return known

    def nobody_left(self, job: JobContext) -> list[str] | None:
        """The live render workers, when every one of them is blocklisted for the job; else None."""
        live = live_render_workers(self._storage, job.work_bucket, time.time(), self._lost_after_s)
        listed = {
            key.rsplit("/", 1)[-1].removesuffix(".json")
            for key in self._storage.list_keys(job.work_bucket, layout.blocklist_prefix(job.job_id))
        }
        return sorted(live) if nobody_left(live, listed) else None

    def stranded(self, job: JobContext) -> tuple[list[str] | None, float]:
        """The live render workers once every one of them has been listed for the policy's grace (else
        None), and for how long they have been (0.0 while someone is not).

        Judged by this worker alone, from the first time it saw them all listed: a blocked worker keeps
        meeting the job's segments (it hands them back), and the grace spans a worker's restart."""
        everyone = self.nobody_left(job)
        if everyone is None:
            self._all_listed_since.pop(job.job_id, None)
            return None, 0.0
        now = self._clock()
        listed_for_s = now - self._all_listed_since.setdefault(job.job_id, now)
        return (everyone if self._policy.stranded(listed_for_s) else None), listed_for_s

    def last_failure(self, job: JobContext) -> str:
        """The failure that put this worker on the job's list, as its record says ("" when unknown):
        the cause a user needs when the job fails for want of a worker."""
        try:
            record = get_json(self._storage, job.work_bucket, layout.blocked_worker_key(job.job_id, self._worker))
        except ObjectMissing:
            return ""
        error, reason = record.get("last_error", ""), record.get("last_reason", "")
        return f"{error}: {reason}" if error else ""
